/**
 * The cost of retention's partial index `warp_jobs_done (type, state, updated_at) WHERE state IN
 * ('Succeeded','Failed','Deleted')` on the insert / claim / finalize path (issue 43): a row enters it
 * once, by the write that ends it. On a fresh database with the core migrations, `N` jobs are inserted
 * (`enqueueMany`-sized chunks of 500), then claimed 8 at a time and finalized Succeeded one by one by
 * `FIBERS` fibers through the store; timed with the index and with it dropped, `ROUNDS` times each in
 * alternation (the first pair is a warm-up, not counted). Prints the mean of each phase per round and the
 * index's size per row. A figure, not a test.
 *
 *   npx tsx scripts/retention-index-cost.ts      (N=20000 ROUNDS=3 FIBERS=4)
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { admin, urlOf } from "./support/server.js"
import { Database, Job, JobStorePg } from "../src/index.js"
import { JobStore } from "../src/internal/store/JobStore.js"

const N = Number(process.env.N ?? 20_000)
const ROUNDS = Number(process.env.ROUNDS ?? 3)
const FIBERS = Number(process.env.FIBERS ?? 4)

const round = (withIndex: boolean, r: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const store = yield* JobStore
    yield* sql`TRUNCATE warp_jobs, warp_job_logs`
    if (withIndex) yield* sql`CREATE INDEX IF NOT EXISTS warp_jobs_done ON warp_jobs (type, state, updated_at) WHERE state IN ('Succeeded','Failed','Deleted')`
    else yield* sql`DROP INDEX IF EXISTS warp_jobs_done`
    yield* sql`VACUUM ANALYZE warp_jobs`
    const t0 = performance.now()
    for (let i = 0; i < N; i += 500) {
      yield* store.insert(
        Array.from({ length: Math.min(500, N - i) }, (_, k) => ({
          id: `r${r}-${i + k}`,
          type: `T${(i + k) % 4}`,
          handler: null,
          payload: {},
          state: "Enqueued" as const,
          scheduleTime: new Date(0),
          metadata: {}
        }))
      )
    }
    const t1 = performance.now()
    yield* Effect.forEach(
      Array.from({ length: FIBERS }, (_, f) => f),
      (f) =>
        Effect.gen(function* () {
          while (true) {
            const got = yield* store.fetch(`w${f}`, 8, Duration.seconds(60))
            if (got.length === 0) return
            for (const j of got) yield* store.finalize({ job: j, workerId: `w${f}`, outcome: Job.Outcome.Succeeded(), metadata: j.metadata })
          }
        }),
      { concurrency: "unbounded", discard: true }
    )
    const t2 = performance.now()
    const [size] = yield* sql`SELECT coalesce(pg_relation_size(to_regclass('warp_jobs_done')), 0)::bigint AS b`
    return { insertMs: t1 - t0, runMs: t2 - t1, indexBytes: Number((size as any).b) }
  })

const main = async () => {
  const db = `warp_retention_idx_${Date.now().toString(36)}`
  await admin(`CREATE DATABASE ${db}`)
  try {
    const env = JobStorePg.layerWith({ preparedStatements: true }).pipe(Layer.provideMerge(Database.layer(urlOf(db), { maxConnections: FIBERS + 4 })))
    await Effect.runPromise(
      Effect.gen(function* () {
        const out: Record<string, Array<{ insertMs: number; runMs: number; indexBytes: number }>> = { with: [], without: [] }
        for (let r = 0; r <= ROUNDS; r++) {
          for (const withIndex of r % 2 === 0 ? [true, false] : [false, true]) {
            const x = yield* round(withIndex, r)
            console.log(`round ${r} ${withIndex ? "with   " : "without"} index: insert ${x.insertMs.toFixed(0)} ms, claim+finalize ${x.runMs.toFixed(0)} ms (${((x.runMs / N) * 1000).toFixed(0)} µs/job), index ${(x.indexBytes / 1024).toFixed(0)} KB`)
            if (r > 0) out[withIndex ? "with" : "without"]!.push(x)
          }
        }
        const mean = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0) / xs.length
        for (const k of ["with", "without"] as const) {
          const xs = out[k]!
          console.log(`${k.padEnd(7)}: insert ${mean(xs.map((x) => x.insertMs)).toFixed(0)} ms, claim+finalize ${mean(xs.map((x) => x.runMs)).toFixed(0)} ms for ${N} jobs`)
        }
        const w = out.with!
        console.log(`index size: ${(mean(w.map((x) => x.indexBytes)) / N).toFixed(1)} B per finished row`)
      }).pipe(Effect.scoped, Effect.provide(env)) as Effect.Effect<void, unknown>
    )
  } finally {
    await admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
