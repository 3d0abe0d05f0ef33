/**
 * A claim whose handler never ran is not an attempt: attempt numbers and retry budgets count handler
 * runs, not the Wait requeues of a full key (before, one job showed 13 attempts from requeues alone).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Contract, Handler, JobStore, Mutex, Publisher, Retry, Warp } from "warp-effect"
import { freshPgLayer } from "./support/db.js"

const Hold = Contract.job("AttemptsHold", Schema.Struct({}), { policy: [Mutex("attempts-key", { mode: "Wait" })] })
const Flaky = Contract.job("AttemptsFlaky", Schema.Struct({}), {
  policy: [Mutex("attempts-key", { mode: "Wait" }), Retry(2, { initialDelay: "1 millis" })]
})

type Handlers = ReadonlyArray<Handler.JobHandler<any, any, never>>
const setups: ReadonlyArray<readonly [string, (handlers: Handlers) => Layer.Layer<Warp.Services, unknown>]> = [
  ["memory", (handlers) => Warp.layerMemory({ handlers, worker: { concurrency: 2, pollInterval: "5 millis" } })],
  ["postgres", (handlers) => Warp.layer({ handlers, worker: { concurrency: 2, pollInterval: "5 millis" } }).pipe(Layer.provide(freshPgLayer(20)))]
]

for (const [name, layerOf] of setups) {
  describe(`attempts count handler runs (${name})`, () => {
    it.live("requeues of a full key take no attempt and no retry budget; the retried job ends Succeeded at attempt 2", () =>
      Effect.gen(function* () {
        const entered = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        let flakyRuns = 0
        const handlers = [
          Handler.job(Hold, () => Effect.andThen(Deferred.succeed(entered, undefined), Deferred.await(release))),
          Handler.job(Flaky, () => Effect.suspend(() => (++flakyRuns === 1 ? Effect.fail("first run fails") : Effect.void)))
        ]
        yield* Effect.gen(function* () {
          const publisher = yield* Publisher.Publisher
          const store = yield* JobStore.JobStore
          const detail = (id: string) => Effect.map(store.get(id), Option.getOrThrow)
          yield* publisher.enqueue(Hold, {})
          yield* Deferred.await(entered)
          const flaky = yield* publisher.enqueue(Flaky, {})
          // wait until the full key has sent it back a few times
          yield* Effect.repeat(
            Effect.map(detail(flaky), (d) => d.logs.filter((l) => l.kind === "Requeued" && l.message.includes("full")).length),
            { until: (n) => n >= 3 }
          )
          yield* Deferred.succeed(release, undefined)
          const done = yield* Effect.repeat(detail(flaky), { until: (d) => d.job.state === "Succeeded" || d.job.state === "Failed" })
          expect(done.job.state).toBe("Succeeded")
          expect(flakyRuns).toBe(2)
          expect(done.job.attempt).toBe(2)
          // every claim while the key was full said attempt 1; only the retry after the failed run says 2
          const claims = done.logs.filter((l) => l.kind === "Processing").map((l) => Number(/^Attempt (\d+) claimed/.exec(l.message)?.[1]))
          expect(claims.length).toBeGreaterThanOrEqual(5)
          expect(claims.slice(0, -1).every((n) => n === 1)).toBe(true)
          expect(claims.at(-1)).toBe(2)
        }).pipe(Effect.provide(layerOf(handlers)))
      })
    )
  })
}
