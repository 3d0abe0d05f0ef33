/**
 * The in-process semaphore provider: per-name slot sets, safe under concurrent fibers (each
 * acquire/release is one synchronous step). For one process, tests and the memory demo.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { pollUntil, randomOffset, SemaphoreError, SemaphoreProvider, type SemaphoreProviderService, type Slot, slotName } from "./SemaphoreProvider.js"

/** Builds an in-memory provider. */
export const make = Effect.sync((): SemaphoreProviderService => {
  const held = new Set<string>()

  const tryOnce = (name: string, limit: number): Option.Option<Slot> => {
    const start = randomOffset(limit)
    for (let i = 0; i < limit; i++) {
      const index = (start + i) % limit
      const slot = slotName(name, index)
      if (!held.has(slot)) {
        held.add(slot)
        return Option.some({ name, index, lost: Effect.never })
      }
    }
    return Option.none()
  }

  return {
    tryAcquire: (name, limit, timeout) => {
      if (!Number.isInteger(limit) || limit < 1) {
        return Effect.fail(new SemaphoreError({ name, message: `limit must be an integer >= 1, got ${limit}` }))
      }
      const acquire = pollUntil(Effect.sync(() => tryOnce(name, limit)), timeout)
      return Effect.acquireRelease(acquire, (slot) =>
        Effect.sync(() => {
          if (Option.isSome(slot)) held.delete(slotName(slot.value.name, slot.value.index))
        })
      )
    }
  }
})

/** An in-memory provider Layer (one per process). */
export const layer: Layer.Layer<SemaphoreProvider> = Layer.effect(SemaphoreProvider, make)
