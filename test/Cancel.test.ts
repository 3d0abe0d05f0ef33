/**
 * An operator cancels a job: a waiting one is Deleted at once; a running one is interrupted by the
 * worker holding it (its finalizers run, its slot is freed by the attempt's scope) and ends Deleted
 * with an audit entry. And the worker registry the workers page reads.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Concurrency, Contract, Handler, Publisher, Semaphore, Worker } from "warp-effect"
import { cancelText, JobStore, operatorCause } from "../src/internal/store/JobStore.js"
import { detail, until } from "./support/runtime.js"
import { workerEnvs } from "./support/env.js"

const Work = Contract.job("Work", Schema.Struct({ i: Schema.Number }), { policy: [Semaphore("api", 1)] })

const setups = workerEnvs


for (const [name, env] of setups) {
  describe(`Cancelling jobs on ${name}`, () => {
    it.live("a waiting job is Deleted at once, with its audit entry and counters; an ended one is left alone", () =>
      Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const store = yield* JobStore
        const waiting = yield* p.enqueue(Work, { i: 1 })
        const later = yield* p.schedule(Work, { i: 2 }, new Date(Date.now() + 3_600_000))
        expect(yield* store.requestCancel(waiting, "duplicate order")).toBe("Cancelled")
        expect(yield* store.requestCancel(later, "")).toBe("Cancelled")
        const d = yield* detail(waiting)
        expect(d.job.state).toBe("Deleted")
        expect(d.logs.at(-1)).toMatchObject({ kind: "Cancelled", message: "Cancelled — by an operator: duplicate order" })
        expect((yield* detail(later)).logs.at(-1)?.message).toBe("Cancelled — by an operator")
        expect(yield* store.requestCancel(waiting, "again")).toBe("Finished")
        expect((yield* detail(waiting)).logs.filter((l) => l.kind === "Cancelled")).toHaveLength(1)
        expect(yield* store.requestCancel("no-such-job", "")).toBe("NotFound")
        expect(yield* store.requestCancel("bad\u0000id", "")).toBe("NotFound")
        const counters = yield* store.counters
        expect(counters.get("stats:deleted")).toBe(2)
        expect(counters.get("stats:deleted:Work")).toBe(2)
      }).pipe(Effect.provide(env([Handler.job(Work, () => Effect.void)])))
    )

    it.live("a running job is interrupted, its finalizers run, its slot is freed, and it ends Deleted", () => {
      const started = Deferred.makeUnsafe<void>()
      let cleanedUp = false
      let secondRan = false
      const handler = Handler.job(Work, ({ i }) =>
        i === 1
          ? Effect.andThen(Deferred.succeed(started, undefined), Effect.never).pipe(Effect.onInterrupt(() => Effect.sync(() => void (cleanedUp = true))))
          : Effect.sync(() => void (secondRan = true))
      )
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const store = yield* JobStore
        const first = yield* p.enqueue(Work, { i: 1 })
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* Worker.make({ addons: [Concurrency.addon], concurrency: 2, pollInterval: "10 millis", cancelCheckInterval: "20 millis" })
            yield* Deferred.await(started)
            // the key's one slot is held: a second job of it waits (requeued) while the first runs
            const second = yield* p.enqueue(Work, { i: 2 })
            yield* until(detail(second), (d) => d.logs.some((l) => l.kind === "Requeued"))
            expect(secondRan).toBe(false)
            expect(yield* store.requestCancel(first, "stuck on a remote call")).toBe("Cancelling")
            const d = yield* until(detail(first), (d) => d.job.state === "Deleted")
            expect(cleanedUp).toBe(true)
            expect(d.logs.at(-1)).toMatchObject({
              kind: "Cancelled",
              message: cancelText(operatorCause("stuck on a remote call"), { attempt: 1 })
            })
            expect(d.logs.at(-1)?.message).toBe("Cancelled — by an operator: stuck on a remote call (running attempt 1 interrupted)")
            // the slot was freed: the waiting job of the key runs
            yield* until(detail(second), (d) => d.job.state === "Succeeded")
            expect(secondRan).toBe(true)
            // a cancelled row keeps no cancel request (a retried job must not be cancelled again)
            expect(d.job.cancelRequested).toBeUndefined()
          })
        )
      }).pipe(Effect.provide(env([handler])))
    })

    it.live("a cancel asked for a claimed job before its handler starts ends it without running the handler", () => {
      let runs = 0
      const handler = Handler.job(Work, () => Effect.sync(() => void runs++))
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const store = yield* JobStore
        const id = yield* p.enqueue(Work, { i: 1 })
        // a worker claims it; we mark it before the handler can start by claiming it ourselves first
        const [claimed] = yield* store.fetch("manual", 1, Duration.seconds(30))
        expect(claimed?.id).toBe(id)
        expect(yield* store.requestCancel(id, "")).toBe("Cancelling")
        // the claim lapses (as if "manual" died); the next claim carries the request and the worker honours it
        yield* store.finalize({
          job: claimed!,
          workerId: "manual",
          outcome: { _tag: "Requeued", reason: "released" } as any,
          metadata: claimed!.metadata,
          handlerRan: false
        })
        yield* Effect.scoped(
          Effect.andThen(
            Worker.make({ addons: [Concurrency.addon], pollInterval: "10 millis" }),
            until(detail(id), (d) => d.job.state === "Deleted")
          )
        )
        expect(runs).toBe(0)
        expect((yield* detail(id)).logs.at(-1)?.message).toBe("Cancelled — by an operator")
      }).pipe(Effect.provide(env([handler])))
    })

    it.live("the worker registry lists a running worker with the keys it holds, and forgets it when it stops", () => {
      const started = Deferred.makeUnsafe<void>()
      const release = Deferred.makeUnsafe<void>()
      const handler = Handler.job(Work, () => Effect.andThen(Deferred.succeed(started, undefined), Deferred.await(release)))
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const store = yield* JobStore
        yield* p.enqueue(Work, { i: 1 })
        yield* Effect.scoped(
          Effect.gen(function* () {
            const w = yield* Worker.make({ addons: [Concurrency.addon], concurrency: 3, pollInterval: "10 millis", lease: "300 millis", workerId: "w-registry" })
            yield* Deferred.await(started)
            const [info] = yield* until(store.workers, (ws) => ws.length === 1 && ws[0]!.holding === 1 && ws[0]!.slots.length === 1)
            expect(info).toMatchObject({ workerId: w.workerId, pid: process.pid, lanes: 3, heartbeatMs: 100, holding: 1, slots: [{ key: "api", held: 1 }] })
            expect(info!.silentMs).toBeGreaterThanOrEqual(0)
            expect(info!.lastOutage).toBeUndefined()
            yield* Deferred.succeed(release, undefined)
          })
        )
        expect(yield* store.workers).toEqual([])
      }).pipe(Effect.provide(env([handler])))
    })
  })
}
