/**
 * Cancel strategies of a key: `CancelRunning` (a newer job stops the older running holder, whose slot
 * is freed by its attempt's scope, and takes the slot) and `CancelNewest` (the spec's Skip by its other
 * name), on memory and PostgreSQL, never more holders than the limit.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Concurrency, Contract, Handler, Mutex, Publisher, Worker } from "warp-effect"
import { cancelledText, replacingText, requeuedText } from "../src/internal/concurrency/ConcurrencyBehavior.js"
import { cancelText, JobStore, replacedCause } from "../src/internal/store/JobStore.js"
import { HolderCounter } from "./support/holders.js"
import { detail, until } from "./support/runtime.js"
import { workerEnvs } from "./support/env.js"

const Deploy = Contract.job("Deploy", Schema.Struct({ n: Schema.Number }), { policy: [Mutex("deploy", { mode: "CancelRunning" })] })
const Report = Contract.job("Report", Schema.Struct({ n: Schema.Number }), { policy: [Mutex("report", { mode: "CancelNewest" })] })

const setups = workerEnvs


const worker = Worker.make({ addons: [Concurrency.addon], concurrency: 3, pollInterval: "10 millis", cancelCheckInterval: "20 millis" })

for (const [name, env] of setups) {
  describe(`Cancel strategies on ${name}`, () => {
    it.live("CancelRunning: a newer job stops the older running holder and takes its slot; an older one does not stop a newer", () => {
      const holders = new HolderCounter()
      const started = new Map<number, Deferred.Deferred<void>>([1, 2, 3].map((n) => [n, Deferred.makeUnsafe<void>()]))
      const finish = Deferred.makeUnsafe<void>()
      let interrupted: Array<number> = []
      const handler = Handler.job(Deploy, ({ n }) =>
        holders.hold(
          "deploy",
          Effect.andThen(Deferred.succeed(started.get(n)!, undefined), Deferred.await(finish)).pipe(
            Effect.onInterrupt(() => Effect.sync(() => void (interrupted = [...interrupted, n])))
          )
        )
      )
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        yield* Effect.scoped(
          Effect.gen(function* () {
            // an older job, due only when the test makes it due (below): with a fixed delay, a slow machine
            // could make it due between the holder's interruption and the newer job's admission, and the
            // older job then rightly ran first and was replaced in turn
            const older = yield* p.schedule(Deploy, { n: 3 }, new Date(Date.now() + 3_600_000))
            const first = yield* p.enqueue(Deploy, { n: 1 })
            yield* worker
            yield* Deferred.await(started.get(1)!)
            const second = yield* p.enqueue(Deploy, { n: 2 })
            // the newer job asks the holder to stop, is requeued, and takes the freed slot
            const a = yield* until(detail(first), (d) => d.job.state === "Deleted")
            expect(a.logs.at(-1)?.message).toBe(cancelText(replacedCause("deploy", second), { attempt: 1 }))
            expect(a.logs.at(-1)?.message).toBe(`Cancelled — replaced by newer job ${second} of 'deploy' (running attempt 1 interrupted)`)
            expect(interrupted).toEqual([1])
            yield* Deferred.await(started.get(2)!)
            const b = yield* detail(second)
            expect(b.logs.map((l) => l.message)).toContain(replacingText("deploy", 1, [first]))
            // the older job comes due while the newer one runs (an operator's "requeue now"): it waits
            // instead of stopping it
            expect((yield* Effect.flatMap(JobStore, (store) => store.operate("requeue", [older]))).changed).toBe(1)
            yield* until(detail(older), (d) => d.logs.some((l) => l.message === requeuedText("deploy", 1)))
            expect((yield* detail(second)).job.state).toBe("Processing")
            yield* Deferred.succeed(finish, undefined)
            yield* until(detail(older), (d) => d.job.state === "Succeeded")
            expect((yield* detail(second)).job.state).toBe("Succeeded")
          })
        )
        expect(holders.max.get("deploy")).toBe(1)
        expect(interrupted).toEqual([1])
      }).pipe(Effect.provide(env([handler])))
    })

    it.live("CancelNewest: the newcomer is cancelled with the Skip text, the holder runs on", () => {
      const started = Deferred.makeUnsafe<void>()
      const finish = Deferred.makeUnsafe<void>()
      const handler = Handler.job(Report, () => Effect.andThen(Deferred.succeed(started, undefined), Deferred.await(finish)))
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        yield* Effect.scoped(
          Effect.gen(function* () {
            const first = yield* p.enqueue(Report, { n: 1 })
            yield* worker
            yield* Deferred.await(started)
            const second = yield* p.enqueue(Report, { n: 2 })
            const d = yield* until(detail(second), (d) => d.job.state === "Deleted")
            expect(d.logs.at(-1)?.message).toBe(cancelledText("report", 1))
            expect((yield* detail(first)).job.state).toBe("Processing")
            yield* Deferred.succeed(finish, undefined)
            yield* until(detail(first), (d) => d.job.state === "Succeeded")
          })
        )
      }).pipe(Effect.provide(env([handler])))
    })
  })
}
