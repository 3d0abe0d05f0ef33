/**
 * Instant pickup: workers that poll once an hour start new jobs, Wait jobs whose key frees and
 * Scheduled jobs once due — so only the store's hints (or the timer they set) can start them — and a
 * dropped listening connection loses no pickup.
 */
import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { Concurrency, Contract, Handler, JobStoreMemory, JobStorePg, Mutex, Publisher, Registry, SemaphoreProviderMemory, Worker } from "warp-effect"
import type { NewJob } from "../src/internal/job/Job.js"
import { Outcome } from "../src/internal/job/Outcome.js"
import { JobStore, type JobStoreService } from "../src/internal/store/JobStore.js"
import type { Wakeup } from "../src/internal/store/Wakeup.js"
import { freshPgLayer } from "./support/db.js"
import { until } from "./support/runtime.js"

const Ping = Contract.job("Ping", Schema.Struct({ n: Schema.Number }))
const Keyed = Contract.job("Keyed", Schema.Struct({ n: Schema.Number }))
const Hold = Contract.job("Hold", Schema.Struct({ n: Schema.Number }))

/** What the store did, as the test sees it: `empty:{worker}` (a claim found nothing), `requeued:{id}` (a write whose handler did not run). */
class Events extends Context.Service<Events, Queue.Queue<string>>()("test/Events") {}

/** Per job number: started (its handler began), release (its handler may end). */
class Probe extends Context.Service<Probe, {
  readonly started: (n: number) => Deferred.Deferred<void>
  readonly release: (n: number) => Deferred.Deferred<void>
}>()("test/Probe") {}

const probeLayer = Layer.sync(Probe, () => {
  const started = new Map<number, Deferred.Deferred<void>>()
  const release = new Map<number, Deferred.Deferred<void>>()
  const get = (m: Map<number, Deferred.Deferred<void>>) => (n: number) => {
    let d = m.get(n)
    if (d === undefined) m.set(n, (d = Deferred.makeUnsafe<void>()))
    return d
  }
  return { started: get(started), release: get(release) }
})

/** Starts; Keyed (a Mutex on "k", Wait mode) and Hold jobs then wait for their release. */
const run = (n: number, hold: boolean) =>
  Effect.flatMap(Probe, (p) =>
    Effect.andThen(Deferred.succeed(p.started(n), undefined), hold ? Deferred.await(p.release(n)) : Effect.void)
  )
const handlers = [
  Handler.job(Ping, ({ n }) => run(n, false)),
  Handler.job(Keyed, ({ n }) => run(n, true), { policy: [Mutex("k", { mode: "Wait" })] }),
  Handler.job(Hold, ({ n }) => run(n, true))
] as const

/** The store with its claims and handler-less writes reported to `Events`. */
const observed = Layer.effect(
  JobStore,
  Effect.gen(function* () {
    const store = yield* JobStore
    const events = yield* Events
    const service: JobStoreService = {
      ...store,
      fetch: (workerId, limit, lease, hint) =>
        store.fetch(workerId, limit, lease, hint).pipe(Effect.tap((rows) => (rows.length === 0 ? Queue.offer(events, `empty:${workerId}`) : Effect.void))),
      finalize: (f) =>
        store.finalize(f).pipe(Effect.tap(() => (f.handlerRan === false ? Queue.offer(events, `requeued:${f.job.id}`) : Effect.void)))
    }
    return service
  })
)

const stores: ReadonlyArray<readonly [string, () => Layer.Layer<JobStore, unknown>]> = [
  ["memory", () => JobStoreMemory.layer],
  ["postgres", () => JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer()))]
]

const env = <S>(store: Layer.Layer<S | JobStore, unknown>) =>
  Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers })),
    Layer.provideMerge(Concurrency.layerMemoryLimits),
    Layer.provideMerge(SemaphoreProviderMemory.layer),
    Layer.provideMerge(observed),
    Layer.provideMerge(store),
    Layer.provideMerge(Layer.effect(Events, Queue.unbounded<string>())),
    Layer.provideMerge(probeLayer)
  )

/** Waits for event `event`, dropping the others before it. */
const next = (event: string) =>
  Effect.flatMap(Events, (events) => Effect.repeat(Queue.take(events), { until: (e) => e === event }))

const started = (n: number) => Effect.flatMap(Probe, (p) => Deferred.await(p.started(n)))
const release = (n: number) => Effect.flatMap(Probe, (p) => Deferred.succeed(p.release(n), undefined))

const idleWorker = (workerId: string, concurrency = 1) =>
  Worker.make({ addons: [Concurrency.addon], workerId, concurrency, pollInterval: "1 hour" })

/**
 * The store's hints in a queue, from a subscription that is listening (on PostgreSQL a notification sent
 * before the listener is up is not heard).
 */
const hintsOf = (name: string) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const hints = yield* Queue.unbounded<Wakeup>()
    yield* Effect.forkScoped(Stream.runForEach(yield* store.wakeups!, (h) => Queue.offer(hints, h)))
    if (name === "postgres") yield* Effect.repeat(Queue.take(hints), { until: (h) => h._tag === "Connected" })
    return hints
  })

/** A pending row of type T due at `at`. */
const pendingRow = (id: string, metadata: unknown, at = new Date(0)): NewJob => ({ id, type: "T", handler: null, payload: {}, state: "Enqueued", scheduleTime: at, metadata })

for (const [name, store] of stores) {
  describe(`instant pickup on ${name}`, () => {
    it.live("an idle worker polling once an hour starts each new job", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const publisher = yield* Publisher.Publisher
          yield* idleWorker("w1")
          for (const n of [1, 2, 3]) {
            // the lane's claim came back empty: it sleeps (for an hour) unless woken
            yield* next("empty:w1")
            yield* publisher.enqueue(Ping, { n })
            yield* started(n)
          }
        })
      ).pipe(Effect.provide(env(store()))), 30_000)

    it.live("one insert of three jobs wakes three lanes (each job runs until all three started)", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const publisher = yield* Publisher.Publisher
          yield* idleWorker("w1", 4)
          for (let i = 0; i < 4; i++) yield* next("empty:w1")
          // each runs until released, so three lanes must run at once
          const ids = yield* publisher.enqueueMany(Hold, [{ n: 11 }, { n: 12 }, { n: 13 }])
          expect(ids).toHaveLength(3)
          for (const n of [11, 12, 13]) yield* started(n)
          for (const n of [11, 12, 13]) yield* release(n)
        })
      ).pipe(Effect.provide(env(store()))), 30_000)

    it.live("a Wait job whose key frees starts (the holder on another worker)", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const publisher = yield* Publisher.Publisher
          yield* idleWorker("wa")
          yield* next("empty:wa")
          yield* publisher.enqueue(Keyed, { n: 1 })
          yield* started(1)
          // worker b claims the second job of the key, finds the key full, requeues it and sleeps
          yield* idleWorker("wb")
          yield* next("empty:wb")
          const waiting = yield* publisher.enqueue(Keyed, { n: 2 })
          yield* next(`requeued:${waiting}`)
          yield* release(1)
          yield* started(2)
          yield* release(2)
        })
      ).pipe(Effect.provide(env(store()))), 30_000)

    it.live("a Scheduled job starts once due: inserted while the worker sleeps, and before it started", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const publisher = yield* Publisher.Publisher
          // known before the worker starts: learnt after its first empty claim
          yield* publisher.schedule(Ping, { n: 1 }, new Date(Date.now() + 300))
          yield* idleWorker("w1")
          yield* started(1)
          yield* next("empty:w1")
          // inserted while it sleeps: the insert tells its time
          yield* publisher.schedule(Ping, { n: 2 }, new Date(Date.now() + 300))
          yield* started(2)
        })
      ).pipe(Effect.provide(env(store()))), 30_000)

    it.live("a write under a slot kept for the next job (slot reuse) sends no Freed", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const store = yield* JobStore
          const hints = yield* hintsOf(name)
          const keyed = { policies: { concurrency: { source: "enqueue", value: { key: "held", limit: 1, mode: "Wait" } } } }
          const row = pendingRow
          yield* store.insert([row("h1", keyed, new Date(0)), row("h2", keyed, new Date(1))])
          const [h1] = yield* store.fetch("w", 1, Duration.minutes(1))
          expect(h1!.id).toBe("h1")
          // h2 of the key waits, due: a write that freed the slot would tell
          expect(yield* store.finalize({ job: h1!, workerId: "w", outcome: Outcome.Succeeded(), metadata: keyed, holdsSlot: true })).toBe(true)
          // hints come in commit order: anything the write sent comes before this insert's Due
          yield* store.insert([row("after", {}, new Date(0))])
          const seen: Array<Wakeup> = []
          while (seen.at(-1)?._tag !== "Due" || seen.length < 2) {
            const h = yield* Queue.take(hints)
            if (h._tag !== "Connected") seen.push(h)
          }
          expect(seen).toEqual([{ _tag: "Due", count: 2 }, { _tag: "Due", count: 1 }])
        })
      ).pipe(Effect.provide(env(store()))), 30_000)

    it.live("a finalizing write sends Freed only when it frees a slot of a key with due jobs waiting; an operator's requeue sends Due", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const store = yield* JobStore
          const hints = yield* hintsOf(name)
          const keyed = { policies: { concurrency: { source: "enqueue", value: { key: "k", limit: 3, mode: "Wait" } } } }
          const row = pendingRow
          yield* store.insert([row("a", {}), row("b", keyed, new Date(1)), row("c", keyed, new Date(2)), row("d", keyed, new Date(3))])
          // a claim takes at most one keyed Wait row (the claim's admission): "b" with "a", then "c"
          const [a, b] = yield* store.fetch("w", 3, Duration.minutes(1))
          const [c] = yield* store.fetch("w", 1, Duration.minutes(1))
          expect([a!.id, b!.id, c!.id]).toEqual(["a", "b", "c"])
          // keyless: nothing; keyed without a handler run: nothing; keyed after a run with "d" due: Freed
          expect(yield* store.finalize({ job: a!, workerId: "w", outcome: Outcome.Succeeded(), metadata: {} })).toBe(true)
          expect(yield* store.finalize({ job: b!, workerId: "w", outcome: Outcome.Requeued({ reason: "full" }), metadata: keyed, handlerRan: false })).toBe(true)
          expect(yield* store.finalize({ job: c!, workerId: "w", outcome: Outcome.Succeeded(), metadata: keyed })).toBe(true)
          const seen: Array<Wakeup> = []
          while (seen.at(-1)?._tag !== "Freed") {
            const h = yield* Queue.take(hints)
            if (h._tag !== "Connected") seen.push(h)
          }
          expect(seen).toEqual([{ _tag: "Due", count: 4 }, { _tag: "Freed", key: "k" }])
          // an operator's requeue: the rows are due now
          expect(yield* store.operate("requeue", ["d"])).toEqual({ changed: 1, skipped: 0 })
          expect(yield* Effect.repeat(Queue.take(hints), { until: (h) => h._tag !== "Connected" })).toEqual({ _tag: "Due", count: 1 })
        })
      ).pipe(Effect.provide(env(store()))), 30_000)
  })
}

describe("instant pickup on postgres: the listening connection", () => {
  /** The backends listening on the store's channel (sessions whose last statement was LISTEN). */
  const listeners = Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()`
  ).pipe(Effect.map((rows) => rows.map((r) => Number(r.pid))))

  it.live("a terminated listener backend: the job still starts, and the listener is back", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        yield* idleWorker("w1")
        const [first] = yield* until(listeners, (l) => l.length === 1)
        yield* next("empty:w1")
        const sql = yield* SqlClient.SqlClient
        yield* sql`SELECT pg_terminate_backend(${first!})`
        yield* publisher.enqueue(Ping, { n: 1 })
        yield* started(1)
        const back = yield* until(listeners, (l) => l.length === 1 && l[0] !== first)
        expect(back[0]).not.toBe(first)
        // and it hears the next one
        yield* next("empty:w1")
        yield* publisher.enqueue(Ping, { n: 2 })
        yield* started(2)
      })
    ).pipe(Effect.provide(env(JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer()))))), 30_000)

  it.live("the listener holds its connection while a worker runs, and closes it with the last one", () =>
    Effect.gen(function* () {
      const first = yield* Scope.make()
      const second = yield* Scope.make()
      yield* idleWorker("w1").pipe(Scope.provide(first))
      yield* idleWorker("w2").pipe(Scope.provide(second))
      yield* until(listeners, (l) => l.length === 1)
      yield* Scope.close(first, Exit.void)
      expect(yield* listeners).toHaveLength(1)
      yield* Scope.close(second, Exit.void)
      yield* until(listeners, (l) => l.length === 0)
    }).pipe(Effect.provide(env(JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer()))))), 30_000)

  it.live("an enqueue inside the caller's transaction wakes the worker at commit", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const sql = yield* SqlClient.SqlClient
        yield* idleWorker("w1")
        yield* next("empty:w1")
        // the notification goes with the transaction's commit
        yield* sql.withTransaction(publisher.enqueue(Ping, { n: 1 }))
        yield* started(1)
      })
    ).pipe(Effect.provide(env(JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer()))))), 30_000)

  it.live("instantPickup: false sends no hints and listens to nothing; workers poll", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      expect(store.wakeups).toBeUndefined()
      expect(store.nextDue).toBeUndefined()
      const scope = yield* Scope.make()
      const publisher = yield* Publisher.Publisher
      yield* Worker.make({ addons: [Concurrency.addon], workerId: "w1", pollInterval: "20 millis" }).pipe(Scope.provide(scope))
      yield* publisher.enqueue(Ping, { n: 1 })
      yield* started(1)
      expect(yield* listeners).toEqual([])
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.provide(env(JobStorePg.layerWith({ instantPickup: false }).pipe(Layer.provideMerge(freshPgLayer()))))), 30_000)
})
