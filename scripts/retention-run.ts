/**
 * Retention under a steady load (issue 43, deliverable 4): `JOBS` keyed jobs enqueued at `RATE` jobs/s
 * on durable PostgreSQL, run to Succeeded by one worker (the built-in store, PostgreSQL provider and
 * concurrency addon; `KEYS` keys, `Semaphore(key, LIMIT)` each), with a short retention (`RETENTION`,
 * e.g. "1 minute"; tombstones kept as long) — or none (`RETENTION=off`) for comparison. Every `SAMPLE`
 * seconds it prints:
 *
 * - the size of `warp_jobs` and of `warp_job_logs`, each with its indexes and TOAST
 *   (`pg_total_relation_size`), and of the tombstones and per-key history; the finished rows kept;
 * - the claim's latency over the window (p50 / p99 / max of the worker's own stand-alone claims,
 *   `JobStoreService.fetch`, timed by a wrapper around the store), and how many claims; and the
 *   finalizing writes' p50 / p99 (on keyed jobs the lane's next claim is carried by them, so the
 *   stand-alone claims are few: `KEYS=0` runs plain jobs, every claim stand-alone);
 * - the throughput over the window (jobs that reached Succeeded per second, from `stats:succeeded`);
 * - the pruner's rows removed (the `warp_retention_pruned_total` counter).
 *
 * At the end: bytes per finished job kept (the two tables with their indexes over the finished rows they
 * hold), and, after the warm-up (`2 × RETENTION + 2 × INTERVAL` from the start), the spread of the
 * samples: the tables' size (max / min), claim p99 and throughput (first third vs last third of the
 * plateau). A figure, not a test.
 *
 *   JOBS=60000 RATE=300 RETENTION="1 minute" npm run retention
 *   JOBS=60000 RATE=300 RETENTION=off npm run retention
 *
 * Env: JOBS (default 1,000,000), RATE (jobs/s, default 1,000), RETENTION (default "1 minute"; "off": no
 * pruning), INTERVAL (the pruner's, default "5 seconds"), BATCH (rows per prune batch, default 500),
 * SAMPLE (seconds, default 10), KEYS (default 100; 0: plain jobs), LIMIT (default 16), LANES (worker fibers, default 8).
 * Creates and drops a database `warp_retention_run_*` on the server of DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/test); `KEEP_DB=1` keeps it.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import { admin, urlOf } from "./support/server.js"
import { Concurrency, Contract, Database, Handler, JobParameters, JobStorePg, Publisher, Registry, SemaphoreProviderPg, Worker } from "../src/index.js"
import { JobStore } from "../src/internal/store/JobStore.js"

const JOBS = Number(process.env.JOBS ?? 1_000_000)
const RATE = Number(process.env.RATE ?? 1_000)
const RETENTION = (process.env.RETENTION ?? "1 minute") as Duration.Input & string
const ON = RETENTION !== "off"
const INTERVAL = (process.env.INTERVAL ?? "5 seconds") as Duration.Input & string
const BATCH = Number(process.env.BATCH ?? 500)
const SAMPLE_S = Number(process.env.SAMPLE ?? 10)
const KEYS = Number(process.env.KEYS ?? 100)
const LIMIT = Number(process.env.LIMIT ?? 16)
const LANES = Number(process.env.LANES ?? 8)
const TICK_MS = 100
/**
 * Seconds between the run's own `VACUUM` of the four tables (0: none). Default: 60 when the server runs
 * no autovacuum (`autovacuum = off`, as on a test server), else 0. A store that deletes rows gets its
 * space back for new rows only through (auto)vacuum; autovacuum with its defaults visits a table that
 * changes this fast about once a minute (`autovacuum_naptime`), which this stands in for.
 */
const VACUUM_ENV = process.env.VACUUM

const Item = Contract.job("RetentionRun", Schema.Struct({ i: Schema.Number }))
const handler = Handler.job(Item, () => Effect.void)

/** Claim latencies (ms) since the last sample; finalizing writes' (which may carry the lane's next claim). */
let claims: Array<number> = []
let finals: Array<number> = []

/** The PostgreSQL store with its `fetch` timed. */
const timedStore = Layer.effect(
  JobStore,
  Effect.map(JobStore, (store) => ({
    ...store,
    fetch: (...args: Parameters<typeof store.fetch>) => {
      const t0 = performance.now()
      return Effect.tap(store.fetch(...args), () => Effect.sync(() => void claims.push(performance.now() - t0)))
    },
    finalize: (f: Parameters<typeof store.finalize>[0]) => {
      const t0 = performance.now()
      return Effect.tap(store.finalize(f), () => Effect.sync(() => void finals.push(performance.now() - t0)))
    }
  }))
).pipe(Layer.provide(JobStorePg.layer))

const pct = (xs: ReadonlyArray<number>, p: number) => {
  if (xs.length === 0) return NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}

interface Sample {
  readonly t: number
  readonly enqueued: number
  readonly succeeded: number
  readonly jobsBytes: number
  readonly logsBytes: number
  readonly tombBytes: number
  readonly histBytes: number
  readonly finishedRows: number
  readonly tombstones: number
  readonly perSecond: number
  readonly claimP50: number
  readonly claimP99: number
  readonly claimMax: number
  readonly claimN: number
  readonly finalP50: number
  readonly finalP99: number
  readonly pruned: number
  readonly vacuumMs: number | undefined
}

const mb = (b: number) => (b / 1048576).toFixed(1)

const program = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const store = yield* JobStore
  const publisher = yield* Publisher.Publisher
  const params = (i: number) => (KEYS === 0 ? JobParameters.make() : JobParameters.make().withSemaphore(`acct:${i % KEYS}`, LIMIT))
  const start = yield* Clock.currentTimeMillis
  let enqueued = 0
  // the producer: RATE jobs a second, in one enqueueMany per TICK_MS, on schedule (catching up if late)
  const producer = yield* Effect.forkChild(
    Effect.gen(function* () {
      while (enqueued < JOBS) {
        const due = Math.min(JOBS, Math.floor((((yield* Clock.currentTimeMillis) - start) / 1000) * RATE) + Math.ceil((RATE * TICK_MS) / 1000))
        if (due > enqueued) {
          const from = enqueued
          const payloads = Array.from({ length: due - from }, (_, k) => ({ i: from + k }))
          yield* publisher.enqueueMany(Item, payloads, (p) => params(p.i))
          enqueued = due
        }
        yield* Effect.sleep(Duration.millis(TICK_MS))
      }
    })
  )
  yield* Worker.make({
    addons: [Concurrency.addon],
    workerId: "retention-run",
    concurrency: LANES,
    pollInterval: "20 millis",
    retention: ON
      ? { succeeded: { maxAge: RETENTION }, deleted: { maxAge: RETENTION }, failed: { maxAge: RETENTION }, tombstones: RETENTION, interval: INTERVAL, batchSize: BATCH }
      : false
  })
  const autovacuum = String((yield* sql`SHOW autovacuum`)[0]!.autovacuum)
  const vacuumS = VACUUM_ENV !== undefined ? Number(VACUUM_ENV) : autovacuum === "off" ? 60 : 0
  let vacuums: Array<number> = []
  if (vacuumS > 0) {
    yield* Effect.forkChild(
      Effect.forever(
        Effect.gen(function* () {
          yield* Effect.sleep(Duration.seconds(vacuumS))
          const t0 = performance.now()
          yield* sql`VACUUM warp_jobs, warp_job_logs, warp_job_tombstones, warp_key_history`
          vacuums.push(performance.now() - t0)
        })
      )
    )
  }
  console.log(`server autovacuum: ${autovacuum}; the run's own VACUUM: ${vacuumS > 0 ? `every ${vacuumS} s` : "none"}`)
  const samples: Array<Sample> = []
  let lastSucceeded = 0
  let lastT = start
  let lastPruned = 0
  const prunedTotal = Effect.map(Metric.snapshot, (all) =>
    all.filter((m) => m.id === "warp_retention_pruned_total").reduce((n, m) => n + Number((m.state as any)?.count ?? 0), 0)
  )
  console.log(
    `retention-run: ${JOBS} jobs at ${RATE}/s, ${KEYS} keys (Semaphore ${LIMIT}), ${LANES} lanes, retention ${ON ? `${RETENTION} (interval ${INTERVAL}, batch ${BATCH})` : "off"}`
  )
  console.log("   t(s)  enq'd  succ'd  jobs/s | warp_jobs MB  logs MB  tomb MB  hist MB | finished rows | claim p50/p99/max ms (n) | finalize p50/p99 ms | pruned | vacuum ms")
  while (true) {
    yield* Effect.sleep(Duration.seconds(SAMPLE_S))
    const now = yield* Clock.currentTimeMillis
    const [sizes] = yield* sql`
      SELECT pg_total_relation_size('warp_jobs')::bigint AS jobs, pg_total_relation_size('warp_job_logs')::bigint AS logs,
             pg_total_relation_size('warp_job_tombstones')::bigint AS tomb, pg_total_relation_size('warp_key_history')::bigint AS hist,
             (SELECT count(*) FROM warp_jobs WHERE state IN ('Succeeded','Failed','Deleted'))::int AS finished,
             (SELECT count(*) FROM warp_job_tombstones)::int AS tombstones`
    const succeeded = (yield* store.counters).get("stats:succeeded") ?? 0
    const window = claims
    claims = []
    const fw = finals
    finals = []
    const pruned = yield* prunedTotal
    const s: Sample = {
      t: (now - start) / 1000,
      enqueued,
      succeeded,
      jobsBytes: Number((sizes as any).jobs),
      logsBytes: Number((sizes as any).logs),
      tombBytes: Number((sizes as any).tomb),
      histBytes: Number((sizes as any).hist),
      finishedRows: Number((sizes as any).finished),
      tombstones: Number((sizes as any).tombstones),
      perSecond: (succeeded - lastSucceeded) / ((now - lastT) / 1000),
      claimP50: pct(window, 50),
      claimP99: pct(window, 99),
      claimMax: pct(window, 100),
      claimN: window.length,
      finalP50: pct(fw, 50),
      finalP99: pct(fw, 99),
      pruned: pruned - lastPruned,
      vacuumMs: vacuums.length === 0 ? undefined : Math.max(...vacuums)
    }
    vacuums = []
    samples.push(s)
    lastSucceeded = succeeded
    lastT = now
    lastPruned = pruned
    console.log(
      `${s.t.toFixed(0).padStart(7)} ${String(s.enqueued).padStart(6)} ${String(s.succeeded).padStart(7)} ${s.perSecond.toFixed(0).padStart(7)} | ` +
        `${mb(s.jobsBytes).padStart(12)} ${mb(s.logsBytes).padStart(8)} ${mb(s.tombBytes).padStart(8)} ${mb(s.histBytes).padStart(8)} | ` +
        `${String(s.finishedRows).padStart(13)} | ${s.claimP50.toFixed(2)}/${s.claimP99.toFixed(2)}/${s.claimMax.toFixed(2)} (${s.claimN}) | ${s.finalP50.toFixed(2)}/${s.finalP99.toFixed(2)} | ${s.pruned} | ${s.vacuumMs === undefined ? "" : s.vacuumMs.toFixed(0)}`
    )
    if (succeeded >= JOBS) break
  }
  yield* Fiber.interrupt(producer)
  const last = samples[samples.length - 1]!
  const bytes = (x: Sample) => x.jobsBytes + x.logsBytes
  console.log(`\nbytes per finished job kept (warp_jobs + warp_job_logs with indexes / finished rows): ${(bytes(last) / Math.max(1, last.finishedRows)).toFixed(0)} B (${last.finishedRows} rows, ${mb(bytes(last))} MB)`)
  if (ON) {
    console.log(`tombstones: ${last.tombstones} rows, ${mb(last.tombBytes)} MB (${(last.tombBytes / Math.max(1, last.tombstones)).toFixed(0)} B each)`)
    const warm = 2 * Duration.toSeconds(Duration.fromInputUnsafe(RETENTION)) + 2 * Duration.toSeconds(Duration.fromInputUnsafe(INTERVAL))
    // the plateau: after the warm-up, while the producer still ran at its rate (the drain at the end excluded)
    const plateau = samples.filter((x) => x.t >= warm && x.enqueued < JOBS)
    if (plateau.length >= 3) {
      const sizes = plateau.map(bytes)
      const third = Math.max(1, Math.floor(plateau.length / 3))
      const mean = (all: ReadonlyArray<number>) => {
        const xs = all.filter((x) => !Number.isNaN(x))
        return xs.reduce((a, b) => a + b, 0) / xs.length
      }
      const head = plateau.slice(0, third)
      const tail = plateau.slice(-third)
      console.log(
        `plateau (t >= ${warm.toFixed(0)} s, ${plateau.length} samples): warp_jobs + warp_job_logs ${mb(Math.min(...sizes))}–${mb(Math.max(...sizes))} MB (max/min ${(Math.max(...sizes) / Math.min(...sizes)).toFixed(2)}); ` +
          `claim p99 first third ${mean(head.map((x) => x.claimP99)).toFixed(2)} ms, last third ${mean(tail.map((x) => x.claimP99)).toFixed(2)} ms; ` +
          `finalize p99 first third ${mean(head.map((x) => x.finalP99)).toFixed(2)} ms, last third ${mean(tail.map((x) => x.finalP99)).toFixed(2)} ms; ` +
          `throughput first third ${mean(head.map((x) => x.perSecond)).toFixed(0)}/s, last third ${mean(tail.map((x) => x.perSecond)).toFixed(0)}/s`
      )
    } else console.log(`plateau: fewer than 3 samples after the warm-up (${warm.toFixed(0)} s); run longer`)
  }
})

const main = async () => {
  const db = `warp_retention_run_${Date.now().toString(36)}`
  await admin(`CREATE DATABASE ${db}`)
  try {
    const env = Layer.mergeAll(Publisher.layer, timedStore).pipe(
      Layer.provideMerge(Registry.layer({ handlers: [handler] })),
      Layer.provideMerge(Concurrency.layer),
      Layer.provideMerge(SemaphoreProviderPg.layer()),
      Layer.provideMerge(timedStore),
      Layer.provideMerge(Database.layer(urlOf(db), { maxConnections: 30 }))
    )
    await Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(env)) as Effect.Effect<void, unknown>)
  } finally {
    if (process.env.KEEP_DB !== "1") await admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
