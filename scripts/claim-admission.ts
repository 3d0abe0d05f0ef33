/**
 * Admission in the claim (issue 40): what a lane pays for keyed jobs it claims but cannot run.
 *
 * - Total cap: `JOBS` (2,000) jobs over 40 keys, `Semaphore(key, 2)` Wait with `total: { group, limit: 4 }`,
 *   5 ms handlers, one worker of 8 lanes; against the same jobs keyless on a worker of 4 lanes (the way
 *   one caps at 4 on one machine). Alternating, `ROUNDS` (3) rounds, medians. Reports jobs/s, the
 *   gate's requeues per job (audit entries `Requeued — ...`), and the group's max holders (live
 *   handlers counted at every start).
 * - Many keys: `MANY_JOBS` (3,000) jobs over 300 keys at limit 1 (Wait), one worker of 8 lanes,
 *   `MANY_HANDLER_MS` (0) ms handlers; reports jobs/s and requeues per keyed job, and the max holders
 *   of one key.
 * - `REQUEUE=false`: the keyed jobs are declared `{ requeue: false }` (opt-in, see
 *   docs/claim-admission.md), where the code has it. `CAP=n`: the total cap (default 4; a cap that is
 *   never full measures what the group's slot itself costs); `NO_TOTAL=1`: no total cap at all.
 *
 *   npx tsx scripts/claim-admission.ts    (or: npm run claim-admission)
 *
 * Creates and drops databases `warp_claim_bench_*` on the server of DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/test).
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import pg from "pg"
import { pgEnv, withDatabase as withFreshDatabase } from "./support/server.js"
import { Concurrency, Contract, Handler, JobParameters, Publisher, Worker } from "../src/index.js"
import { JobStore } from "../src/internal/store/JobStore.js"

const JOBS = Number(process.env.JOBS ?? 2000)
const KEYS = 40
const HANDLER_MS = Number(process.env.HANDLER_MS ?? 5)
const ROUNDS = Number(process.env.ROUNDS ?? 3)
const MANY_JOBS = Number(process.env.MANY_JOBS ?? 3000)
const MANY_KEYS = 300
const MANY_HANDLER_MS = Number(process.env.MANY_HANDLER_MS ?? 0)
const POLL_MS = Number(process.env.POLL_MS ?? 100)
const NO_REQUEUE = process.env.REQUEUE === "false"
/** `ONLY=capped,keyless`: some scenarios only. */
const ONLY = process.env.ONLY?.split(",")

const Item = Contract.job("ClaimAdmissionBench", Schema.Struct({ key: Schema.String, i: Schema.Number }))

// PLAN=custom|generic: the database's plan_cache_mode (the slot connections' statements are prepared);
// LOG_STATEMENTS=1: the server logs every statement on this database (count round trips per job in its log)
const withDatabase = <A>(f: (url: string) => Promise<A>): Promise<A> =>
  withFreshDatabase("warp_claim_bench", f, [
    ...(process.env.PLAN === undefined ? [] : [`ALTER DATABASE {db} SET plan_cache_mode = force_${process.env.PLAN}_plan`]),
    ...(process.env.LOG_STATEMENTS === "1" ? ["ALTER DATABASE {db} SET log_min_duration_statement = 0"] : [])
  ])

const env = pgEnv

/** The gate's requeues (audit entries of a full key or group), read after the run. */
const requeuesOf = async (url: string): Promise<number> => {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    const r = await c.query(`SELECT count(*)::int AS n FROM warp_job_logs WHERE kind = 'Requeued' AND message LIKE 'Requeued — %full%'`)
    return Number(r.rows[0].n)
  } finally {
    await c.end()
  }
}

interface Scenario {
  readonly label: string
  readonly jobs: number
  readonly lanes: number
  readonly handlerMs: number
  /** The key of job i (undefined: keyless). */
  readonly keyOf: (i: number) => string | undefined
  readonly params: (key: string) => JobParameters.JobParameters
}

interface Run {
  readonly rate: number
  readonly requeuesPerJob: number
  /** Max live handlers at once (all jobs: the group's holders when every key is in one group). */
  readonly maxLive: number
  /** Max live handlers of one key. */
  readonly maxPerKey: number
}

const run = (s: Scenario): Promise<Run> =>
  withDatabase(async (url) => {
    let live = 0
    let maxLive = 0
    let maxPerKey = 0
    let completed = 0
    const perKey = new Map<string, number>()
    const handler = Handler.job(Item, ({ key }) =>
      Effect.gen(function* () {
        live++
        maxLive = Math.max(maxLive, live)
        const k = (perKey.get(key) ?? 0) + 1
        perKey.set(key, k)
        maxPerKey = Math.max(maxPerKey, k)
        yield* Effect.sleep(s.handlerMs).pipe(Effect.ensuring(Effect.sync(() => {
          live--
          perKey.set(key, perKey.get(key)! - 1)
          completed++
        })))
      })
    )
    const elapsedMs = await Effect.runPromise(
      Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const items = Array.from({ length: s.jobs }, (_, i) => ({ key: s.keyOf(i) ?? "none", i }))
        for (let at = 0; at < items.length; at += 500) {
          const chunk = items.slice(at, at + 500)
          if (s.keyOf(0) === undefined) yield* p.enqueueMany(Item, chunk)
          else yield* p.enqueueMany(Item, chunk, (item) => s.params(item.key))
        }
        const store = yield* JobStore
        const t0 = performance.now()
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* Worker.make({ addons: [Concurrency.addon], workerId: "bench", concurrency: s.lanes, pollInterval: `${POLL_MS} millis` })
            while (completed < s.jobs) yield* Effect.sleep("5 millis")
          })
        )
        const ms = performance.now() - t0
        const c = yield* store.countByState
        if (c.Succeeded !== s.jobs) throw new Error(`${s.label}: ${c.Succeeded} succeeded of ${s.jobs}`)
        return ms
      }).pipe(Effect.provide(env(url, [handler])), Effect.scoped)
    )
    const requeues = await requeuesOf(url)
    return { rate: s.jobs / (elapsedMs / 1000), requeuesPerJob: requeues / s.jobs, maxLive, maxPerKey }
  })

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

const keyedOptions = (total?: { group: string; limit: number }) => ({
  ...(total === undefined ? {} : { total }),
  ...(NO_REQUEUE ? { requeue: false } : {})
})

const capped: Scenario = {
  label: `total cap 4 over ${KEYS} keys, Semaphore(key, 2) Wait, 8 lanes`,
  jobs: JOBS,
  lanes: 8,
  handlerMs: HANDLER_MS,
  keyOf: (i) => `k${i % KEYS}`,
  params: (key) => JobParameters.make().withSemaphore(key, 2, "Wait", keyedOptions(process.env.NO_TOTAL === "1" ? undefined : { group: "all", limit: Number(process.env.CAP ?? 4) }) as any)
}
const keyless: Scenario = { label: "keyless, 4 lanes", jobs: JOBS, lanes: 4, handlerMs: HANDLER_MS, keyOf: () => undefined, params: () => JobParameters.make() }
let seed = 42
const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31)
const manyKeyOf = Array.from({ length: MANY_JOBS }, () => `m${Math.floor(random() * MANY_KEYS)}`)
const many: Scenario = {
  label: `${MANY_KEYS} keys at limit 1 (Wait), 8 lanes, ${MANY_HANDLER_MS} ms handlers`,
  jobs: MANY_JOBS,
  lanes: 8,
  handlerMs: MANY_HANDLER_MS,
  keyOf: (i) => manyKeyOf[i],
  params: (key) => JobParameters.make().withSemaphore(key, 1, "Wait", keyedOptions() as any)
}

const fmt = (r: Run) => `${r.rate.toFixed(0)} jobs/s, requeues/job ${r.requeuesPerJob.toFixed(3)}, max live ${r.maxLive}, max per key ${r.maxPerKey}`

// warm-up (not counted)
await run({ ...keyless, jobs: 300 })
const results: Record<string, Array<Run>> = { capped: [], keyless: [], many: [] }
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 === 0 ? (["capped", "keyless", "many"] as const) : (["many", "keyless", "capped"] as const)
  for (const name of order) {
    if (ONLY !== undefined && !ONLY.includes(name)) continue
    const s = name === "capped" ? capped : name === "keyless" ? keyless : many
    const res = await run(s)
    results[name]!.push(res)
    console.log(`round ${r + 1} ${s.label}: ${fmt(res)}`)
  }
}
const med = (name: string) => {
  const rs = results[name]!.length > 0 ? results[name]! : [{ rate: 0, requeuesPerJob: 0, maxLive: 0, maxPerKey: 0 }]
  return { rate: median(rs.map((x) => x.rate)), requeuesPerJob: median(rs.map((x) => x.requeuesPerJob)), maxLive: Math.max(...rs.map((x) => x.maxLive)), maxPerKey: Math.max(...rs.map((x) => x.maxPerKey)) }
}
const c = med("capped")
const k = med("keyless")
const m = med("many")
console.log(`\nmedians of ${ROUNDS} rounds (poll ${POLL_MS} ms${NO_REQUEUE ? ", requeue: false" : ""}):`)
console.log(`  ${capped.label}: ${fmt(c)} (group max ${c.maxLive}, cap 4)`)
console.log(`  ${keyless.label}: ${fmt(k)}`)
console.log(`  ratio capped / keyless: ${(c.rate / k.rate).toFixed(2)}×`)
console.log(`  ${many.label}: ${fmt(m)}`)
