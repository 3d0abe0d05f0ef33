/**
 * Stable advisory-lock keys.
 *
 * Slots use the one-`bigint` key space of PostgreSQL advisory locks; per-name guards use the
 * two-`int4` key space, which PostgreSQL keeps apart, so a guard can never collide with a slot.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"

const digest = (text: string) => createHash("sha256").update(text, "utf8").digest()

/** The signed 64-bit id (as a decimal string) of a lock name: the first 8 bytes of its SHA-256. */
export const lockId = (name: string): string => digest(name).readBigInt64BE(0).toString()

/** The two signed 32-bit keys of the scan guard of `name` (for `pg_advisory_xact_lock(int4, int4)`). */
export const guardKey = (name: string): readonly [number, number] => {
  const d = digest(name)
  return [d.readInt32BE(0), d.readInt32BE(4)]
}
