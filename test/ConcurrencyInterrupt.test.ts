/**
 * An interrupted attempt gives its slot back only after its handler has stopped, finalizers included:
 * the gate runs the handler in a fiber of its own (raced against `slot.lost`), and the slot's scope
 * closes after that fiber has ended, not merely after it was told to stop.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as ConcurrencyBehavior from "../src/internal/concurrency/ConcurrencyBehavior.js"
import { LOCK_PREFIX } from "../src/internal/concurrency/ConcurrencyBehavior.js"
import { ConcurrencyLimitManager, Job, JobStoreMemory, SemaphoreProviderMemory } from "warp-effect"
import { ConcurrencyPolicy } from "../src/internal/policy/PolicyValues.js"

const attemptOn = (key: string): Job.Attempt =>
  ({ job: { id: `job-${key}`, scheduleTime: new Date() }, policies: { concurrency: new ConcurrencyPolicy({ key, limit: 1, mode: "Wait" }) } }) as unknown as Job.Attempt

describe("Concurrency gate: interruption", () => {
  it.effect("the slot is held until the interrupted handler's finalizers have run", () =>
    Effect.gen(function* () {
      const provider = yield* SemaphoreProviderMemory.make
      const limits = yield* ConcurrencyLimitManager.ConcurrencyLimitManager
      const gate = ConcurrencyBehavior.make(provider, limits, yield* JobStoreMemory.make)
      const entered = yield* Deferred.make<void>()
      const cleaning = yield* Deferred.make<void>()
      const mayFinish = yield* Deferred.make<void>()
      const handler = Effect.andThen(Deferred.succeed(entered, undefined), Effect.never).pipe(
        Effect.onInterrupt(() => Effect.andThen(Deferred.succeed(cleaning, undefined), Deferred.await(mayFinish))),
        Effect.as(Job.Outcome.Succeeded())
      )
      const attempt = yield* Effect.forkChild(Effect.scoped(gate.wrap(attemptOn("k"), handler)))
      yield* Deferred.await(entered)
      const interrupting = yield* Effect.forkChild(Fiber.interrupt(attempt))
      yield* Deferred.await(cleaning)
      // the handler is still cleaning up: its slot must still be taken
      const meanwhile = yield* Effect.scoped(Effect.map(provider.tryAcquire(`${LOCK_PREFIX}k`, 1, 0), Option.isSome))
      yield* Deferred.succeed(mayFinish, undefined)
      yield* Fiber.join(interrupting)
      expect(meanwhile).toBe(false)
      expect(yield* Effect.scoped(Effect.map(provider.tryAcquire(`${LOCK_PREFIX}k`, 1, 0), Option.isSome))).toBe(true)
    }).pipe(Effect.provide(ConcurrencyLimitManager.layerMemory))
  )

  it.effect("slot lost: the handler is stopped, and has ended, before the attempt says Requeued", () =>
    Effect.gen(function* () {
      const lost = yield* Deferred.make<void>()
      const slotProvider = {
        tryAcquire: () => Effect.succeed(Option.some({ name: "k", index: 0, lost: Deferred.await(lost) }))
      }
      const limits = yield* ConcurrencyLimitManager.ConcurrencyLimitManager
      const gate = ConcurrencyBehavior.make(slotProvider, limits, yield* JobStoreMemory.make)
      const entered = yield* Deferred.make<void>()
      let cleaned = false
      const handler = Effect.andThen(Deferred.succeed(entered, undefined), Effect.never).pipe(
        Effect.onInterrupt(() => Effect.andThen(Effect.yieldNow, Effect.sync(() => void (cleaned = true)))),
        Effect.as(Job.Outcome.Succeeded())
      )
      const attempt = yield* Effect.forkChild(Effect.scoped(gate.wrap(attemptOn("k"), handler)))
      yield* Deferred.await(entered)
      yield* Deferred.succeed(lost, undefined)
      const outcome = yield* Fiber.join(attempt)
      expect(outcome._tag).toBe("Requeued")
      // lost to the runtime, not sent back by the key being full: the job keeps its place in line
      expect(outcome).toMatchObject({ reason: "Slot of 'k' lost while running (connection to the semaphore provider died); requeued", keepsPlace: true })
      expect(cleaned).toBe(true)
    }).pipe(Effect.provide(ConcurrencyLimitManager.layerMemory))
  )
})
