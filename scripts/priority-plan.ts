/**
 * The plan of the plain claim and of `nextDue` on a table of `ROWS` pending rows (default 100,000) with
 * priorities: 80% at 0, 15% at 5, 5% at 10; half due, half scheduled an hour ahead (so the claim walks
 * past the future rows of the higher priorities in `warp_jobs_due_unfair`). Prints
 * `EXPLAIN (ANALYZE, BUFFERS)` of a claim of 1 and of 16 rows (rolled back), of a claim of 1 once every
 * row of priority 10 is scheduled ahead (the walk past them), and of `nextDue`.
 *
 *   DATABASE_URL=postgres://… npx tsx scripts/priority-plan.ts
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { JobStorePg } from "../src/index.js"
import { claimCtes } from "../src/internal/store/pg/fetch.js"
import { nextDueStatement } from "../src/internal/store/pg/nextDue.js"
import { explain } from "./support/explain.js"
import { withDatabase } from "./support/server.js"

const rows = Number(process.env.ROWS ?? 100_000)

const main = Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`
      INSERT INTO warp_jobs (id, type, handler, payload, state, schedule_time, metadata, origin, origin_for, priority)
      SELECT 'job-' || lpad(g::text, 8, '0'), 'T', NULL, '{}'::jsonb,
             CASE WHEN g % 2 = 0 THEN 'Enqueued' ELSE 'Scheduled' END,
             CASE WHEN g % 2 = 0 THEN now() - (g || ' milliseconds')::interval ELSE now() + interval '1 hour' + (g || ' milliseconds')::interval END,
             '{"policies":{}}'::jsonb, CASE WHEN g % 2 = 0 THEN 'Enqueued' ELSE 'Scheduled' END, NULL,
             CASE WHEN g % 20 IN (1, 2) THEN 10 WHEN g % 20 IN (3, 4, 5, 6, 8) THEN 5 WHEN g % 20 = 0 THEN 10 ELSE 0 END
      FROM generate_series(1, ${rows}) g`
    yield* sql`ANALYZE warp_jobs`
    const claim = (limit: number, label: string) =>
      Effect.gen(function* () {
        const { ctes, rows: claimed } = claimCtes(sql, "absent", "w", limit, Duration.seconds(30), { contended: [] })
        const [text, params] = sql`WITH ${ctes} SELECT * FROM ${claimed} k ORDER BY priority DESC, schedule_time, id`.compile()
        console.log(`\n=== claim of ${limit}, ${label} ===\n${yield* explain(sql, text, params)}`)
      })
    yield* claim(1, `${rows} pending rows`)
    yield* claim(16, `${rows} pending rows`)
    // the cost bound: every row of the highest priority scheduled ahead, walked past by each claim
    yield* sql`UPDATE warp_jobs SET state = 'Scheduled', schedule_time = now() + interval '1 hour' + random() * interval '1 hour' WHERE priority = 10`
    yield* sql`VACUUM ANALYZE warp_jobs`
    yield* claim(1, "every priority-10 row (10%) scheduled ahead")
    // nextDue, as the store runs it
    const [text, params] = nextDueStatement(sql).compile()
    console.log(`\n=== nextDue ===\n${yield* explain(sql, text, params)}`)
  })

const run = (url: string) =>
  Effect.runPromise(
    Effect.scoped(main).pipe(
      Effect.provide(Layer.provideMerge(JobStorePg.layer, PgClient.layer({ url: Redacted.make(url), maxConnections: 4 })))
    )
  )

await withDatabase("warp_priority_plan", run)
