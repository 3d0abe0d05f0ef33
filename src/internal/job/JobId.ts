/**
 * Job ids: UUID version 7 (RFC 9562) — time-ordered, so "newest first" is "largest id first" in
 * every store.
 *
 * @since 0.1.0
 */
import { randomFillSync } from "node:crypto"

// random bytes are drawn 4 KiB at a time: one `randomBytes(16)` call per id cost more than the rest of
// an enqueue's CPU work in a bulk enqueue
const pool = Buffer.alloc(4096)
let poolAt = pool.length

const random16 = (): Buffer => {
  if (poolAt + 16 > pool.length) {
    randomFillSync(pool)
    poolAt = 0
  }
  const b = Buffer.from(pool.subarray(poolAt, poolAt + 16))
  poolAt += 16
  return b
}

let lastMs = 0
let seq = 0

/** A new time-ordered UUIDv7; monotonic within one process. */
export const make = (): string => {
  let ms = Date.now()
  if (ms <= lastMs) {
    seq++
    if (seq > 0xfff) {
      lastMs++
      seq = 0
    }
    ms = lastMs
  } else {
    lastMs = ms
    seq = 0
  }
  const b = random16()
  b.writeUIntBE(ms, 0, 6)
  b[6] = 0x70 | ((seq >> 8) & 0x0f)
  b[7] = seq & 0xff
  b[8] = (b[8]! & 0x3f) | 0x80
  const h = b.toString("hex")
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}
