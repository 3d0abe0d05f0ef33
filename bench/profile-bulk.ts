/**
 * Profiles one bulk enqueue: `PROFILE_CALLS` (default 8) calls of `Publisher.enqueueMany` of
 * `PROFILE_BATCH` (default 3,000) jobs, each into a fresh database of `PROFILE_URL` (default
 * postgres://postgres@127.0.0.1:5432/test), in one process; prints each call's wall time, the
 * process CPU it took and how it splits between checking the payloads (`PayloadCodec.encode`, timed
 * apart on the same payloads) and the rest (building the rows, the statement, the round trip).
 * The first call is the cold one (JIT); the median of the others is the warm figure.
 * `PROFILE_MODE=single`: the same jobs as single `enqueue` calls from `PROFILE_PRODUCERS` (8) fibers.
 *
 *   npx tsx profile-bulk.ts
 *   PROFILE_CPU=/tmp/bulk.cpuprofile npx tsx profile-bulk.ts     # CPU profile of the warm calls
 *   npx tsx cpuprofile-summary.ts /tmp/bulk.cpuprofile
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"
import { performance } from "node:perf_hooks"
import * as Concurrency from "../src/internal/concurrency/ConcurrencyAddon.js"
import * as Contract from "../src/internal/job/Contract.js"
import * as PayloadCodec from "../src/internal/job/PayloadCodec.js"
import * as Registry from "../src/internal/job/Registry.js"
import * as Publisher from "../src/internal/publisher/Publisher.js"
import * as SemaphoreProviderPg from "../src/internal/semaphore/SemaphoreProviderPg.js"
import * as JobStorePg from "../src/internal/store/JobStorePg.js"
import { createDatabase, dropDatabase } from "./lib/server.js"
import { median } from "./lib/stats.js"

const CALLS = Number(process.env.PROFILE_CALLS ?? 8)
const BATCH = Number(process.env.PROFILE_BATCH ?? 3000)
const SERVER = process.env.PROFILE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const CPU_PROFILE = process.env.PROFILE_CPU
/** `single`: the batch as single `enqueue` calls from `PROFILE_PRODUCERS` (8) fibers instead of one `enqueueMany`. */
const SINGLE = process.env.PROFILE_MODE === "single"
const PRODUCERS = Number(process.env.PROFILE_PRODUCERS ?? 8)

// the bench's producer contract (bench/systems/warp.ts)
const BenchJob = Contract.job("BenchJob", Schema.Struct({ i: Schema.Number, key: Schema.optional(Schema.String) }))

const env = (url: string) =>
  Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers: [] })),
    Layer.provideMerge(Concurrency.layer),
    Layer.provideMerge(SemaphoreProviderPg.layer({})),
    Layer.provideMerge(JobStorePg.layer),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: PRODUCERS + 2, idleTimeout: "30 seconds" }))
  )

interface Call {
  readonly wallMs: number
  readonly cpuMs: number
  readonly checkMs: number
}

const main = async () => {
  const calls: Array<Call> = []
  const session = new Session()
  for (let c = 0; c < CALLS; c++) {
    const url = await createDatabase(SERVER)
    try {
      const payloads = Array.from({ length: BATCH }, (_, i) => ({ i: c * BATCH + i }))
      const profiling = CPU_PROFILE !== undefined && c === 1
      await Effect.runPromise(
        Effect.gen(function* () {
          const publisher = yield* Publisher.Publisher
          if (profiling) {
            session.connect()
            yield* Effect.promise(() => session.post("Profiler.enable"))
            yield* Effect.promise(() => session.post("Profiler.start"))
          }
          const cpu0 = process.cpuUsage()
          const t0 = performance.now()
          const ids = SINGLE
            ? (yield* Effect.forEach(
                Array.from({ length: PRODUCERS }, (_, p) => payloads.filter((_, i) => i % PRODUCERS === p)),
                (mine) => Effect.forEach(mine, (payload) => publisher.enqueue(BenchJob, payload)),
                { concurrency: "unbounded" }
              )).flat()
            : yield* publisher.enqueueMany(BenchJob, payloads)
          const wallMs = performance.now() - t0
          const cpu = process.cpuUsage(cpu0)
          if (ids.length !== BATCH) throw new Error(`${ids.length} ids for ${BATCH} jobs`)
          // the payload check alone, on payloads of the same shape (after the call: warm like it)
          const again = Array.from({ length: BATCH }, (_, i) => ({ i: -i }))
          const t1 = performance.now()
          for (const p of again) if (Result.isFailure(PayloadCodec.encode("Publisher.enqueueMany", BenchJob, p))) throw new Error("invalid")
          const checkMs = performance.now() - t1
          calls.push({ wallMs, cpuMs: (cpu.user + cpu.system) / 1000, checkMs })
          console.error(`call ${c + 1}: ${wallMs.toFixed(1)} ms wall, ${((cpu.user + cpu.system) / 1000).toFixed(1)} ms CPU; payload check alone ${checkMs.toFixed(1)} ms`)
        }).pipe(Effect.provide(env(url)))
      )
    } finally {
      await dropDatabase(SERVER, url)
    }
  }
  if (CPU_PROFILE !== undefined && calls.length > 1) {
    // the profile covers the second call (the first warm one) through the end of the run
    const { profile } = await session.post("Profiler.stop")
    writeFileSync(CPU_PROFILE, JSON.stringify(profile))
  }
  const warm = calls.slice(1)
  console.log(
    JSON.stringify({
      batch: BATCH,
      calls: CALLS,
      coldMs: Number(calls[0]!.wallMs.toFixed(1)),
      warmMs: Number(median(warm.map((x) => x.wallMs)).toFixed(1)),
      warmCpuMs: Number(median(warm.map((x) => x.cpuMs)).toFixed(1)),
      warmCheckMs: Number(median(warm.map((x) => x.checkMs)).toFixed(1)),
      warmJobsPerSec: Math.round(BATCH / (median(warm.map((x) => x.wallMs)) / 1000))
    })
  )
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
