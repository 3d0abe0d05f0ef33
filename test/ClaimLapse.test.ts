/**
 * A claim whose reply arrives after its lease ran out (a stalled connection, a paused process) must not
 * start its handler: by then the row may be another worker's. The worker counts the lease from when the
 * claim was sent, sees it lapsed, and hands the row back through the finalizing write — which lands only
 * if the claim still owns the row.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/testing/TestClock"
import { Contract, Handler, Job, JobStore, JobStoreMemory, Publisher, Registry, Worker } from "warp-effect"

const Lapse = Contract.job("ClaimLapse", Schema.Struct({}))

/** The memory store, with the first non-empty claim's reply held back until `reply` completes. */
const delayedStore = (claimed: Deferred.Deferred<void>, reply: Deferred.Deferred<void>, finalized: Deferred.Deferred<Job.Outcome>) =>
  Layer.effect(
    JobStore.JobStore,
    Effect.map(JobStore.JobStore, (store): JobStore.JobStoreService => {
      let held = false
      return {
        ...store,
        fetch: (workerId, limit, lease, hint) =>
          Effect.tap(store.fetch(workerId, limit, lease, hint), (rows) =>
            rows.length === 0 || held || workerId !== "late-worker"
              ? Effect.void
              : Effect.andThen(
                  Effect.sync(() => (held = true)),
                  Effect.andThen(Deferred.succeed(claimed, undefined), Deferred.await(reply))
                )
          ),
        finalize: (f) => Effect.tap(store.finalize(f), () => Deferred.succeed(finalized, f.outcome))
      }
    })
  ).pipe(Layer.provide(JobStoreMemory.layer))

describe("a claim whose reply came back after its lease", () => {
  it.effect("is not started: the row, meanwhile claimed by another worker, stays that worker's", () =>
    Effect.gen(function* () {
      const claimed = yield* Deferred.make<void>()
      const reply = yield* Deferred.make<void>()
      const finalized = yield* Deferred.make<Job.Outcome>()
      let runs = 0
      const handlers = [Handler.job(Lapse, () => Effect.sync(() => void runs++))]
      const env = Publisher.layer.pipe(Layer.provideMerge(Registry.layer({ handlers })), Layer.provideMerge(delayedStore(claimed, reply, finalized)))
      yield* Effect.gen(function* () {
        const store = yield* JobStore.JobStore
        const id = yield* Effect.flatMap(Publisher.Publisher, (p) => p.enqueue(Lapse, {}))
        yield* Effect.forkScoped(Worker.make({ workerId: "late-worker", concurrency: 1, lease: "30 seconds", pollInterval: "1 second" }))
        // the claim is taken on the store, its reply is on its way ...
        yield* Deferred.await(claimed)
        // ... and arrives only after the lease: meanwhile the lease ran out and another worker took the row
        yield* TestClock.adjust("31 seconds")
        const other = yield* store.fetch("other-worker", 1, Duration.seconds(30))
        expect(other.map((j) => j.id)).toEqual([id])
        yield* Deferred.succeed(reply, undefined)
        const outcome = yield* Deferred.await(finalized)
        expect(outcome._tag).toBe("Requeued")
        expect(outcome._tag === "Requeued" && outcome.reason).toBe("Claim of attempt 1 lapsed before its handler started (lease 30000 ms); back to the queue")
        expect(runs).toBe(0)
        // the write did not land: the row is still the other worker's attempt
        const row = Option.getOrThrow(yield* store.get(id)).job
        expect(row.state).toBe("Processing")
        expect(row.lockedBy).toBe("other-worker")
        expect(row.attempt).toBe(2)
      }).pipe(Effect.scoped, Effect.provide(env))
    })
  )
})
