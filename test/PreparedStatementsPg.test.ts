/**
 * The PostgreSQL store runs the worker's claim and finalizing writes as named prepared statements
 * (planned once per connection: @effect/sql-pg's cache of prepared statements), unless
 * `preparedStatements: false`; a prepared statement that a migration made stale (the table's row type
 * changed under a running worker) is prepared again. One connection in the pool, so that every
 * statement of a test runs on the same session and `pg_prepared_statements` shows what that session
 * holds (read by an unnamed statement, so that the read itself is not among them).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import { Job, JobStorePg } from "warp-effect"
import { JobStore } from "../src/internal/store/JobStore.js"
import { freshPgLayer } from "./support/db.js"

const rows = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({
    id: `${prefix}-${i}`,
    type: "T",
    handler: null,
    payload: { i },
    state: "Enqueued" as const,
    scheduleTime: new Date(Date.now() - 1000),
    metadata: {}
  }))

/** Claims `n` rows and finalizes them as Succeeded, one by one and then together (batched). */
const claimAndFinish = (n: number) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const claimed = yield* store.fetch("w1", n, Duration.seconds(30))
    expect(claimed).toHaveLength(n)
    const written = yield* Effect.forEach(claimed, (job) => store.finalize({ job, workerId: "w1", outcome: Job.Outcome.Succeeded(), metadata: {} }), {
      concurrency: "unbounded"
    })
    expect(written.every((w) => w)).toBe(true)
    for (const job of claimed) expect(Option.getOrThrow(yield* store.get(job.id)).job.state).toBe("Succeeded")
  })

/** The session's prepared statements that claim rows (`fc`) or append a finalizing write's audit entry. */
const preparedNames = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ name: string }>`SELECT name FROM pg_prepared_statements
    WHERE statement LIKE '%fc AS (%' OR statement LIKE '%INSERT INTO warp_job_logs (job_id, kind, message, counter)%'
    ORDER BY name`.unprepared.pipe(Effect.map((r) => r.map((x) => x.name)))
)

describe("PostgreSQL store: prepared statements", () => {
  it.live("the claim and the finalizing writes are prepared once per connection and reused", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      yield* store.insert(rows("a", 6))
      yield* claimAndFinish(3)
      const first = yield* preparedNames
      expect(first.length).toBeGreaterThanOrEqual(2)
      yield* claimAndFinish(3)
      // the same statements again: nothing new prepared
      expect(yield* preparedNames).toEqual(first)
    }).pipe(Effect.provide(JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer(1))))))

  it.live("the claim's plan is planned once and reused (its row counts are in its text, not parameters)", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      const sql = yield* SqlClient.SqlClient
      yield* store.insert(rows("g", 20000))
      yield* sql`ANALYZE warp_jobs`.unprepared
      // a backlog of 20,000 rows, then 12 claims of one row on the one connection: PostgreSQL plans the
      // first 5 for their values, then keeps a generic plan when it costs no more; with a parameter for
      // LIMIT it never does on such a backlog (it costs a generic LIMIT as a tenth of the table) and
      // plans every execution afresh
      for (let i = 0; i < 12; i++) {
        const claimed = yield* store.fetch("w1", 1, Duration.seconds(30))
        expect(claimed).toHaveLength(1)
      }
      const plans = yield* sql<{ generic: number; custom: number }>`SELECT generic_plans::int AS generic, custom_plans::int AS custom
        FROM pg_prepared_statements WHERE statement LIKE '%fc AS (%'`.unprepared
      expect(plans).toHaveLength(1)
      expect(plans[0]!.custom).toBeLessThanOrEqual(5)
      expect(plans[0]!.generic).toBeGreaterThanOrEqual(7)
    }).pipe(Effect.provide(JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer(1))))))

  it.live("a statement made stale by a migration (a new column) is prepared again; the claim goes on", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      const sql = yield* SqlClient.SqlClient
      yield* store.insert(rows("b", 4))
      yield* claimAndFinish(2)
      // the claim returns every column of the row: its prepared result type is now stale
      yield* sql`ALTER TABLE warp_jobs ADD COLUMN added_by_a_later_migration int`
      yield* claimAndFinish(2)
    }).pipe(Effect.provide(JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer(1))))))

  it.live("preparedStatements: false prepares nothing (for poolers in transaction mode)", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      yield* store.insert(rows("c", 4))
      yield* claimAndFinish(4)
      expect(yield* preparedNames).toEqual([])
    }).pipe(Effect.provide(JobStorePg.layerWith({ preparedStatements: false }).pipe(Layer.provideMerge(freshPgLayer(1))))))
})
