/**
 * The attempt's concurrency slot: a slot an admitting behavior takes through the worker's view of the
 * provider (`ConcurrencySlot.acquiringInto`) is held in the attempt's slot scope, not in the behavior's
 * own scope, and is released when that scope closes (the attempt's release before its finalizing write,
 * or the layer's finalization on any other exit).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as ConcurrencySlot from "../src/internal/attempt/ConcurrencySlot.js"
import * as SemaphoreProviderMemory from "../src/internal/semaphore/SemaphoreProviderMemory.js"

describe("the attempt's concurrency slot", () => {
  it.effect("a slot taken inside a behavior's own scope stays held until the attempt's slot scope closes", () =>
    Effect.gen(function* () {
      const provider = yield* SemaphoreProviderMemory.make
      const seen = ConcurrencySlot.acquiringInto(provider)
      const slot = Context.get(yield* Layer.buildWithScope(ConcurrencySlot.layer, yield* Scope.make()), ConcurrencySlot.ConcurrencySlot)
      // the gate's shape: a scope of its own around the acquisition
      const taken = yield* Effect.scoped(seen.tryAcquire("k", 1, 0)).pipe(Effect.provideService(ConcurrencySlot.SlotScope, slot.scope))
      expect(Option.isSome(taken)).toBe(true)
      // still held: the behavior's scope closed, the attempt's did not
      expect(Option.isNone(yield* Effect.scoped(provider.tryAcquire("k", 1, 0)))).toBe(true)
      yield* ConcurrencySlot.release(slot)
      expect(Option.isSome(yield* Effect.scoped(provider.tryAcquire("k", 1, 0)))).toBe(true)
    }))

  it.effect("the layer's finalization releases a slot the attempt did not release (interruption, defect, timeout)", () =>
    Effect.gen(function* () {
      const provider = yield* SemaphoreProviderMemory.make
      const seen = ConcurrencySlot.acquiringInto(provider)
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(ConcurrencySlot.layer, scope)
      const slot = Context.get(context, ConcurrencySlot.ConcurrencySlot)
      yield* Effect.scoped(seen.tryAcquire("k", 1, 0)).pipe(Effect.provideService(ConcurrencySlot.SlotScope, slot.scope))
      expect(Option.isNone(yield* Effect.scoped(provider.tryAcquire("k", 1, 0)))).toBe(true)
      yield* Scope.close(scope, Exit.interrupt())
      expect(Option.isSome(yield* Effect.scoped(provider.tryAcquire("k", 1, 0)))).toBe(true)
    }))

  it.effect("without a slot scope set, the provider is itself: the slot goes with the caller's scope", () =>
    Effect.gen(function* () {
      const provider = yield* SemaphoreProviderMemory.make
      const seen = ConcurrencySlot.acquiringInto(provider)
      expect(Option.isSome(yield* Effect.scoped(seen.tryAcquire("k", 1, 0)))).toBe(true)
      expect(Option.isSome(yield* Effect.scoped(provider.tryAcquire("k", 1, 0)))).toBe(true)
    }))
})
