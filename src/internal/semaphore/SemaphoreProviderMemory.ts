/**
 * The in-process semaphore provider: per-name slot sets, safe under concurrent fibers (each
 * acquire/release is one synchronous step, so a scan sees one consistent state). Follows the
 * slot-pool rule (`name:0` .. `name:{limit-1}` for every limit). For one process, tests and the
 * memory demo.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import {
  acquireWith,
  type Held,
  randomOffset,
  SemaphoreProvider,
  type SemaphoreProviderService,
  slotName,
  validateLimit
} from "./SemaphoreProvider.js"

/** Builds an in-memory provider (a waiting `tryAcquire` retries every 5 ms). */
export const make: Effect.Effect<SemaphoreProviderService> = Effect.sync(() => {
  const held = new Set<string>()
  /** Per name, the last fencing token handed out. */
  const fences = new Map<string, bigint>()

  const tryOnce = (name: string, limit: number): Option.Option<Held> => {
    const start = randomOffset(limit)
    for (let i = 0; i < limit; i++) {
      const index = (start + i) % limit
      const slot = slotName(name, index)
      if (!held.has(slot)) {
        held.add(slot)
        const fence = (fences.get(name) ?? 0n) + 1n
        fences.set(name, fence)
        return Option.some({ slot: { name, index, lost: Effect.never, fence }, release: Effect.sync(() => held.delete(slot)) })
      }
    }
    return Option.none()
  }

  return {
    tryAcquire: (name, limit, timeout) =>
      Effect.andThen(validateLimit(name, limit), acquireWith(Effect.sync(() => tryOnce(name, limit)), timeout, "5 millis"))
  }
})

/** An in-memory provider Layer (one slot table per Layer instance). */
export const layer: Layer.Layer<SemaphoreProvider> = Layer.effect(SemaphoreProvider, make)
