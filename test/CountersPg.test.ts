/**
 * PostgreSQL counters are derived from the audit trail: a write that ends a job only appends its entry
 * (which names its counter), never updates a counter row; the entries of finished transactions are
 * folded into `warp_counters` by the roll-up, and a read adds the entries not folded yet.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Latch from "effect/Latch"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import pg from "pg"
import { Job, JobStorePg } from "warp-effect"
import { JobStore } from "../src/internal/store/JobStore.js"
import { rollUpCounters } from "../src/internal/store/pg/counters.js"
import { coreMigrations } from "../src/internal/store/Migrations.js"
import { finalize } from "../src/internal/store/pg/finalize.js"
import { freshDatabaseUrl, freshPgLayer } from "./support/db.js"

/** The store with its own roll-up parked (its first fold a day after it starts), so each test folds when it says so. */
const storeLayer = () => Layer.provideMerge(JobStorePg.layerWith({ counterRollUp: "1 day" }), freshPgLayer())

const enqueue = (n: number, prefix: string) =>
  Effect.flatMap(JobStore, (store) =>
    store.insert(
      Array.from({ length: n }, (_, i) => ({
        id: `${prefix}-${i}`,
        type: i % 2 === 0 ? "Even" : "Odd",
        handler: null,
        payload: {},
        state: "Enqueued" as const,
        scheduleTime: new Date(Date.now() - 1000),
        metadata: {}
      }))
    )
  )

/** The core migrations before 0012 (counters from the audit trail), as the store ran them. */
const before0012 = Object.fromEntries(Object.entries(coreMigrations).filter(([name]) => name < "0012"))

/** `n` jobs enqueued (types Even and Odd in turn) and claimed by worker `w1`. */
const claimedJobs = (n: number, prefix: string) =>
  Effect.gen(function* () {
    yield* enqueue(n, prefix)
    const claimed = yield* (yield* JobStore).fetch("w1", n, Duration.seconds(30))
    expect(claimed).toHaveLength(n)
    return claimed
  })

/** The counter rows as stored (what the roll-up folded), summed per key. */
const folded = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.map(
    sql<{ key: string; value: number }>`SELECT key, sum(value)::int AS value FROM warp_counters GROUP BY key`,
    (rows) => new Map(rows.map((r) => [r.key, Number(r.value)]))
  )
)

/**
 * Roll-ups until `expected` entries have been folded in all; returns how many were. A transaction the
 * fold cannot place in a database (one that ended between the fold's snapshot and its read of
 * `pg_stat_activity`) holds a fold back for that once: it is retried, a few milliseconds apart, for at
 * most 10 seconds.
 */
const foldAll = (expected: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    let total = 0
    yield* Effect.repeat(
      Effect.map(rollUpCounters(sql), (n) => void (total += n)),
      { while: () => total < expected, schedule: Schedule.max([Schedule.spaced("20 millis"), Schedule.recurs(500)]) }
    )
    return total
  })

describe("PostgreSQL counters", () => {
  it.live("finalizes write no counter row; reads count them before and after the roll-up, never twice", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      const sql = yield* SqlClient.SqlClient
      const n = 64
      const claimed = yield* claimedJobs(n, "c")
      yield* Effect.forEach(
        claimed,
        (job, i) =>
          store.finalize({ job, workerId: "w1", outcome: i % 4 === 0 ? Job.Outcome.Requeued({ reason: "again" }) : Job.Outcome.Succeeded(), metadata: {} }),
        { concurrency: 8 }
      )
      const requeued = claimed.filter((_, i) => i % 4 === 0)
      const expected = new Map([
        ["stats:requeued", requeued.length],
        ["stats:requeued:Even", requeued.filter((j) => j.type === "Even").length],
        ["stats:requeued:Odd", requeued.filter((j) => j.type === "Odd").length],
        ["stats:succeeded", n - requeued.length],
        ["stats:succeeded:Even", claimed.filter((j, i) => i % 4 !== 0 && j.type === "Even").length],
        ["stats:succeeded:Odd", claimed.filter((j, i) => i % 4 !== 0 && j.type === "Odd").length]
      ])
      // nothing folded yet: no counter row was written by the finalizes, and the read counts the entries
      expect((yield* folded).size).toBe(0)
      expect(yield* store.counters).toEqual(expected)
      // the roll-up folds every entry once: the rows now hold the counts, and the read does not add them again
      expect(yield* foldAll(n)).toBe(n)
      expect(yield* folded).toEqual(expected)
      expect(yield* store.counters).toEqual(expected)
      expect(yield* rollUpCounters(sql)).toBe(0)
      expect(yield* store.counters).toEqual(expected)
    }).pipe(Effect.provide(storeLayer())))

  it.live("an entry whose transaction is still open when the roll-up runs is folded by a later one", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      const sql = yield* SqlClient.SqlClient
      const [a, b] = yield* claimedJobs(2, "t")
      // `a` ends in a transaction held open (on its own connection) across a roll-up; `b` ends after it began
      const inTx = yield* Latch.make(false)
      const release = yield* Latch.make(false)
      const fiber = yield* Effect.forkChild(
        sql.withTransaction(
          Effect.gen(function* () {
            // the single finalizing statement, on the transaction's connection (the store's batcher writes from its own fiber)
            expect(yield* finalize(sql, Effect.succeed("absent" as const), { job: a!, workerId: "w1", outcome: Job.Outcome.Succeeded(), metadata: {} })).toBe(true)
            yield* inTx.open
            yield* release.await
          })
        )
      )
      yield* inTx.await
      yield* store.finalize({ job: b!, workerId: "w1", outcome: Job.Outcome.Succeeded(), metadata: {} })
      // `b` committed, but `a`'s transaction is older and still open: neither may be folded past (a mark
      // taken as the largest transaction seen would skip `a` for good once it commits)
      expect(yield* rollUpCounters(sql)).toBe(0)
      expect((yield* store.counters).get("stats:succeeded")).toBe(1)
      yield* release.open
      yield* Fiber.await(fiber)
      expect((yield* store.counters).get("stats:succeeded")).toBe(2)
      expect(yield* foldAll(2)).toBe(2)
      expect((yield* folded).get("stats:succeeded")).toBe(2)
      expect((yield* store.counters).get("stats:succeeded")).toBe(2)
    }).pipe(Effect.provide(storeLayer())))

  it.live("a transaction held open in another database of the server does not hold folding back", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      // another database, with a transaction that has a transaction id and stays open for the whole test
      const other = new pg.Client({ connectionString: yield* freshDatabaseUrl })
      yield* Effect.acquireRelease(
        Effect.promise(async () => {
          await other.connect()
          await other.query("BEGIN")
          await other.query("SELECT txid_current()")
        }),
        () => Effect.promise(() => other.query("ROLLBACK").then(() => other.end()))
      )
      const [job] = yield* claimedJobs(1, "o")
      yield* store.finalize({ job: job!, workerId: "w1", outcome: Job.Outcome.Succeeded(), metadata: {} })
      // the server's oldest running transaction is the other database's: a mark at the server's xmin
      // would stay below this entry for as long as it is open
      expect(yield* foldAll(1)).toBe(1)
      expect((yield* folded).get("stats:succeeded")).toBe(1)
    }).pipe(Effect.scoped, Effect.provide(storeLayer())))

  it.live("roll-ups from several connections at once, during finalizes, count every entry exactly once", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      const sql = yield* SqlClient.SqlClient
      const n = 200
      const claimed = yield* claimedJobs(n, "r")
      let done = false
      let folds = 0
      let rounds = 0
      const rollers = yield* Effect.forkChild(
        Effect.all(
          Array.from({ length: 3 }, () =>
            Effect.repeat(
              Effect.map(rollUpCounters(sql), (k) => {
                folds += k
                rounds++
              }),
              { until: () => done }
            )
          ),
          { concurrency: "unbounded", discard: true }
        )
      )
      yield* Effect.forEach(claimed, (job) => store.finalize({ job, workerId: "w1", outcome: Job.Outcome.Succeeded(), metadata: {} }), {
        concurrency: 8
      })
      done = true
      yield* Fiber.join(rollers)
      expect(rounds).toBeGreaterThan(3)
      folds += yield* foldAll(n - folds)
      expect(folds).toBe(n)
      expect((yield* folded).get("stats:succeeded")).toBe(n)
      expect((yield* store.counters).get("stats:succeeded")).toBe(n)
    }).pipe(Effect.provide(storeLayer())))

  it.live("an upgrade from sharded counters: rows counted before migration 0012 keep their counts, and are never counted again", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      // the schema as it was before migration 0012, with a job finalized the old way: its entry names no
      // counter, and its counts sit in two shard rows of each counter
      yield* Migrator.make({})({ loader: Migrator.fromRecord(before0012), table: "warp_migrations" })
      yield* sql`INSERT INTO warp_jobs (id, type, payload, state, schedule_time, metadata) VALUES ('old-1', 'Even', '{}', 'Succeeded', now(), '{}')`
      yield* sql`INSERT INTO warp_job_logs (job_id, kind, message) VALUES ('old-1', 'Succeeded', 'Succeeded')`
      yield* sql`INSERT INTO warp_counters (key, shard, value) VALUES ('stats:succeeded', 3, 4), ('stats:succeeded', 9, 3), ('stats:succeeded:Even', 3, 7)`
      // the store's layer runs the rest (0012) and reads and folds the new way
      yield* Effect.gen(function* () {
        const store = yield* JobStore
        expect((yield* store.counters).get("stats:succeeded")).toBe(7)
        const [job] = yield* claimedJobs(1, "new")
        yield* store.finalize({ job: job!, workerId: "w1", outcome: Job.Outcome.Succeeded(), metadata: {} })
        expect(yield* store.counters).toEqual(new Map([["stats:succeeded", 8], ["stats:succeeded:Even", 8]]))
        expect(yield* foldAll(1)).toBe(1)
        expect(yield* store.counters).toEqual(new Map([["stats:succeeded", 8], ["stats:succeeded:Even", 8]]))
        // the old entry was not rewritten by the migration: no transaction id, no counter
        const [old] = yield* sql<{ xact: unknown; counter: unknown }>`SELECT xact, counter FROM warp_job_logs WHERE job_id = 'old-1'`
        expect(old).toEqual({ xact: null, counter: null })
      }).pipe(Effect.provide(JobStorePg.layerWith({ counterRollUp: "1 day" })))
    }).pipe(Effect.provide(freshPgLayer())))
})
