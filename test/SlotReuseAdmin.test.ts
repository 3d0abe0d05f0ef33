/**
 * Slot reuse and admin overrides: a job runs under a reused slot only if its own admission would have
 * given it that slot now. The test holds slot 0 of the key itself, so the worker's first job (limit 2)
 * takes slot 1; its handler lowers the key's limit to 1 and frees slot 0. The next job of the key,
 * claimed while slot 1 is still held, must not run under slot 1 (not a slot of limit 1): it goes
 * through the gate and gets slot 0.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { Concurrency, ConcurrencyLimitManager, Contract, Handler, JobParameters, Publisher, SemaphoreProvider, Worker } from "warp-effect"
import { detail, drained } from "./support/runtime.js"
import { workerEnvs } from "./support/env.js"

const Step = Contract.job("ReuseStep", Schema.Struct({ i: Schema.Number }))
const KEY = "reuse-admin"

describe("slot reuse honours an admin override lowered below the held slot", () => {
  for (const [name, envOf] of workerEnvs) {
    it.live(`${name}: the next job of the key is admitted afresh, to a slot of the new limit`, () => {
      const slots = new Map<number, number>()
      const holderScope = Effect.runSync(Scope.make())
      const firstRan = Deferred.makeUnsafe<void>()
      // what the first job's handler does, set once the environment is built
      let lowerLimit: Effect.Effect<void> = Effect.void
      const handler = Handler.job(Step, ({ i }, info) =>
        Effect.gen(function* () {
          slots.set(i, info.slot?.index ?? -1)
          if (i === 0) {
            yield* lowerLimit
            yield* Scope.close(holderScope, Exit.void)
            yield* Deferred.succeed(firstRan, undefined)
          }
        })
      )
      return Effect.gen(function* () {
        const provider = yield* SemaphoreProvider.SemaphoreProvider
        const limits = yield* ConcurrencyLimitManager.ConcurrencyLimitManager
        lowerLimit = Effect.orDie(limits.addOrUpdateLimit(KEY, 1))
        const held = yield* provider.tryAcquire(`warp:concurrency:${KEY}`, 1, 0).pipe(Scope.provide(holderScope))
        expect(Option.map(held, (s) => s.index)).toEqual(Option.some(0))
        const p = yield* Publisher.Publisher
        const params = JobParameters.make().withSemaphore(KEY, 2, "Wait")
        const ids = yield* Effect.forEach([0, 1, 2], (i) => p.enqueue(Step, { i }, params))
        yield* Effect.scoped(
          Effect.andThen(
            Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "5 millis", slotReuse: {}, maxBatch: 1 }),
            Effect.andThen(Deferred.await(firstRan), drained(30_000))
          )
        )
        for (const id of ids) expect((yield* detail(id)).job.state).toBe("Succeeded")
        expect(slots.get(0)).toBe(1)
        // admitted afresh under limit 1: slot 0, never the held slot 1
        expect(slots.get(1)).toBe(0)
        expect(slots.get(2)).toBe(0)
      }).pipe(Effect.provide(envOf([handler])))
    })
  }
})
