import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type { Slot } from "warp-effect/provider"

// A slot of a lease-based provider of your own: `validUntil` is the holder-side end of its lease
// (counted from when the last successful renewal was sent, minus a margin), `provenAt` when that
// renewal was sent, `gone` whether a renewal found the lease removed or taken over.
interface Lease {
  validUntil: number
  provenAt: number
  gone: boolean
}

export const slotOf = (name: string, index: number, lease: Lease, lost: Deferred.Deferred<void>): Slot => ({
  name,
  index,
  lost: Deferred.await(lost),
  lapsed: Effect.map(Clock.currentTimeMillis, (now) => now >= lease.validUntil),
  // called at the handler's end: note the instant, and say (now or later) whether nobody else can have
  // been granted the slot up to it — true: shown; false: lost, and it cannot be shown; undefined: not known yet
  heldThrough: Effect.map(Clock.currentTimeMillis, (end) =>
    Effect.sync(() => (lease.provenAt >= end || (!lease.gone && end < lease.validUntil) ? true : lease.gone ? false : undefined))
  )
})
