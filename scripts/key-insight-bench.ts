/**
 * Times the dashboard's key views (`JobStorePg` → `KeyInsightPg`) at 10^5 keys and 10^6 jobs on a
 * local PostgreSQL: seeds a fresh database with `INSERT … SELECT generate_series`, runs each read
 * through the store (wall time, median of 5 after a warm-up) and prints `EXPLAIN (ANALYZE, BUFFERS)`
 * of its statements. The live view is timed cold (a new store each time: the ranking of every live
 * key is computed) and warm (the ranking reused, as by requests within a few seconds of each other).
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx scripts/key-insight-bench.ts
 *
 * Drops and recreates the database `warp_keys_bench` on that server (dropped again at the end unless
 * KEEP=1; REUSE=1 times a kept one without seeding it again).
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import pg from "pg"
import { admin, urlOf } from "./support/server.js"
import * as KeyInsightPg from "../src/internal/store/KeyInsightPg.js"
import * as Migrations from "../src/internal/store/Migrations.js"

const KEYS = Number(process.env.KEYS ?? 100_000)
const JOBS = Number(process.env.JOBS ?? 1_000_000)
const LIVE = Math.round(JOBS * Number(process.env.LIVE_FRACTION ?? 0.3))
const KEYED_ENDED = Math.round((JOBS - LIVE) * 6 / 7)
const REQUEUES = Number(process.env.REQUEUES ?? 500_000)
const db = "warp_keys_bench"
const url = urlOf(db)

const meta = (i: string) =>
  `jsonb_build_object('policies', jsonb_build_object('concurrency', jsonb_build_object('source', 'enqueue', 'value',
     jsonb_build_object('key', 'key-' || (${i} % ${KEYS}), 'limit', 1 + (${i} % 5), 'mode', 'Wait'))))`

const program = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const t = async <A>(label: string, f: () => Promise<A>) => {
    const s = performance.now()
    const a = await f()
    console.log(`${label}: ${((performance.now() - s) / 1000).toFixed(1)} s`)
    return a
  }
  const run = <A>(e: Effect.Effect<A, unknown>) => Effect.runPromise(e)
  yield* Migrations.core
  yield* Migrations.concurrency
  if (process.env.REUSE !== "1") yield* Effect.promise(() =>
    t("seed", () =>
      run(
        Effect.gen(function* () {
          // live rows: every key has ~3; 10% Processing (claimed in the last hour), 10% Scheduled tomorrow, the rest Enqueued and due
          yield* sql.unsafe(`
            INSERT INTO warp_jobs (id, type, handler, payload, state, schedule_time, metadata, attempt, created_at, updated_at, locked_by, lease_until, origin)
            SELECT 'live-' || i, 'T' || (i % 7), NULL, '{}'::jsonb,
                   CASE i % 10 WHEN 0 THEN 'Processing' WHEN 1 THEN 'Scheduled' ELSE 'Enqueued' END,
                   CASE i % 10 WHEN 1 THEN now() + interval '1 day' ELSE now() - (i % 7200) * interval '1 second' END,
                   ${meta("i")}, CASE i % 10 WHEN 0 THEN 1 ELSE 0 END,
                   now() - (i % 7200) * interval '1 second', now() - (i % 3600) * interval '1 second',
                   CASE i % 10 WHEN 0 THEN 'worker-' || (i % 16) END, CASE i % 10 WHEN 0 THEN now() + interval '30 seconds' END,
                   'Enqueued'
            FROM generate_series(1, ${LIVE}) i`)
          // ended rows with a key, last write spread over 48 h: 80% Succeeded, 10% Deleted, 10% Failed
          yield* sql.unsafe(`
            INSERT INTO warp_jobs (id, type, handler, payload, state, schedule_time, metadata, attempt, created_at, updated_at, origin)
            SELECT 'done-' || i, 'T' || (i % 7), NULL, '{}'::jsonb,
                   CASE i % 10 WHEN 0 THEN 'Deleted' WHEN 1 THEN 'Failed' ELSE 'Succeeded' END,
                   now() - (i % 172800) * interval '1 second', ${meta("i")}, 1,
                   now() - (i % 172800) * interval '1 second' - interval '1 minute', now() - (i % 172800) * interval '1 second', 'Enqueued'
            FROM generate_series(1, ${KEYED_ENDED}) i`)
          // the rest: ended rows without a key
          yield* sql.unsafe(`
            INSERT INTO warp_jobs (id, type, handler, payload, state, schedule_time, metadata, attempt, created_at, updated_at, origin)
            SELECT 'plain-' || i, 'P', NULL, '{}'::jsonb, 'Succeeded', now() - (i % 172800) * interval '1 second', '{"policies":{}}'::jsonb, 1,
                   now() - (i % 172800) * interval '1 second', now() - (i % 172800) * interval '1 second', 'Enqueued'
            FROM generate_series(1, ${JOBS - LIVE - KEYED_ENDED}) i`)
          // Requeued audit entries (and the claim before each), on live and ended keyed rows, over 48 h
          yield* sql.unsafe(`
            INSERT INTO warp_job_logs (job_id, at, kind, message)
            SELECT CASE WHEN i % 2 = 0 THEN 'live-' || (1 + i % ${LIVE}) ELSE 'done-' || (1 + i % ${KEYED_ENDED}) END,
                   now() - (i % 172800) * interval '1 second', k.kind, k.message
            FROM generate_series(1, ${REQUEUES}) i
            CROSS JOIN (VALUES ('Processing', 'Attempt 1 claimed by worker-1'), ('Requeued', 'full (2 slots)')) k(kind, message)`)
          yield* sql.unsafe(`INSERT INTO warp_concurrency_limits (key, slots) SELECT 'key-' || (i * 997 % ${KEYS}), 1 + i % 9 FROM generate_series(1, 100) i ON CONFLICT DO NOTHING`)
          yield* sql.unsafe(`VACUUM ANALYZE warp_jobs`)
          yield* sql.unsafe(`VACUUM ANALYZE warp_job_logs`)
        })
      )
    )
  )
  const counts = yield* sql`SELECT (SELECT count(*) FROM warp_jobs)::int AS jobs,
    (SELECT count(DISTINCT metadata #>> '{policies,concurrency,value,key}') FROM warp_jobs)::int AS keys,
    (SELECT count(*) FROM warp_jobs WHERE state IN ('Scheduled','Enqueued','Processing'))::int AS live,
    (SELECT count(*) FROM warp_job_logs)::int AS logs`
  console.log("seeded:", counts[0])
  const overrides = (yield* sql<{ key: string; slots: number }>`SELECT key, slots FROM warp_concurrency_limits`).map((r) => ({ key: r.key, slots: Number(r.slots) }))
  const { service, statements } = KeyInsightPg.makeWithStatements(sql)
  const probe = (yield* sql<{ id: string; key: string }>`
    SELECT id, metadata #>> '{policies,concurrency,value,key}' AS key FROM warp_jobs WHERE state = 'Enqueued' ORDER BY id DESC LIMIT 1`)[0]!
  const cold = (offset: number) => Effect.suspend(() => KeyInsightPg.makeWithStatements(sql).service.liveKeys({ overrides, limit: 25, offset }))
  const firstPage = yield* service.liveKeys({ overrides, limit: 25, offset: 0 })
  type Compiled = { compile: () => readonly [string, ReadonlyArray<unknown>] }
  const cases: ReadonlyArray<readonly [string, Effect.Effect<unknown, unknown>, Compiled | undefined]> = [
    ["liveKeys page 1 (25 keys), cold: the ranking computed", cold(0), statements.ranking()],
    [
      "liveKeys page 1 (25 keys), warm: the ranking reused",
      service.liveKeys({ overrides, limit: 25, offset: 0 }),
      statements.keysPage(firstPage.rows.map((r) => r.key), firstPage.rows.map((r) => r.pressure), overrides)
    ],
    ["liveKeys page 400 (25 keys), warm", service.liveKeys({ overrides, limit: 25, offset: 9975 }), undefined],
    [`line(${probe.key}, ${probe.id})`, service.line(probe.key, { id: probe.id, override: null }), statements.line(probe.key, { id: probe.id, override: null })]
  ]
  const client = new pg.Client({ connectionString: url })
  yield* Effect.promise(() => client.connect())
  for (const [label, effect, statement] of cases) {
    yield* effect
    const times: Array<number> = []
    for (let i = 0; i < 5; i++) {
      const s = performance.now()
      yield* effect
      times.push(performance.now() - s)
    }
    times.sort((a, b) => a - b)
    console.log(`\n== ${label}: store call median ${times[2]!.toFixed(1)} ms (min ${times[0]!.toFixed(1)}, max ${times[4]!.toFixed(1)}, 5 runs after a warm-up)`)
    if (statement === undefined) continue
    const [text, params] = statement.compile()
    // as the store runs them: with JIT off
    yield* Effect.promise(() => client.query(`SET jit = off`))
    const plan = yield* Effect.promise(() => client.query(`EXPLAIN (ANALYZE, BUFFERS) ${text}`, params as Array<unknown>))
    const lines = plan.rows.map((r: any) => r["QUERY PLAN"] as string)
    console.log(lines.filter((l) => /Scan|Execution Time|Planning Time|HashAggregate|GroupAggregate|Sort Method|JIT|Timing/.test(l) && !/never executed/.test(l)).join("\n"))
  }
  yield* Effect.promise(() => client.end())
})

const main = async () => {
  if (process.env.REUSE !== "1") {
    await admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
    await admin(`CREATE DATABASE ${db}`)
  }
  try {
    await Effect.runPromise(
      Effect.scoped(Effect.provide(program, PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })))
    )
  } finally {
    if (process.env.KEEP !== "1") await admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
  }
}

void main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
