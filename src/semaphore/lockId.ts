/**
 * Stable 64-bit advisory-lock ids.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"

/** The signed 64-bit id (as a decimal string) of a lock name: the first 8 bytes of its SHA-256. */
export const lockId = (name: string): string => createHash("sha256").update(name, "utf8").digest().readBigInt64BE(0).toString()
