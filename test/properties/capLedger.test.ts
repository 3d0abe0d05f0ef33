/**
 * The ledger of the cap models (`test/support/capModel.ts`) catches what it is meant to: a "full"
 * answer with a free slot, a grant beyond the limit, and too many handlers inside; and, for a provider
 * whose replies may come back in any order (PostgreSQL), it does not take a reordered reply for a bug.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { SemaphoreProviderMemory } from "warp-effect"
import type { SemaphoreProviderService, Slot } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { Ledger } from "../support/capModel.js"

const alwaysFull: SemaphoreProviderService = { tryAcquire: () => Effect.succeed(Option.none()) }
const alwaysGranted: SemaphoreProviderService = { tryAcquire: (name) => Effect.succeed(Option.some<Slot>({ name, index: 0, lost: Effect.never })) }

describe("cap model ledger", () => {
  for (const exact of [true, false]) {
    it.effect(`flags a full answer with a free slot (exactRelease ${exact})`, () =>
      Effect.gen(function* () {
        const ledger = new Ledger(exact)
        yield* ledger.provider(alwaysFull).tryAcquire("n", 1, 0)
        expect(ledger.problems()).toHaveLength(1)
      }))
  }

  it.effect("flags a grant beyond the limit (exactRelease) and a handler over the limit", () =>
    Effect.gen(function* () {
      const ledger = new Ledger(true)
      const p = ledger.provider(alwaysGranted)
      yield* p.tryAcquire("n", 1, 0)
      yield* p.tryAcquire("n", 1, 0)
      expect(ledger.problems()).toEqual([expect.stringContaining("granted to job undefined with 1 of 1 already held")])
      const gate = yield* Deferred.make<void>()
      const entered = yield* Deferred.make<void>()
      const a = yield* Effect.forkChild(ledger.hold("a", { name: "k", limit: 1 }, { group: "g", limit: 1 }, Effect.andThen(Deferred.succeed(entered, undefined), Deferred.await(gate))))
      yield* Deferred.await(entered)
      yield* ledger.hold("b", { name: "other", limit: 1 }, { group: "g", limit: 1 }, Effect.void)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(a)
      expect(ledger.violations).toContain("2 handlers inside 'group:g' (limit 1) as job b entered")
    }))

  it.effect("a full answer whose reply overtook a concurrent grant's is no problem (exactRelease off)", () =>
    Effect.gen(function* () {
      const inner = yield* SemaphoreProviderMemory.make
      // the first call is granted, but its reply is held back until the second (full) has answered
      const held = yield* Deferred.make<void>()
      const delayed: SemaphoreProviderService = {
        tryAcquire: (name, limit, t) => Effect.tap(inner.tryAcquire(name, limit, t), (s) => (Option.isSome(s) ? Deferred.await(held) : Effect.void))
      }
      const ledger = new Ledger(false)
      const p = ledger.provider(delayed)
      const first = yield* Effect.forkChild(p.tryAcquire("n", 1, 0))
      yield* Effect.yieldNow
      expect(Option.isNone(yield* p.tryAcquire("n", 1, 0))).toBe(true)
      yield* Deferred.succeed(held, undefined)
      expect(Option.isSome(yield* Fiber.join(first))).toBe(true)
      expect(ledger.problems()).toEqual([])
    }))
})
