/**
 * Profiles the keyless path: drains `PROFILE_JOBS` (default 2,000) no-op keyless jobs with one
 * `Worker.make({ concurrency: 8, pollInterval: 100 ms })` on `JobStorePg`, with the concurrency addon
 * registered (as bench scenario 9), against a fresh database of `PROFILE_URL` (default
 * postgres://postgres@127.0.0.1:5432/test), and prints one JSON line: jobs/s, CPU ms per job of this
 * process, event-loop utilization, transactions and row writes per job (`pg_stat_database` /
 * `pg_stat_user_tables` deltas, also by table), and the statements the worker sent per job, by statement, with their
 * mean round-trip time (counted in this process on the wire of its connections: lib/wireStats.ts).
 *
 *   npx tsx profile-keyless.ts
 *
 *   PROFILE_CPU=/tmp/keyless.cpuprofile npx tsx profile-keyless.ts          # CPU profile of the drain window only
 *   npx tsx cpuprofile-summary.ts /tmp/keyless.cpuprofile
 *
 * Env: PROFILE_JOBS, PROFILE_URL, PROFILE_LANES (8), PROFILE_POLL_MS (100), PROFILE_ADDON (1; 0 = no addon),
 * PROFILE_CPU (write a V8 CPU profile of the drain window, worker start to last completion, there),
 * PROFILE_STORE=memory (the in-memory store and provider instead: the runtime's own cost per job, no SQL),
 * PROFILE_KEYS=n (keyed instead: job i takes `Semaphore("k" + i % n, PROFILE_LIMIT (1), Wait)`, the
 * round-robin keys of bench scenario 3), PROFILE_REUSE=1 (the worker's slot reuse on), PROFILE_TOTAL=n (with
 * PROFILE_KEYS: every key under one total cap of n, bench scenario 14's workload), PROFILE_HANDLER_MS (0: the
 * handlers' run time).
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"
import { performance } from "node:perf_hooks"
import * as Concurrency from "../src/internal/concurrency/ConcurrencyAddon.js"
import * as Contract from "../src/internal/job/Contract.js"
import * as Handler from "../src/internal/job/Handler.js"
import * as JobId from "../src/internal/job/JobId.js"
import * as Registry from "../src/internal/job/Registry.js"
import * as JobMetadata from "../src/internal/policy/JobMetadata.js"
import { JobParameters } from "../src/internal/publisher/JobParameters.js"
import * as Publisher from "../src/internal/publisher/Publisher.js"
import * as SemaphoreProviderMemory from "../src/internal/semaphore/SemaphoreProviderMemory.js"
import * as SemaphoreProviderPg from "../src/internal/semaphore/SemaphoreProviderPg.js"
import { JobStore } from "../src/internal/store/JobStore.js"
import * as JobStoreMemory from "../src/internal/store/JobStoreMemory.js"
import * as JobStorePg from "../src/internal/store/JobStorePg.js"
import * as Worker from "../src/internal/worker/Worker.js"
import { createDatabase, diffCounters, dropDatabase, readCounters, readTableWrites } from "./lib/server.js"
import { WireStats } from "./lib/wireStats.js"

const JOBS = Number(process.env.PROFILE_JOBS ?? 2000)
const SERVER = process.env.PROFILE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const LANES = Number(process.env.PROFILE_LANES ?? 8)
const POLL_MS = Number(process.env.PROFILE_POLL_MS ?? 100)
const ADDON = process.env.PROFILE_ADDON !== "0"
const CPU_PROFILE = process.env.PROFILE_CPU
const MEMORY = process.env.PROFILE_STORE === "memory" || process.env.PROFILE_STORE === "stub"
/** The memory store with claims and finalizing writes that do nothing: the attempt's own cost per job. */
const STUB = process.env.PROFILE_STORE === "stub"
const KEYS = Number(process.env.PROFILE_KEYS ?? 0)
const LIMIT = Number(process.env.PROFILE_LIMIT ?? 1)
const REUSE = process.env.PROFILE_REUSE === "1" ? { slotReuse: {} } : {}
const TOTAL = process.env.PROFILE_TOTAL === undefined ? undefined : { total: { group: "all", limit: Number(process.env.PROFILE_TOTAL) } }
const HANDLER_MS = Number(process.env.PROFILE_HANDLER_MS ?? 0)

// --- statement counting: on the wire of the worker's connections (lib/wireStats.ts) ---
/** A statement's class: its first words, whitespace collapsed, literal numbers out. */
const classOf = (text: string): string => {
  const t = text.replace(/\s+/g, " ").trim()
  if (t.includes("SET state = 'Processing'") && t.includes("UPDATE warp_jobs SET state = $1, metadata")) return "finalize (finalize.ts) + fused release + next claim"
  if (t.includes("SET state = 'Processing'")) return "claim (fetch.ts)"
  if (t.includes("pg_try_advisory_lock")) return `slot scan: ${t.slice(0, 60)}`
  if (t.includes("UPDATE warp_jobs SET state = $1, metadata")) return `finalize (finalize.ts)${t.includes("released") ? " + fused release" : ""}`
  return t.slice(0, 70)
}
const wire = new WireStats(classOf)

// --- the workload ---
const NoOp = Contract.job("ProfileJob", Schema.Struct({ i: Schema.Number }))
let completed = 0
const handler = Handler.job(NoOp, () =>
  HANDLER_MS > 0 ? Effect.andThen(Effect.sleep(HANDLER_MS), Effect.sync(() => void completed++)) : Effect.sync(() => void completed++)
)

const memoryEnv = Publisher.layer.pipe(
  Layer.provideMerge(Registry.layer({ handlers: [handler] })),
  Layer.provideMerge(Concurrency.layerMemoryLimits),
  Layer.provideMerge(SemaphoreProviderMemory.layer),
  Layer.provideMerge(JobStoreMemory.layer)
)

const env = (url: string, maxConnections: number) =>
  MEMORY ? memoryEnv : Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers: [handler] })),
    Layer.provideMerge(Concurrency.layer),
    Layer.provideMerge(SemaphoreProviderPg.layer({})),
    Layer.provideMerge(JobStorePg.layer),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections, idleTimeout: "30 seconds", stream: wire.stream(url) }))
  )

const insertBacklog = Effect.gen(function* () {
  const store = yield* JobStore
  const now = new Date()
  const plain = JobMetadata.encode(Publisher.publishMetadata(NoOp, JobParameters.make(), now))
  const keyed = (i: number) =>
    JobMetadata.encode(Publisher.publishMetadata(NoOp, JobParameters.make().withSemaphore(`k${i % KEYS}`, LIMIT, "Wait", TOTAL), now))
  for (let start = 0; start < JOBS; start += 2000) {
    const rows = []
    for (let i = start; i < Math.min(JOBS, start + 2000); i++) {
      rows.push({ id: JobId.make(), type: NoOp.name, handler: null, payload: { i }, state: "Enqueued" as const, scheduleTime: now, metadata: KEYS > 0 ? keyed(i) : plain })
    }
    yield* store.insert(rows)
  }
})

/** The memory store's run: the worker and the backlog in one environment (one store). */
const mainMemory = async () => {
  const cpu = await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        yield* insertBacklog
        const memory = yield* JobStore
        // stub: every row claimed once up front; the worker's claims hand them out, its finalizes do nothing
        const claimed = STUB ? [...(yield* Effect.orDie(memory.fetch("stub", JOBS, Duration.hours(1))))] : []
        const store = STUB
          ? {
              ...memory,
              fetch: (_w: string, n: number) => Effect.sync(() => claimed.splice(0, n)),
              finalize: () => Effect.succeed(true)
            }
          : memory
        const t0 = performance.now()
        const cpu0 = process.cpuUsage()
        const session = new Session()
        if (CPU_PROFILE !== undefined) {
          session.connect()
          yield* Effect.promise(() => session.post("Profiler.enable"))
          yield* Effect.promise(() => session.post("Profiler.start"))
        }
        yield* Effect.provideService(Worker.make({ addons: ADDON ? [Concurrency.addon] : [], concurrency: LANES, pollInterval: POLL_MS, ...REUSE }), JobStore, store)
        while (completed < JOBS && performance.now() - t0 < 120_000) yield* Effect.sleep(10)
        const elapsedMs = performance.now() - t0
        const used = process.cpuUsage(cpu0)
        if (CPU_PROFILE !== undefined) {
          const { profile } = yield* Effect.promise(() => session.post("Profiler.stop"))
          writeFileSync(CPU_PROFILE, JSON.stringify(profile))
          session.disconnect()
        }
        return { elapsedMs, cpuMs: (used.user + used.system) / 1000 }
      })
    ).pipe(Effect.provide(memoryEnv))
  )
  console.log(
    JSON.stringify({
      store: STUB ? "stub" : "memory",
      jobs: completed,
      lanes: LANES,
      addon: ADDON,
      elapsedMs: Math.round(cpu.elapsedMs),
      jobsPerSec: Math.round((completed / cpu.elapsedMs) * 1000),
      cpuMsPerJob: Number((cpu.cpuMs / Math.max(1, completed)).toFixed(3))
    })
  )
}

const main = async () => {
  if (MEMORY) return mainMemory()
  const url = await createDatabase(SERVER)
  try {
    await Effect.runPromise(insertBacklog.pipe(Effect.provide(env(url, 4))))
    const before = await readCounters(url)
    const tablesBefore = await readTableWrites(url)
    let elapsedMs = 0
    let cpuMs = 0
    let elu = 0
    const session = new Session()
    if (CPU_PROFILE !== undefined) {
      session.connect()
      await session.post("Profiler.enable")
      await session.post("Profiler.start")
    }
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const t0 = performance.now()
          const cpu0 = process.cpuUsage()
          const elu0 = performance.eventLoopUtilization()
          wire.counting = true
          yield* Worker.make({ addons: ADDON ? [Concurrency.addon] : [], concurrency: LANES, pollInterval: POLL_MS, ...REUSE })
          // waits on the completion count with a coarse timer (a 2 ms poll costs CPU of its own)
          while (completed < JOBS && performance.now() - t0 < 120_000) yield* Effect.sleep(10)
          elapsedMs = performance.now() - t0
          const cpu = process.cpuUsage(cpu0)
          cpuMs = (cpu.user + cpu.system) / 1000
          elu = performance.eventLoopUtilization(elu0).utilization
          wire.counting = false
        })
      ).pipe(Effect.provide(env(url, LANES * 2 + 4)))
    )
    if (CPU_PROFILE !== undefined) {
      const { profile } = await session.post("Profiler.stop")
      writeFileSync(CPU_PROFILE, JSON.stringify(profile))
      session.disconnect()
    }
    const after = await readCounters(url)
    const db = diffCounters(before, after)
    const tablesAfter = await readTableWrites(url)
    const perJob = (x: number) => Number((x / Math.max(1, completed)).toFixed(3))
    const statements = [...wire.stats].sort(([, a], [, b]) => b.n - a.n)
    const total = statements.reduce((s, [, v]) => s + v.n, 0)
    console.log(
      JSON.stringify({
        jobs: completed,
        lanes: LANES,
        addon: ADDON,
        elapsedMs: Math.round(elapsedMs),
        jobsPerSec: Math.round((completed / elapsedMs) * 1000),
        cpuMsPerJob: Number((cpuMs / Math.max(1, completed)).toFixed(3)),
        eventLoopUtilization: Number(elu.toFixed(3)),
        xactPerJob: perJob(db.xactCommit),
        insUpdPerJob: perJob(db.tupIns + db.tupUpd),
        delPerJob: perJob(db.tupDel),
        // row writes per job, by table (inserts + updates, deletes)
        writesByTable: Object.fromEntries(
          Object.entries(tablesAfter)
            .map(([t, a]) => {
              const b = tablesBefore[t] ?? { ins: 0, upd: 0, del: 0 }
              return [t, { insUpd: perJob(a.ins - b.ins + a.upd - b.upd), del: perJob(a.del - b.del) }] as const
            })
            .filter(([, w]) => w.insUpd > 0 || w.del > 0)
        ),
        statementsPerJob: perJob(total),
        statements: Object.fromEntries(
          statements.map(([k, v]) => [
            k,
            { perJob: perJob(v.n), n: v.n, rowsPerCall: Number((v.rows / Math.max(1, v.n)).toFixed(2)), empty: v.empty, ...(v.errors > 0 ? { errors: v.errors } : {}), meanMs: Number((v.ms / Math.max(1, v.n)).toFixed(2)) }
          ])
        )
      })
    )
  } finally {
    await dropDatabase(SERVER, url)
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
