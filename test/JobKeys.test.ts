/**
 * Job keys at enqueue (`JobParameters.withJobKey` / `withThrottle` / `withDebounce`, `Publisher.submit`),
 * on both stores: the modes, `includeProcessing`, throttle windows, debounce, batches, a caller's
 * transaction, message contracts, typed results, and concurrent producers of one key.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as TestClock from "effect/testing/TestClock"
import { Contract, Handler, JobParameters, Publisher, Warp } from "warp-effect"
import { Outcome } from "../src/internal/job/Outcome.js"
import { JobStore } from "../src/internal/store/JobStore.js"
import { freshDatabaseUrl, pgLayer } from "./support/db.js"
import { detail } from "./support/runtime.js"

const Task = Contract.job("KeyTask", Schema.Struct({ n: Schema.Number }))
const Other = Contract.job("KeyOther", Schema.Struct({ n: Schema.Number }))
const Evt = Contract.message("KeyEvt", Schema.Struct({ n: Schema.Number }))

const handlers = [
  Handler.job(Task, () => Effect.void),
  Handler.job(Other, () => Effect.void),
  Handler.message(Evt, "a", () => Effect.void)
] as const

const setups = [
  ["memory", () => Warp.layerMemory({ handlers, worker: false })],
  [
    "postgres",
    () => Warp.layer({ handlers, worker: false }).pipe(Layer.provideMerge(Layer.unwrap(Effect.map(freshDatabaseUrl, (url) => pgLayer(url, 8)))))
  ]
] as const

const trail = (id: string) => Effect.map(detail(id), (d) => d.logs.map((l) => `${l.kind}: ${l.message}`))
const counters = Effect.flatMap(JobStore, (s) => s.counters)
const lease = Duration.seconds(30)

/** Claims every due job (as a worker would), returning them. */
const claim = Effect.flatMap(JobStore, (s) => s.fetch("w", 50, lease))

/** Ends a claimed job as Succeeded. */
const succeed = (id: string) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const { job } = yield* detail(id)
    expect(yield* store.finalize({ job, workerId: "w", outcome: Outcome.Succeeded(), metadata: job.metadata })).toBe(true)
  })

/** The jobs of a type and their states, newest first. */
const rowsOf = (type: string) =>
  Effect.map(
    Effect.flatMap(JobStore, (s) => s.list({ type, limit: 100, offset: 0 })),
    (p) => p.rows.map((j) => ({ id: j.id, state: j.state, payload: j.payload, jobKey: j.jobKey }))
  )

for (const [name, makeLayer] of setups) {
  describe(`Job keys: ${name}`, () => {
    it.live("mode replace (the default): the second enqueue replaces the pending holder's payload and time", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const key = JobParameters.make().withJobKey("k")
        const first = yield* publisher.submit(Task, { n: 1 }, key, new Date(Date.now() + 3_600_000))
        expect(first._tag).toBe("Created")
        const later = new Date(Date.now() + 7_200_000)
        const second = yield* publisher.submit(Task, { n: 2 }, key, later)
        expect(second).toEqual({ _tag: "Replaced", id: first.id })
        // enqueue answers the id of the job holding the key
        expect(yield* publisher.enqueue(Task, { n: 3 }, key)).toBe(first.id)
        const d = yield* detail(first.id)
        expect(d.job.payload).toEqual({ n: 3 })
        expect(d.job.state).toBe("Enqueued")
        expect(d.job.jobKey).toBe("k")
        expect(yield* trail(first.id)).toEqual([
          expect.stringMatching(/^Scheduled: Scheduled for /),
          "Replaced: Replaced by an enqueue with job key 'k'",
          "Replaced: Replaced by an enqueue with job key 'k'"
        ])
        expect(yield* rowsOf("KeyTask")).toHaveLength(1)
        const c = yield* counters
        expect(c.get("stats:replaced")).toBe(2)
        expect(c.get("stats:replaced:KeyTask")).toBe(2)
        expect(c.get("stats:deduplicated")).toBeUndefined()
      }).pipe(Effect.provide(makeLayer())))

    it.live("mode replacePayload keeps the holder's time; mode keep changes nothing and joins", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const at = new Date(Date.now() + 3_600_000)
        const a = yield* publisher.submit(Task, { n: 1 }, JobParameters.make().withJobKey("p", { mode: "replacePayload" }), at)
        const b = yield* publisher.submit(Task, { n: 2 }, JobParameters.make().withJobKey("p", { mode: "replacePayload" }))
        expect(b).toEqual({ _tag: "Replaced", id: a.id })
        const d = yield* detail(a.id)
        expect(d.job.payload).toEqual({ n: 2 })
        expect(d.job.state).toBe("Scheduled")
        expect(d.job.scheduleTime.getTime()).toBe(at.getTime())

        const keep = JobParameters.make().withJobKey("q", { mode: "keep" })
        const c = yield* publisher.submit(Task, { n: 1 }, keep)
        const e = yield* publisher.submit(Task, { n: 9 }, keep)
        expect(e).toEqual({ _tag: "Joined", id: c.id })
        expect((yield* detail(c.id)).job.payload).toEqual({ n: 1 })
        expect(yield* trail(c.id)).toEqual(["Enqueued: Enqueued", "Joined: Joined by an enqueue with job key 'q'"])
        const counts = yield* counters
        expect(counts.get("stats:deduplicated")).toBe(1)
        expect(counts.get("stats:deduplicated:KeyTask")).toBe(1)
        expect(counts.get("stats:replaced")).toBe(1)
      }).pipe(Effect.provide(makeLayer())))

    it.live("keys are scoped per job type", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const key = JobParameters.make().withJobKey("shared", { mode: "keep" })
        const a = yield* publisher.submit(Task, { n: 1 }, key)
        const b = yield* publisher.submit(Other, { n: 1 }, key)
        expect(a._tag).toBe("Created")
        expect(b._tag).toBe("Created")
        expect(b.id).not.toBe(a.id)
      }).pipe(Effect.provide(makeLayer())))

    it.live("a claimed job no longer holds its key; with includeProcessing it does until it ends", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const pendingOnly = JobParameters.make().withJobKey("a", { mode: "keep" })
        const a1 = yield* publisher.submit(Task, { n: 1 }, pendingOnly)
        const held = JobParameters.make().withJobKey("b", { mode: "keep", includeProcessing: true })
        const b1 = yield* publisher.submit(Task, { n: 1 }, held)
        expect((yield* claim).map((j) => j.id).sort()).toEqual([a1.id, b1.id].sort())
        // a1 is Processing: a new job takes key a; b1 (includeProcessing) still holds b
        const a2 = yield* publisher.submit(Task, { n: 2 }, pendingOnly)
        expect(a2._tag).toBe("Created")
        expect(a2.id).not.toBe(a1.id)
        expect(yield* publisher.submit(Task, { n: 2 }, held)).toEqual({ _tag: "Joined", id: b1.id })
        // once b1 ended, the next enqueue of b releases it and creates a job
        yield* succeed(b1.id)
        const b2 = yield* publisher.submit(Task, { n: 3 }, held)
        expect(b2._tag).toBe("Created")
        expect(b2.id).not.toBe(b1.id)
        expect(yield* publisher.submit(Task, { n: 4 }, held)).toEqual({ _tag: "Joined", id: b2.id })
      }).pipe(Effect.provide(makeLayer())))

    it.live("a replace never touches a Processing holder: it joins it", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const a = yield* publisher.submit(Task, { n: 1 }, JobParameters.make().withJobKey("r", { mode: "keep", includeProcessing: true }))
        yield* claim
        expect(yield* publisher.submit(Task, { n: 2 }, JobParameters.make().withJobKey("r"))).toEqual({ _tag: "Joined", id: a.id })
        expect((yield* detail(a.id)).job.payload).toEqual({ n: 1 })
      }).pipe(Effect.provide(makeLayer())))

    it.live("invalid job keys and options fail with InvalidArgument; nothing is written", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const empty = yield* Effect.flip(publisher.enqueue(Task, { n: 1 }, JobParameters.make().withJobKey("")))
        expect(empty._tag).toBe("InvalidArgument")
        expect(empty._tag === "InvalidArgument" && empty.argument).toBe("jobKey")
        expect(empty.message).toBe(`JobParameters.withJobKey: jobKey must not be empty, got ""`)
        const long = yield* Effect.flip(publisher.enqueue(Task, { n: 1 }, JobParameters.make().withJobKey("x".repeat(513))))
        expect(long._tag === "InvalidArgument" && long.argument).toBe("jobKey")
        expect((yield* publisher.submit(Task, { n: 1 }, JobParameters.make().withJobKey("x".repeat(512))))._tag).toBe("Created")
        const mixed = yield* Effect.flip(publisher.enqueue(Task, { n: 1 }, JobParameters.make().withJobKey("k", { includeProcessing: true })))
        expect(mixed._tag === "InvalidArgument" && mixed.argument).toBe("options.includeProcessing")
        const window = yield* Effect.flip(publisher.enqueue(Task, { n: 1 }, JobParameters.make().withThrottle("k", 0)))
        expect(window._tag === "InvalidArgument" && window.argument).toBe("window")
        const debounceAt = yield* Effect.flip(publisher.submit(Task, { n: 1 }, JobParameters.make().withDebounce("k", "1 second"), new Date()))
        expect(debounceAt._tag === "InvalidArgument" && debounceAt.argument).toBe("at")
        // message contracts: job keys apply to jobs
        const msg = yield* Effect.flip(publisher.publish(Evt, { n: 1 }, JobParameters.make().withJobKey("k")))
        expect(msg._tag).toBe("InvalidArgument")
        expect(msg.message).toBe(`Publisher.publish: params must not carry a job key (job keys apply to jobs), got "k"`)
        const many = yield* Effect.flip(publisher.publishMany(Evt, [{ n: 1 }, { n: 2 }], (p) => (p.n === 2 ? JobParameters.make().withJobKey("k") : JobParameters.make())))
        expect(many._tag).toBe("InvalidBatchItem")
        expect(many._tag === "InvalidBatchItem" && many.index).toBe(1)
        expect(yield* rowsOf("KeyTask")).toHaveLength(1)
        expect(yield* rowsOf("KeyEvt")).toHaveLength(0)
      }).pipe(Effect.provide(makeLayer())))

    it.live("the last of withJobKey / withThrottle / withDebounce wins; other parameters are kept", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const params = JobParameters.make().withDebounce("d", "1 hour").withRetry(3).withJobKey("w", { mode: "keep" })
        expect(params.jobKey?.kind).toBe("key")
        const a = yield* publisher.submit(Task, { n: 1 }, params)
        expect((yield* detail(a.id)).job.state).toBe("Enqueued")
        expect((yield* detail(a.id)).job.jobKey).toBe("w")
        expect(JSON.stringify((yield* detail(a.id)).job.metadata)).toContain("retry")
      }).pipe(Effect.provide(makeLayer())))

    it.live("debounce: each enqueue replaces the payload and pushes the time to now + delay", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const debounce = JobParameters.make().withDebounce("d", "1 hour")
        const before = Date.now()
        const a = yield* publisher.submit(Task, { n: 1 }, debounce)
        const first = (yield* detail(a.id)).job
        expect(first.state).toBe("Scheduled")
        expect(first.scheduleTime.getTime()).toBeGreaterThanOrEqual(before + 3_600_000)
        yield* Effect.sleep("5 millis")
        const b = yield* publisher.submit(Task, { n: 2 }, debounce)
        expect(b).toEqual({ _tag: "Replaced", id: a.id })
        const second = (yield* detail(a.id)).job
        expect(second.payload).toEqual({ n: 2 })
        expect(second.scheduleTime.getTime()).toBeGreaterThan(first.scheduleTime.getTime())
        expect(yield* trail(a.id)).toEqual([expect.stringMatching(/^Scheduled: /), "Replaced: Replaced by an enqueue with job key 'd'"])
      }).pipe(Effect.provide(makeLayer())))

    it.live("a batch: items with the same key resolve in order", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const replaced = yield* publisher.submitMany(Task, [{ n: 1 }, { n: 2 }, { n: 3 }], JobParameters.make().withJobKey("b"))
        const id = replaced[0]!.id
        expect(replaced).toEqual([{ _tag: "Created", id }, { _tag: "Replaced", id }, { _tag: "Replaced", id }])
        expect((yield* detail(id)).job.payload).toEqual({ n: 3 })
        expect(yield* trail(id)).toEqual([
          "Enqueued: Enqueued",
          "Replaced: Replaced by an enqueue with job key 'b'",
          "Replaced: Replaced by an enqueue with job key 'b'"
        ])
        // per-item parameters: keep, then keyless, then replace of the same key, then another key; against the live holder
        const mixed = yield* publisher.submitMany(Task, [{ n: 10 }, { n: 11 }, { n: 12 }, { n: 13 }], (p) =>
          p.n === 10
            ? JobParameters.make().withJobKey("b", { mode: "keep" })
            : p.n === 11
              ? JobParameters.make()
              : p.n === 12
                ? JobParameters.make().withJobKey("b", { mode: "replacePayload" })
                : JobParameters.make().withJobKey("c")
        )
        expect(mixed[0]).toEqual({ _tag: "Joined", id })
        expect(mixed[1]!._tag).toBe("Created")
        expect(mixed[2]).toEqual({ _tag: "Replaced", id })
        expect(mixed[3]!._tag).toBe("Created")
        expect((yield* detail(id)).job.payload).toEqual({ n: 12 })
        // enqueueMany answers the holders' ids
        const ids = yield* publisher.enqueueMany(Task, [{ n: 20 }, { n: 21 }], JobParameters.make().withJobKey("b", { mode: "keep" }))
        expect(ids).toEqual([id, id])
        expect(yield* rowsOf("KeyTask")).toHaveLength(3)
        const counts = yield* counters
        expect(counts.get("stats:replaced")).toBe(3)
        expect(counts.get("stats:deduplicated")).toBe(3)
      }).pipe(Effect.provide(makeLayer())))

    it.live("concurrent batches of the same keys in opposite orders: no deadlock, one job per key", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const keys = Array.from({ length: 2000 }, (_, i) => `o${i}`)
        const batch = (order: ReadonlyArray<string>) =>
          publisher.submitMany(Task, order.map((_, n) => ({ n })), (_, i) => JobParameters.make().withJobKey(order[i]!, { mode: "replacePayload" }))
        const results = yield* Effect.forEach(
          Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? keys : [...keys].reverse())),
          batch,
          { concurrency: "unbounded" }
        )
        expect((yield* Effect.flatMap(JobStore, (s) => s.list({ type: "KeyTask", limit: 0, offset: 0 }))).total).toBe(keys.length)
        for (const [k, key] of keys.entries()) {
          const ids = new Set(results.map((r, b) => r[b % 2 === 0 ? k : keys.length - 1 - k]!.id))
          expect({ key, ids: ids.size }).toEqual({ key, ids: 1 })
        }
      }).pipe(Effect.provide(makeLayer())))

    it.live("a keyed job with a weighted concurrency policy gets its fair-share tag", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const params = JobParameters.make().withSemaphore("tenant", 2, "Wait", { weight: 2 }).withJobKey("f")
        const a = yield* publisher.submit(Task, { n: 1 }, params)
        const b = yield* publisher.submitMany(Task, [{ n: 2 }, { n: 3 }], (p) => params.withJobKey(`g${p.n}`))
        expect(b.map((s) => s._tag)).toEqual(["Created", "Created"])
        for (const id of [a.id, ...b.map((s) => s.id)]) expect((yield* detail(id)).job.fairTag).toBeGreaterThan(0)
      }).pipe(Effect.provide(makeLayer())))

    it.live("concurrent enqueues of one key in one process: one job, one id for every caller", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const results = yield* Effect.forEach(
          Array.from({ length: 30 }, (_, n) => n),
          (n) => publisher.submit(Task, { n }, JobParameters.make().withJobKey(`k${n % 3}`)),
          { concurrency: "unbounded" }
        )
        const rows = yield* rowsOf("KeyTask")
        expect(rows).toHaveLength(3)
        for (const k of [0, 1, 2]) {
          const mine = results.filter((_, n) => n % 3 === k)
          expect(new Set(mine.map((r) => r.id)).size).toBe(1)
          expect(mine.filter((r) => r._tag === "Created")).toHaveLength(1)
          expect(rows.find((r) => r.id === mine[0]!.id)!.jobKey).toBe(`k${k}`)
        }
      }).pipe(Effect.provide(makeLayer())))
  })
}

describe("Job keys: throttle (memory, TestClock)", () => {
  it.effect("an enqueue within the window joins the holder whatever its state; after it, a new job holds the next window", () =>
    Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const throttle = JobParameters.make().withThrottle("t", "10 seconds")
      const a = yield* publisher.submit(Task, { n: 1 }, throttle)
      expect(a._tag).toBe("Created")
      yield* TestClock.adjust("4 seconds")
      expect(yield* publisher.submit(Task, { n: 2 }, throttle)).toEqual({ _tag: "Joined", id: a.id })
      // finished: still holds its window
      yield* claim
      yield* succeed(a.id)
      yield* TestClock.adjust("5 seconds")
      expect(yield* publisher.submit(Task, { n: 3 }, throttle)).toEqual({ _tag: "Joined", id: a.id })
      expect((yield* detail(a.id)).job.payload).toEqual({ n: 1 })
      yield* TestClock.adjust("1 second")
      const b = yield* publisher.submit(Task, { n: 4 }, throttle)
      expect(b._tag).toBe("Created")
      expect(b.id).not.toBe(a.id)
      expect(yield* trail(a.id)).toContain("Joined: Joined by an enqueue within its throttle window of 10 s (job key 't')")
      expect((yield* counters).get("stats:deduplicated:KeyTask")).toBe(2)
    }).pipe(Effect.provide(Warp.layerMemory({ handlers, worker: false }))))
})

describe("Job keys: PostgreSQL only", () => {
  const layer = () => Warp.layer({ handlers, worker: false }).pipe(Layer.provideMerge(Layer.unwrap(Effect.map(freshDatabaseUrl, (url) => pgLayer(url, 8)))))

  it.live("throttle in real time: joins within 1 s of the holder's creation (even finished), then a stale hold is released by the next enqueue", () =>
    Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const throttle = JobParameters.make().withThrottle("t", "1 second")
      const a = yield* publisher.submit(Task, { n: 1 }, throttle)
      const created = (yield* detail(a.id)).job.createdAt.getTime()
      expect(yield* publisher.submit(Task, { n: 2 }, throttle)).toEqual({ _tag: "Joined", id: a.id })
      yield* claim
      yield* succeed(a.id)
      expect(yield* publisher.submit(Task, { n: 3 }, throttle)).toEqual({ _tag: "Joined", id: a.id })
      // the window is time itself: wait for it to pass (by the server's clock, which wrote createdAt)
      const sql = yield* SqlClient.SqlClient
      yield* Effect.sleep(Duration.millis(Math.max(0, created + 1_000 - Date.now()) + 50))
      const [past] = yield* sql<{ ok: boolean }>`SELECT job_key_until <= now() AS ok FROM warp_jobs WHERE id = ${a.id}`
      expect(past!.ok).toBe(true)
      const b = yield* publisher.submit(Task, { n: 4 }, throttle)
      expect(b._tag).toBe("Created")
      expect(b.id).not.toBe(a.id)
      const live = yield* sql<{ id: string }>`SELECT id FROM warp_jobs WHERE job_key_live IS NOT NULL`
      expect(live.map((r) => r.id)).toEqual([b.id])
      expect(yield* trail(a.id)).toEqual([
        "Enqueued: Enqueued",
        "Joined: Joined by an enqueue within its throttle window of 1 s (job key 't')",
        expect.stringMatching(/^Processing: /),
        "Succeeded: Succeeded",
        "Joined: Joined by an enqueue within its throttle window of 1 s (job key 't')"
      ])
    }).pipe(Effect.provide(layer())))

  it.live("in a caller's transaction: rollback publishes nothing and leaves the key free; commit takes it", () =>
    Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const sql = yield* SqlClient.SqlClient
      const key = JobParameters.make().withJobKey("tx", { mode: "keep" })
      const inside = yield* Effect.flip(
        sql.withTransaction(
          Effect.gen(function* () {
            const s = yield* publisher.submit(Task, { n: 1 }, key)
            expect(s._tag).toBe("Created")
            expect(yield* publisher.submit(Task, { n: 2 }, key)).toEqual({ _tag: "Joined", id: s.id })
            return yield* Effect.fail("boom" as const)
          })
        )
      )
      expect(inside).toBe("boom")
      expect(yield* rowsOf("KeyTask")).toHaveLength(0)
      const [logs] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM warp_job_logs`
      expect(logs!.n).toBe(0)
      const committed = yield* sql.withTransaction(publisher.submit(Task, { n: 3 }, key))
      expect(committed._tag).toBe("Created")
      expect(yield* publisher.submit(Task, { n: 4 }, key)).toEqual({ _tag: "Joined", id: committed.id })
    }).pipe(Effect.provide(layer())))

  it.live("concurrent producers (separate transactions) meeting a stale holder: one releases it, one new job, one id for all", () =>
    Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const sql = yield* SqlClient.SqlClient
      const key = JobParameters.make().withJobKey("stale")
      const old = yield* publisher.submit(Task, { n: 0 }, key)
      yield* claim
      // each submit in a transaction of its own: its own statements, none shared through the process's batching
      const results = yield* Effect.forEach(
        Array.from({ length: 24 }, (_, n) => n + 1),
        (n) => sql.withTransaction(publisher.submit(Task, { n }, key)),
        { concurrency: "unbounded" }
      )
      const ids = new Set(results.map((r) => r.id))
      expect(ids.size).toBe(1)
      expect([...ids][0]).not.toBe(old.id)
      expect(results.filter((r) => r._tag === "Created")).toHaveLength(1)
      expect(results.filter((r) => r._tag === "Replaced")).toHaveLength(23)
      const live = yield* sql<{ id: string }>`SELECT id FROM warp_jobs WHERE job_key_live = 'stale'`
      expect(live.map((r) => r.id)).toEqual([...ids])
      expect((yield* detail(old.id)).job.state).toBe("Processing")
    }).pipe(Effect.provide(layer())))

  it.live("a keyless insert is the statement it was: no job key column written", () =>
    Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const sql = yield* SqlClient.SqlClient
      yield* publisher.enqueueMany(Task, [{ n: 1 }, { n: 2 }])
      yield* publisher.enqueue(Task, { n: 3 })
      const [r] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM warp_jobs WHERE job_key IS NULL AND job_key_live IS NULL AND job_key_hold IS NULL`
      expect(r!.n).toBe(3)
    }).pipe(Effect.provide(layer())))
})
