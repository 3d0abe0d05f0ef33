import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as Tracer from "effect/Tracer"
import { Contract, Handler, Job, JobParameters, Publisher, Semaphore, Timeout, Warp } from "warp-effect"
import * as JobId from "../src/internal/job/JobId.js"
import { JobStore, type JobStoreService } from "../src/internal/store/JobStore.js"
import * as JobStorePg from "../src/internal/store/JobStorePg.js"
import { freshDatabaseUrl, freshPgLayer, pgLayer } from "./support/db.js"
import { detail } from "./support/runtime.js"

const Item = Contract.job("ProdItem", Schema.Struct({ n: Schema.Number }))
/** A contract whose policies are stored at publish: a Fifo-mode concurrency policy and a Total timeout. */
const Lined = Contract.job("ProdLined", Schema.Struct({ n: Schema.Number }), {
  policy: [Semaphore("prod-line", 2, { mode: "Fifo" }), Timeout("1 hour", { scope: "Total" })]
})
/** Encoding fails for negative numbers: an item the schema rejects. */
const Positive = Contract.job("ProdPositive", Schema.Struct({ n: Schema.Number.check(Schema.isGreaterThan(0)) }))
const Evt = Contract.message("ProdEvt", Schema.Struct({ n: Schema.Number }))
const Text = Contract.job("ProdText", Schema.Struct({ s: Schema.String, tags: Schema.Array(Schema.String) }))

const handlers = [
  Handler.job(Item, () => Effect.void),
  Handler.job(Lined, () => Effect.void),
  Handler.job(Positive, () => Effect.void),
  Handler.job(Text, () => Effect.void),
  Handler.message(Evt, "a", () => Effect.void),
  Handler.message(Evt, "b", () => Effect.void)
] as const

const setups = [
  ["memory", () => Warp.layerMemory({ handlers, worker: false })],
  [
    "postgres",
    () => Warp.layer({ handlers, worker: false }).pipe(Layer.provideMerge(Layer.unwrap(Effect.map(freshDatabaseUrl, (url) => pgLayer(url, 5)))))
  ]
] as const

const trail = (id: string) => Effect.map(detail(id), (d) => d.logs.map((l) => `${l.kind}: ${l.message}`))

for (const [name, makeLayer] of setups) {
  describe(`Producers: ${name}`, () => {
    it.live("enqueueMany writes every payload, returns the ids in order, and each trail starts with Enqueued", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const ids = yield* publisher.enqueueMany(Item, [{ n: 0 }, { n: 1 }, { n: 2 }])
        expect(ids).toHaveLength(3)
        expect(new Set(ids).size).toBe(3)
        for (const [i, id] of ids.entries()) {
          const d = yield* detail(id)
          expect(d.job.payload).toEqual({ n: i })
          expect(d.job.state).toBe("Enqueued")
          expect(d.job.type).toBe("ProdItem")
          expect(d.logs.map((l) => l.kind)).toEqual(["Enqueued"])
          expect(d.logs[0]!.message).toBe("Enqueued")
          expect(d.logs[0]!.at.getTime()).toBe(d.job.createdAt.getTime())
        }
        expect(yield* publisher.enqueueMany(Item, [])).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("payloads with quotes, backslashes, braces, commas, NULL-like text and unicode round-trip", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const payloads = [
          { s: 'a"b\\c', tags: ["{x}", "y,z"] },
          { s: "NULL", tags: [] },
          { s: "ünï — 日本 \u0001", tags: ["\n", "'"] }
        ]
        const ids = yield* publisher.enqueueMany(Text, payloads)
        for (const [i, id] of ids.entries()) expect((yield* detail(id)).job.payload).toEqual(payloads[i])
      }).pipe(Effect.provide(makeLayer())))

    it.live("metadata and stamping are those of enqueue: per-batch and per-item parameters, Fifo carry, Total deadline", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const base = JobParameters.make().withRetry(3)
        const one = yield* publisher.enqueue(Lined, { n: 0 }, base.withMutex("k-0"))
        const many = yield* publisher.enqueueMany(Lined, [{ n: 0 }, { n: 1 }], (p) => base.withMutex(`k-${p.n}`))
        const plain = yield* publisher.enqueueMany(Lined, [{ n: 5 }, { n: 6 }], base)
        const strip = (m: any) => {
          const t = m.policies.timeout
          return { ...m, policies: { ...m.policies, timeout: { ...t, value: { ...t.value, deadline: typeof t.value.deadline } } } }
        }
        const ref = (yield* detail(one)).job.metadata as any
        expect(ref.policies.concurrency.value).toMatchObject({ key: "k-0", limit: 1, mode: "Skip" })
        expect(strip((yield* detail(many[0]!)).job.metadata)).toEqual(strip(ref))
        expect(((yield* detail(many[1]!)).job.metadata as any).policies.concurrency.value.key).toBe("k-1")
        // no explicit concurrency entry: the contract's Fifo policy is carried, as by enqueue
        const carried = (yield* detail(plain[0]!)).job.metadata as any
        expect(carried.policies.concurrency).toMatchObject({ source: "contract", value: { key: "prod-line", limit: 2, mode: "Fifo" } })
        expect(carried.policies.retry.source).toBe("enqueue")
        expect(typeof carried.policies.timeout.value.deadline).toBe("string")
        expect((yield* detail(plain[1]!)).job.metadata).toEqual(carried)
      }).pipe(Effect.provide(makeLayer())))

    it.live("an invalid payload fails the batch naming its index, and nothing of the batch is written", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const store = yield* JobStore
        const err = yield* Effect.flip(publisher.enqueueMany(Positive, [{ n: 1 }, { n: 2 }, { n: -3 }, { n: 4 }]))
        expect(err._tag).toBe("InvalidBatchItem")
        if (err._tag !== "InvalidBatchItem") return
        expect(err.index).toBe(2)
        expect(err.type).toBe("ProdPositive")
        expect(err.cause._tag).toBe("InvalidPayload")
        expect(err.message).toContain("Item 2")
        const counts = yield* store.countByState
        expect(counts.Enqueued + counts.Scheduled).toBe(0)
      }).pipe(Effect.provide(makeLayer())))

    it.live("invalid parameters: an item's fail the batch naming it; the batch's fail it with InvalidPolicy; nothing written", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const store = yield* JobStore
        const itemErr = yield* Effect.flip(
          publisher.enqueueMany(Item, [{ n: 1 }, { n: 2 }], (p) => JobParameters.make().withSemaphore("s", p.n === 2 ? 0 : 1))
        )
        expect(itemErr._tag).toBe("InvalidBatchItem")
        if (itemErr._tag === "InvalidBatchItem") {
          expect(itemErr.index).toBe(1)
          expect(itemErr.cause._tag).toBe("InvalidPolicy")
        }
        const batchErr = yield* Effect.flip(publisher.enqueueMany(Item, [{ n: 1 }], JobParameters.make().withSemaphore("s", 0)))
        expect(batchErr._tag).toBe("InvalidPolicy")
        const counts = yield* store.countByState
        expect(counts.Enqueued + counts.Scheduled).toBe(0)
      }).pipe(Effect.provide(makeLayer())))

    it.live("scheduleMany: Scheduled rows (an item's own time, a past time enqueues), trail starts with 'Scheduled for'", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const later = new Date(Date.now() + 3_600_000)
        const ids = yield* publisher.scheduleMany(Item, [{ n: 1 }, { n: 2 }], (p) => (p.n === 1 ? later : new Date(0)))
        const first = yield* detail(ids[0]!)
        expect(first.job.state).toBe("Scheduled")
        expect(first.job.scheduleTime.getTime()).toBe(later.getTime())
        expect(first.logs.map((l) => l.kind)).toEqual(["Scheduled"])
        expect(first.logs[0]!.message).toMatch(new RegExp(`^Scheduled for ${later.toISOString().slice(0, 19)}`))
        expect((yield* detail(ids[1]!)).job.state).toBe("Enqueued")
      }).pipe(Effect.provide(makeLayer())))

    it.live("publishMany: one child per registered handler per message, ids grouped by message in order", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const groups = yield* publisher.publishMany(Evt, [{ n: 1 }, { n: 2 }])
        expect(groups.map((g) => g.length)).toEqual([2, 2])
        for (const [i, g] of groups.entries()) {
          const rows = yield* Effect.forEach(g, (id) => Effect.map(detail(id), (d) => d.job))
          expect(rows.map((r) => r.handler).sort()).toEqual(["a", "b"])
          for (const r of rows) expect(r.payload).toEqual({ n: i + 1 })
        }
      }).pipe(Effect.provide(makeLayer())))
  })
}

/**
 * A Warp on a fresh database, and a second store on its own connection pool: what a worker in
 * another process sees.
 */
const withOutside = <A, E>(body: (outside: JobStoreService) => Effect.Effect<A, E, Warp.Services | SqlClient.SqlClient>) =>
  Effect.gen(function* () {
    const url = yield* freshDatabaseUrl
    const ctx = yield* Layer.build(Warp.layer({ handlers, worker: false }).pipe(Layer.provideMerge(pgLayer(url, 5))))
    const outside = yield* Layer.build(JobStorePg.layerWithoutMigrations.pipe(Layer.provide(pgLayer(url, 2))))
    return yield* body(Context.get(outside, JobStore)).pipe(Effect.provide(ctx))
  }).pipe(Effect.scoped)

const lease = Duration.seconds(30)

/** A row of `ProdItem` with payload `{ n }`, as the store receives it. */
const itemRow = (n: number, id: string = JobId.make()): Job.NewJob => ({
  id,
  type: "ProdItem",
  handler: null,
  payload: { n },
  state: "Enqueued",
  scheduleTime: new Date(),
  metadata: { policies: {} }
})

const pending = (store: JobStoreService) => Effect.map(store.countByState, (c) => c.Enqueued + c.Scheduled)

describe("Producers: PostgreSQL", () => {
  it.live("one row write per enqueued job: no audit row at enqueue; a bulk beyond one chunk lands whole", () =>
    withOutside(() =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const sql = yield* SqlClient.SqlClient
        const n = JobStorePg.insertChunk * 2 + 7
        const ids = yield* publisher.enqueueMany(Item, Array.from({ length: n }, (_, i) => ({ n: i })))
        yield* publisher.enqueue(Item, { n: -1 })
        yield* publisher.schedule(Item, { n: -2 }, new Date(Date.now() + 60_000))
        const [jobs] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM warp_jobs`
        const [logs] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM warp_job_logs`
        expect(jobs!.n).toBe(n + 2)
        expect(logs!.n).toBe(0)
        const last = yield* detail(ids[n - 1]!)
        expect(last.job.payload).toEqual({ n: n - 1 })
        expect(last.logs.map((l) => l.kind)).toEqual(["Enqueued"])
      })
    ))

  it.live("a multi-chunk insert is all or none: a duplicate id in the last chunk writes nothing", () =>
    withOutside(() =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const row = (id: string): Job.NewJob => ({
          id,
          type: "ProdItem",
          handler: null,
          payload: { n: 1 },
          state: "Enqueued",
          scheduleTime: new Date(),
          metadata: { policies: {} }
        })
        const rows = Array.from({ length: JobStorePg.insertChunk * 2 + 1 }, () => row(JobId.make()))
        const dup = rows.concat([row(rows[0]!.id)])
        const exit = yield* Effect.exit(store.insert(dup))
        expect(Exit.isFailure(exit)).toBe(true)
        expect(yield* pending(store)).toBe(0)
      })
    ))

  it.live("concurrent single inserts share statements; a row the server refuses fails only its own insert", () =>
    withOutside(() =>
      Effect.gen(function* () {
        const store = yield* JobStore
        // 40 one-row inserts at once (they leave in batches while a statement is out); one repeats the id
        // of another, which the primary key refuses: that insert fails, every other row lands
        const rows = Array.from({ length: 40 }, (_, i) => itemRow(i))
        const dup = itemRow(99, rows[7]!.id)
        const exits = yield* Effect.forEach([...rows, dup], (r) => Effect.exit(store.insert([r])), { concurrency: "unbounded" })
        expect(exits.filter(Exit.isFailure)).toHaveLength(1)
        expect(yield* pending(store)).toBe(40)
        for (const [i, r] of rows.entries()) {
          const d = yield* detail(r.id as any)
          expect(d.job.payload).toEqual(i === 7 && Exit.isFailure(exits[7]!) ? { n: 99 } : { n: i })
        }
      })
    ))

  it.live("a batched insert's statement runs under a span that descends from one producer's span and links to the others'", () =>
    Effect.gen(function* () {
      const spans: Array<Tracer.Span> = []
      // Effect's own spans, each one kept; set for the whole layer, so the store's flushers use it too
      const native = yield* Effect.tracer
      const tracer = Tracer.make({
        span: (options) => {
          const span = native.span(options)
          spans.push(span)
          return span
        },
        context: native.context
      })
      const n = 30
      yield* Effect.gen(function* () {
        const store = yield* JobStore
        yield* Effect.forEach(
          Array.from({ length: n }, (_, i) => itemRow(i)),
          (row, i) => store.insert([row]).pipe(Effect.withSpan(`producer-${i}`)),
          { concurrency: "unbounded", discard: true }
        )
      }).pipe(Effect.provide(Layer.provideMerge(JobStorePg.layer, Layer.merge(freshPgLayer(), Layer.succeed(Tracer.Tracer, tracer)))))
      const producers = new Set(spans.filter((s) => s.name.startsWith("producer-")).map((s) => s.spanId))
      expect(producers.size).toBe(n)
      const batches = spans.filter((s) => s.name === "warp.insert.batch")
      // each producer's span is the parent of one batch span or linked from one, never both, never twice
      const reached = new Map<string, number>()
      for (const batch of batches) {
        const parent = Option.getOrThrow(batch.parent)
        const ids = [parent.spanId, ...batch.links.map((l) => l.span.spanId)]
        expect(Object.fromEntries(batch.attributes)["warp.insert.rows"]).toBe(ids.length)
        for (const id of ids) reached.set(id, (reached.get(id) ?? 0) + 1)
      }
      expect([...reached.keys()].sort()).toEqual([...producers].sort())
      expect([...reached.values()].every((k) => k === 1)).toBe(true)
      // at least one statement carried several rows, and the sql client's statement spans sit under the batch spans
      // (Effect 4 names a statement span after the database, not "sql.execute": they are found by their attribute)
      expect(batches.some((b) => b.links.length > 0)).toBe(true)
      const batchIds = new Set(batches.map((b) => b.spanId))
      const statements = spans.filter(
        (s) => s.attributes.get("db.system.name") === "postgresql" && Option.isSome(s.parent) && batchIds.has(s.parent.value.spanId)
      )
      expect(statements.length).toBeGreaterThanOrEqual(batches.length)
    }))

  it.live("a single insert interrupted while it waits for a statement writes nothing", () =>
    withOutside(() =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const sql = yield* SqlClient.SqlClient
        // another transaction holds off every insert into warp_jobs
        const locked = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const locker = yield* Effect.forkChild(
          sql.withTransaction(
            Effect.andThen(sql`LOCK TABLE warp_jobs IN SHARE ROW EXCLUSIVE MODE`, Effect.andThen(Deferred.succeed(locked, undefined), Deferred.await(release)))
          )
        )
        yield* Deferred.await(locked)
        const [a, b, c, d] = [itemRow(1), itemRow(2), itemRow(3), itemRow(4)]
        // both of the store's insert statements are out, waiting for the lock (one after the other: offered
        // together, Effect 4's scheduler lets one flusher take both rows into one statement)
        const waiting = sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
        const firstA = yield* Effect.forkChild(store.insert([a]))
        while ((yield* waiting)[0]!.n < 1) yield* Effect.sleep("5 millis")
        const firstB = yield* Effect.forkChild(store.insert([b]))
        while ((yield* waiting)[0]!.n < 2) yield* Effect.sleep("5 millis")
        // the third waits in the queue for a statement; its producer gives up
        // started at once, it runs until it waits (Effect 4 has no Fiber.status to poll)
        const third = yield* Effect.forkChild(store.insert([c]), { startImmediately: true })
        yield* Effect.sleep("20 millis")
        yield* Fiber.interrupt(third)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(locker)
        yield* Fiber.join(firstA)
        yield* Fiber.join(firstB)
        // a later insert leaves after anything still queued
        yield* store.insert([d])
        const rows = yield* sql<{ id: string }>`SELECT id FROM warp_jobs`
        expect(new Set(rows.map((r) => r.id))).toEqual(new Set([a.id, b.id, d.id]))
      })
    ))

  it.live("the trail after a claim: the derived creation entry first, then the log rows", () =>
    withOutside((outside) =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const [id] = yield* publisher.enqueueMany(Item, [{ n: 1 }])
        const claimed = yield* outside.fetch("w", 10, lease)
        expect(claimed.map((j) => j.id)).toEqual([id])
        expect((yield* trail(id!)).map((t) => t.split(":")[0])).toEqual(["Enqueued", "Processing"])
      })
    ))

  describe("transactional enqueue: joins the caller's SqlClient.withTransaction", () => {
    const publishAll = Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const one = yield* publisher.enqueue(Item, { n: 1 })
      const many = yield* publisher.enqueueMany(Item, [{ n: 2 }, { n: 3 }])
      const later = yield* publisher.schedule(Item, { n: 4 }, new Date(Date.now() + 60_000))
      return [one, ...many, later]
    })

    it.live("commit publishes; before it, another connection (a worker) sees and claims nothing", () =>
      withOutside((outside) =>
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const written = yield* Deferred.make<void>()
          const checked = yield* Deferred.make<void>()
          // the checks of another connection run outside the transaction's fiber (a statement run inside
          // it would use the transaction's connection, whatever client it comes from)
          const fiber = yield* Effect.forkChild(
            sql.withTransaction(
              Effect.gen(function* () {
                const ids = yield* publishAll
                // inside the transaction, its own writes are visible
                const [own] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM warp_jobs`
                expect(own!.n).toBe(4)
                yield* Deferred.succeed(written, undefined)
                yield* Deferred.await(checked)
                return ids
              })
            )
          )
          yield* Deferred.await(written)
          expect(yield* pending(outside)).toBe(0)
          expect(yield* outside.fetch("w", 10, lease)).toEqual([])
          yield* Deferred.succeed(checked, undefined)
          const ids = yield* Fiber.join(fiber)
          expect(yield* pending(outside)).toBe(4)
          const claimed = yield* outside.fetch("w", 10, lease)
          expect(claimed.map((j) => j.id).sort()).toEqual(ids.slice(0, 3).sort())
        })
      ))

    it.live("a failure rolls back: nothing published", () =>
      withOutside((outside) =>
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const err = yield* Effect.flip(sql.withTransaction(Effect.andThen(publishAll, Effect.fail("boom" as const))))
          expect(err).toBe("boom")
          expect(yield* pending(outside)).toBe(0)
          expect(yield* pending(yield* JobStore)).toBe(0)
        })
      ))

    it.live("a defect inside the transaction rolls back: nothing published", () =>
      withOutside((outside) =>
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const exit = yield* Effect.exit(sql.withTransaction(Effect.andThen(publishAll, Effect.die(new Error("defect")))))
          expect(Exit.isFailure(exit) && Cause.hasDies(exit.cause)).toBe(true)
          expect(yield* pending(outside)).toBe(0)
        })
      ))

    it.live("interruption rolls back: nothing published", () =>
      withOutside((outside) =>
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const written = yield* Deferred.make<void>()
          const fiber = yield* Effect.forkChild(sql.withTransaction(Effect.andThen(publishAll, Effect.andThen(Deferred.succeed(written, undefined), Effect.never))))
          yield* Deferred.await(written)
          expect(yield* pending(outside)).toBe(0)
          yield* Fiber.interrupt(fiber)
          const exit = yield* Fiber.await(fiber)
          expect(Exit.hasInterrupts(exit)).toBe(true)
          expect(yield* pending(outside)).toBe(0)
        })
      ))
  })
})
