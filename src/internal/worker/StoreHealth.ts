/**
 * Whether the worker can reach its job store, as seen from the store calls it makes. One log line
 * when the store becomes unreachable and one when it answers again (with the outage's length),
 * instead of a warning per failed call; a gauge of finalizing writes waiting for the store.
 *
 * @since 0.2.0
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import { isOutage as StoreErrorOutage } from "../store/StoreError.js"

/** Finalizing writes (finished attempts) waiting for the store to answer. */
export const finalizesPending = Metric.gauge("warp_finalizes_pending", { description: "Finished attempts whose result waits for the job store" })

/** The store's reachability, shared by one worker's calls. */
export interface StoreHealth {
  /** Runs a store call, noting whether it reached the store. */
  readonly observe: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Since when (epoch ms) the store has been unreachable, if it is. */
  readonly downSince: () => number | undefined
  /** The last outage that is over: how long it lasted and when it ended (epoch ms). */
  readonly lastOutage: () => { readonly ms: number; readonly endedAt: number } | undefined
  /**
   * Completes when the store is next seen answering again after an outage (any of the worker's calls
   * gets through). Taken before a call, awaited after it failed: whoever waits to retry retries at
   * once, instead of at its next back-off tick.
   */
  readonly nextReturn: () => Effect.Effect<void>
  /**
   * Runs a store call until it succeeds (observed): back-off from 50 ms doubling to 500 ms, cut short
   * when the store is seen back.
   */
  readonly retrying: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, never, R>
}

const describe = (e: unknown): string => {
  const cause = (e as { cause?: { message?: unknown } })?.cause
  return String(cause?.message ?? (e as { message?: unknown })?.message ?? e)
}

/** A tracker for one worker (`workerId` is named in its log lines). */
export const make = (workerId: string): StoreHealth => {
  let since: number | undefined
  let last: { readonly ms: number; readonly endedAt: number } | undefined
  let back = Deferred.makeUnsafe<void>()
  const nextReturn = () => Deferred.await(back)
  const observe = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    self.pipe(
      Effect.tapError((e) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          if (since !== undefined) return Effect.void
          since = now
          return Effect.logWarning(`worker ${workerId}: job store unreachable (${describe(e)}); retrying until it is back`)
        })
      ),
      Effect.tap(() =>
        since === undefined
          ? Effect.void
          : Effect.flatMap(Clock.currentTimeMillis, (now) => {
              if (since === undefined) return Effect.void
              const seconds = (now - since) / 1000
              last = { ms: now - since, endedAt: now }
              since = undefined
              const returned = back
              back = Deferred.makeUnsafe<void>()
              Deferred.doneUnsafe(returned, Exit.void)
              return Effect.logInfo(`worker ${workerId}: job store reachable again after ${seconds.toFixed(1)} s`)
            })
      )
    )
  const retrying = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, never, R> => {
    const attempt = (delay: number): Effect.Effect<A, never, R> =>
      Effect.suspend(() => {
        const returned = nextReturn()
        return Effect.catch(observe(self), () =>
          Effect.andThen(Effect.raceFirst(Effect.sleep(Duration.millis(delay)), returned), attempt(Math.min(500, delay * 2)))
        )
      })
    return attempt(50)
  }
  return { downSince: () => since, lastOutage: () => last, nextReturn, observe, retrying }
}

/** See `StoreError.isOutage` (it lives with the error, where the store can use it too). */
export const isOutage = StoreErrorOutage
