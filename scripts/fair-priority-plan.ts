/**
 * The plan of the claim on `ROWS` due weighted rows (default 100,000) over `FLOWS` keys (default 300),
 * weight 1, tags as the insert gives them (a key's i-th row at tag i): first every row at priority 0 (a
 * key's turn keeps its own row: one empty probe of `warp_jobs_fair_priority` per key considered), then
 * with priorities 0 / 5 / 10 spread inside every key (80% / 15% / 5%: a key's turn goes to its best row).
 * Prints `EXPLAIN (ANALYZE, BUFFERS)` of a claim of 1 and of 16 rows in each case (rolled back).
 *
 *   DATABASE_URL=postgres://… npx tsx scripts/fair-priority-plan.ts
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { JobStorePg } from "../src/index.js"
import { claimCtes } from "../src/internal/store/pg/fetch.js"
import { explain } from "./support/explain.js"
import { withDatabase } from "./support/server.js"

const rows = Number(process.env.ROWS ?? 100_000)
const flows = Number(process.env.FLOWS ?? 300)

const main = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    INSERT INTO warp_jobs (id, type, handler, payload, state, schedule_time, metadata, origin, origin_for, priority, fair_tag)
    SELECT 'job-' || lpad(g::text, 8, '0'), 'T', NULL, '{}'::jsonb, 'Enqueued', now() - interval '1 hour' + (g || ' milliseconds')::interval,
           jsonb_build_object('policies', jsonb_build_object('concurrency', jsonb_build_object('source', 'enqueue',
             'value', jsonb_build_object('key', 'flow-' || (g % ${flows}), 'limit', 1000, 'mode', 'Wait', 'weight', 1)))),
           'Enqueued', NULL, 0, (g / ${flows}) + 1 + (g % ${flows}) / 100000.0
    FROM generate_series(0, ${rows - 1}) g`
  yield* sql`VACUUM ANALYZE warp_jobs`
  const claim = (limit: number, label: string) =>
    Effect.gen(function* () {
      const { ctes, rows: claimed } = claimCtes(sql, "absent", "w", limit, Duration.seconds(30), { contended: [] })
      const [text, params] = sql`WITH ${ctes} SELECT * FROM ${claimed} k ORDER BY priority DESC, schedule_time, id`.compile()
      console.log(`\n=== claim of ${limit}, ${label} ===\n${yield* explain(sql, text, params)}`)
    })
  yield* claim(1, `${rows} weighted rows over ${flows} keys, all at priority 0`)
  yield* claim(16, `${rows} weighted rows over ${flows} keys, all at priority 0`)
  yield* sql`UPDATE warp_jobs SET priority = CASE WHEN hashtext(id) % 20 = 0 THEN 10 WHEN abs(hashtext(id)) % 20 < 4 THEN 5 ELSE 0 END`
  yield* sql`VACUUM ANALYZE warp_jobs`
  yield* claim(1, "priorities 0 / 5 / 10 inside every key")
  yield* claim(16, "priorities 0 / 5 / 10 inside every key")
})

const run = (url: string) =>
  Effect.runPromise(
    Effect.scoped(main).pipe(
      Effect.provide(Layer.provideMerge(JobStorePg.layer, PgClient.layer({ url: Redacted.make(url), maxConnections: 4 })))
    )
  )

await withDatabase("warp_fair_priority_plan", run)
