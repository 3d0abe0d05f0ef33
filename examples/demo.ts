/**
 * `npm start`: the embedded demo. Starts PostgreSQL (embedded, or a temporary database on the server
 * named by DATABASE_URL; `--store memory` for no database at all), migrates, runs two workers of four
 * fibers each, enqueues three concurrency workloads and prints live progress, then a summary per key:
 * the most handlers ever running at once (never above the limit), skipped and requeued counts.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import pg from "pg"
import {
  Concurrency,
  Contract,
  Database,
  Handler,
  JobMetadata,
  JobParameters,
  JobStore,
  JobStoreMemory,
  JobStorePg,
  Mutex,
  Publisher,
  Registry,
  Semaphore,
  SemaphoreProviderMemory,
  SemaphoreProviderPg,
  Worker
} from "warp-effect"
import { Dashboard } from "warp-effect/dashboard"
import { EmbeddedPostgres } from "warp-effect/testing"

// ---- contracts: where each constraint is declared --------------------------------------------
/** Dedupe: refreshing a cache twice at once is wasteful — Mutex, default mode Skip. */
const RefreshCache = Contract.job("RefreshCache", Schema.Struct({ request: Schema.Number }), { policy: [Mutex("cache-refresh")] })
/** Per-user serialization: the key is passed at enqueue (`withMutex("user:<id>", "Wait")`). */
const HandleUpdate = Contract.job("HandleUpdate", Schema.Struct({ userId: Schema.Number, seq: Schema.Number }))
/** Capping: at most 5 concurrent calls to the payment API — Semaphore, default mode Wait. */
const CallPaymentApi = Contract.job("CallPaymentApi", Schema.Struct({ call: Schema.Number }), { policy: [Semaphore("payment-api", 5)] })

// ---- in-process observation of live handlers per key ------------------------------------------
const live = new Map<string, number>()
const peak = new Map<string, number>()
const hold = (key: string, ms: number) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const n = (live.get(key) ?? 0) + 1
      live.set(key, n)
      peak.set(key, Math.max(peak.get(key) ?? 0, n))
    }),
    () => Effect.sleep(Duration.millis(ms)),
    () => Effect.sync(() => live.set(key, (live.get(key) ?? 1) - 1))
  )

const handlers = [
  Handler.job(RefreshCache, () => hold("cache-refresh", 300)),
  Handler.job(HandleUpdate, ({ userId }) => hold(`user:${userId}`, 40)),
  Handler.job(CallPaymentApi, () => hold("payment-api", 80))
] as const

const useMemory = process.argv.includes("--store") && process.argv[process.argv.indexOf("--store") + 1] === "memory"

/** A PostgreSQL database for the demo: embedded, or a temporary one on DATABASE_URL's server. */
const database = Effect.acquireRelease(
  Effect.promise(async () => {
    const given = process.env.DATABASE_URL
    if (given === undefined || given === "") {
      const t0 = Date.now()
      const server = await EmbeddedPostgres.start()
      console.log(`embedded PostgreSQL started on 127.0.0.1:${server.port} in ${Date.now() - t0} ms`)
      return { url: server.url, stop: server.stop }
    }
    const name = `warp_demo_${Date.now().toString(36)}`
    const admin = new pg.Client({ connectionString: given })
    await admin.connect().catch((e) => {
      throw new Error(`cannot reach DATABASE_URL host ${new URL(given).host}: ${e.message}`)
    })
    await admin.query(`CREATE DATABASE ${name}`)
    await admin.end()
    const u = new URL(given)
    u.pathname = `/${name}`
    console.log(`using temporary database ${name} on ${new URL(given).host} (from DATABASE_URL)`)
    return {
      url: u.toString(),
      stop: async () => {
        const c = new pg.Client({ connectionString: given })
        await c.connect()
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
        await c.end()
      }
    }
  }),
  (db) => Effect.promise(() => db.stop())
)

const pad = (s: string | number, n: number) => String(s).padEnd(n)

const serveAfter = process.argv.includes("--serve")

const program = Effect.gen(function* () {
  const url = yield* Dashboard.url
  yield* Console.log(`dashboard: ${url}/jobs  (concurrency limits: ${url}/concurrency)${serveAfter ? "" : "  — add --serve to keep it up after the demo"}`)
  const publisher = yield* Publisher.Publisher
  const store = yield* JobStore.JobStore
  const t0 = Date.now()

  // Workload 1: 12 cache refresh requests arriving while one runs -> most are skipped (Deleted).
  for (let request = 0; request < 12; request++) yield* publisher.enqueue(RefreshCache, { request })
  // Workload 2: 3 users x 10 updates, serialized per user, users in parallel (Mutex Wait at enqueue).
  for (let seq = 0; seq < 10; seq++) {
    for (const userId of [1, 2, 3]) {
      yield* publisher.enqueue(HandleUpdate, { userId, seq }, JobParameters.make().withMutex(`user:${userId}`, "Wait"))
    }
  }
  // Workload 3: 40 payment API calls, at most 5 at once (Semaphore Wait).
  for (let call = 0; call < 40; call++) yield* publisher.enqueue(CallPaymentApi, { call })
  yield* Console.log(`enqueued 82 jobs; 2 workers x 4 fibers running\n`)

  yield* Effect.scoped(
    Effect.gen(function* () {
      yield* Worker.make({ addons: [Concurrency.addon], concurrency: 4, pollInterval: "20 millis", workerId: "demo-worker-a" })
      yield* Worker.make({ addons: [Concurrency.addon], concurrency: 4, pollInterval: "20 millis", workerId: "demo-worker-b" })
      while (true) {
        const c = yield* store.countByState
        const running = [...live.entries()].filter(([, n]) => n > 0).map(([k, n]) => `${k}=${n}`).join(" ")
        yield* Console.log(
          `[${((Date.now() - t0) / 1000).toFixed(1)}s] enqueued ${c.Enqueued} processing ${c.Processing} succeeded ${c.Succeeded} deleted ${c.Deleted} failed ${c.Failed}  running: ${running || "-"}`
        )
        if (c.Enqueued + c.Scheduled + c.Processing === 0) break
        yield* Effect.sleep("250 millis")
      }
    })
  )

  // Summary per key, read back from the rows: the stamped concurrency policy and the audit trail.
  const page = yield* store.list({ limit: 10_000, offset: 0 })
  const perKey = new Map<string, { limit: number; mode: string; succeeded: number; skipped: number; requeued: number }>()
  for (const job of page.rows) {
    const meta = JobMetadata.decode(job.metadata)
    const policy = meta._tag === "Success" ? meta.success.policies.concurrency?.value : undefined
    if (policy === undefined) continue
    const detail = Option.getOrThrow(yield* store.get(job.id))
    const row = perKey.get(policy.key) ?? { limit: policy.limit, mode: policy.mode, succeeded: 0, skipped: 0, requeued: 0 }
    if (job.state === "Succeeded") row.succeeded++
    if (job.state === "Deleted") row.skipped++
    row.requeued += detail.logs.filter((l) => l.kind === "Requeued").length
    perKey.set(policy.key, row)
  }
  const counts = yield* store.countByState
  yield* Console.log(`\njobs by state: ${Object.entries(counts).map(([s, n]) => `${s} ${n}`).join(", ")}`)
  yield* Console.log(`\n${pad("key", 16)}${pad("mode", 6)}${pad("limit", 7)}${pad("max running", 13)}${pad("succeeded", 11)}${pad("skipped", 9)}requeued`)
  let ok = true
  for (const [key, r] of [...perKey.entries()].sort()) {
    const max = peak.get(key) ?? 0
    if (max > r.limit) ok = false
    yield* Console.log(`${pad(key, 16)}${pad(r.mode, 6)}${pad(r.limit, 7)}${pad(max, 13)}${pad(r.succeeded, 11)}${pad(r.skipped, 9)}${r.requeued}`)
  }
  yield* Console.log(`\n${ok ? "OK: no key ever ran more handlers than its limit" : "VIOLATION: a key exceeded its limit"} (${((Date.now() - t0) / 1000).toFixed(1)} s)`)
  if (!ok || counts.Failed > 0) return yield* Effect.fail(new Error("demo found a problem"))
  if (serveAfter) {
    yield* Console.log(`\nserving the dashboard at ${url}/jobs — Ctrl-C to stop`)
    return yield* Effect.never
  }
})

/** The dashboard on PORT (default 8080; any free port if that one is taken). Writes allowed: it listens on loopback only. */
const dashboard = Layer.catchTag(Dashboard.layer({ port: Number(process.env.PORT ?? 8080), authorize: Dashboard.allowWrites }), "ServeError", () =>
  Dashboard.layer({ port: 0, authorize: Dashboard.allowWrites })
)

const registry = Registry.layer({ handlers })

const memoryEnv = Layer.provideMerge(dashboard, Publisher.layer).pipe(
  Layer.provideMerge(registry),
  Layer.provideMerge(Concurrency.layerMemoryLimits),
  Layer.provideMerge(SemaphoreProviderMemory.layer),
  Layer.provideMerge(JobStoreMemory.layer)
)

const pgEnv = (url: string) =>
  Layer.provideMerge(dashboard, Publisher.layer).pipe(
    Layer.provideMerge(registry),
    Layer.provideMerge(Concurrency.layer),
    Layer.provideMerge(SemaphoreProviderPg.layer()),
    Layer.provideMerge(JobStorePg.layer),
    Layer.provideMerge(Database.layer(url, { maxConnections: 30 }))
  )

const main = useMemory
  ? program.pipe(Effect.provide(memoryEnv))
  : Effect.scoped(Effect.flatMap(database, (db) => program.pipe(Effect.provide(pgEnv(db.url)))))

// runMain interrupts the program on SIGINT / SIGTERM, so finalizers stop the workers, the dashboard
// and the embedded PostgreSQL server; it exits non-zero if the demo failed.
NodeRuntime.runMain(main)
