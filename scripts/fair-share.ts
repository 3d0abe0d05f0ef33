/**
 * Weighted fair share on PostgreSQL (issue 17, item 2): the skewed workload — one key with 10^4 queued
 * jobs, enqueued first, and 100 keys with 10 each; every key `Semaphore(key, 10, "Wait")`, one worker of
 * 8 lanes, no-op handlers (`HANDLER_MS` for a sleep) — run without weights (ScheduleTime order, today)
 * and with weight 1 on every key (fair share); `TOTAL=n` adds a total cap of n over every key (group
 * "all"), so that the keys compete for the cap rather than for the lanes. Prints, per run:
 *
 * - the insert cost: time to enqueue the 11,000 jobs (two `enqueueMany` calls), and to enqueue 1,000
 *   more one at a time (the single-row insert, tagged in its statement too);
 * - the claim cost: mean time of one `fetch` of 8 rows and its finalize, 300 in a row, by one fiber;
 * - Jain's fairness index of per-key throughput over the window while every key is backlogged (from
 *   the worker's start to the completion of the first key to drain);
 * - the cold keys' p50 / p99 wait (handler start minus worker start: every job was queued before the
 *   worker started), in ms and in positions (jobs started before it), beside the bound in positions
 *   (see test/properties/fairShare.test.ts): the i-th job of a cold key, tagged at V + i, starts after at
 *   most its key's i - 1 earlier jobs, plus, for every other key f, min(jobs of f, floor(i * w_f / w) + 1)
 *   = min(jobs of f, i + 1), plus L = lanes x batch (rows claimed but not started by the other lanes);
 *   and the jobs whose start position exceeded their own bound;
 * - throughput (jobs/s over the drain).
 *
 *   npx tsx scripts/fair-share.ts        (or: npm run fair-share; ROUNDS=2: the pair twice, in both orders)
 *
 * Creates and drops databases `warp_fair_bench_*` on the server of DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/test).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { pgEnv, withDatabase as withFreshDatabase } from "./support/server.js"
import {
  Concurrency,
  Contract,
  Handler,
  Job,
  JobParameters,
  Publisher,
  Worker
} from "../src/index.js"
import { JobStore } from "../src/internal/store/JobStore.js"

const HOT = Number(process.env.HOT ?? 10_000)
const COLD_KEYS = Number(process.env.COLD_KEYS ?? 100)
const COLD = Number(process.env.COLD ?? 10)
const LANES = Number(process.env.LANES ?? 8)
const BATCH = 8
const LIMIT = Number(process.env.LIMIT ?? 10)
const HANDLER_MS = Number(process.env.HANDLER_MS ?? 0)
/** A total cap over every key (group "all"), so that the keys compete for it rather than for the lanes. */
const TOTAL = process.env.TOTAL === undefined ? undefined : Number(process.env.TOTAL)

const Item = Contract.job("FairShareBench", Schema.Struct({ key: Schema.String, i: Schema.Number }))


/** A fresh database for `f`, dropped after. */
const withDatabase = <A>(f: (url: string) => Promise<A>): Promise<A> => withFreshDatabase("warp_fair_bench", f)

const jain = (xs: ReadonlyArray<number>) => {
  const s = xs.reduce((a, b) => a + b, 0)
  const q = xs.reduce((a, b) => a + b * b, 0)
  return q === 0 ? 1 : (s * s) / (xs.length * q)
}
const pct = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!
}

interface Start {
  readonly key: string
  readonly i: number
  readonly at: number
}

const env = pgEnv

const paramsOf = (weighted: boolean) => (key: string) =>
  JobParameters.make().withSemaphore(key, LIMIT, "Wait", {
    ...(weighted ? { weight: 1 } : {}),
    ...(TOTAL === undefined ? {} : { total: { group: "all", limit: TOTAL } })
  })

/** Enqueues the workload: the hot key first, then the cold keys (interleaved); ms taken. */
const enqueueAll = (weighted: boolean) =>
  Effect.gen(function* () {
    const p = yield* Publisher.Publisher
    const params = paramsOf(weighted)
    const start = performance.now()
    yield* p.enqueueMany(Item, Array.from({ length: HOT }, (_, i) => ({ key: "hot", i })), params("hot"))
    yield* p.enqueueMany(Item, Array.from({ length: COLD_KEYS * COLD }, (_, n) => ({ key: `cold-${n % COLD_KEYS}`, i: Math.floor(n / COLD) })), (item) => params(item.key))
    return performance.now() - start
  })

const costs = (weighted: boolean) =>
  withDatabase((url) =>
    Effect.runPromise(
      Effect.gen(function* () {
        const enqueueMs = yield* enqueueAll(weighted)
        const p = yield* Publisher.Publisher
        const params = paramsOf(weighted)
        const s1 = performance.now()
        for (let n = 0; n < 1000; n++) yield* p.enqueue(Item, { key: `single-${n % 50}`, i: n }, params(`single-${n % 50}`))
        const singleMs = performance.now() - s1
        const store = yield* JobStore
        const s2 = performance.now()
        const rounds = 300
        for (let n = 0; n < rounds; n++) {
          const got = yield* store.fetch("bench", BATCH, Duration.seconds(30))
          for (const job of got) yield* store.finalize({ job, workerId: "bench", outcome: Job.Outcome.Succeeded(), metadata: job.metadata })
        }
        const claimMs = (performance.now() - s2) / rounds
        return { enqueueMs, singleMs, claimMs }
      }).pipe(Effect.provide(env(url, [])), Effect.scoped)
    )
  )

const serve = (weighted: boolean) =>
  withDatabase((url) => {
    const starts: Array<Start> = []
    const done: Array<string> = []
    let t0 = 0
    const handler = Handler.job(Item, ({ i, key }) =>
      Effect.gen(function* () {
        starts.push({ key, i, at: performance.now() - t0 })
        if (HANDLER_MS > 0) yield* Effect.sleep(HANDLER_MS)
        done.push(key)
      })
    )
    return Effect.runPromise(
      Effect.gen(function* () {
        yield* enqueueAll(weighted)
        const store = yield* JobStore
        t0 = performance.now()
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* Worker.make({ addons: [Concurrency.addon], workerId: `bench-${weighted}`, concurrency: LANES, pollInterval: "5 millis", maxBatch: BATCH })
            while (true) {
              const c = yield* store.countByState
              if (c.Enqueued + c.Scheduled + c.Processing === 0) break
              yield* Effect.sleep("20 millis")
            }
          })
        )
        const drainMs = (performance.now() - t0)
        return { starts, done, drainMs }
      }).pipe(Effect.provide(env(url, [handler])), Effect.scoped)
    )
  })

const report = async (weighted: boolean) => {
  const label = weighted ? "weighted (weight 1 on every key)" : "unweighted (ScheduleTime order)"
  const c = await costs(weighted)
  const { done, drainMs, starts } = await serve(weighted)
  const totals = new Map<string, number>([["hot", HOT], ...Array.from({ length: COLD_KEYS }, (_, k) => [`cold-${k}`, COLD] as const)])
  const counts = new Map<string, number>([...totals.keys()].map((k) => [k, 0]))
  for (const key of done) {
    const n = counts.get(key)! + 1
    counts.set(key, n)
    if (n === totals.get(key)) break
  }
  const windowJobs = [...counts.values()].reduce((a, b) => a + b, 0)
  const cold = starts.map((s, position) => ({ ...s, position })).filter((s) => s.key !== "hot")
  // the bound of the i-th job (1-based) of a cold key, in jobs started before it: its own key's i - 1,
  // every other key f at most min(jobs of f, i + 1), and L
  // (with a total cap: L is the lanes' batches all the same; requeues for the full group keep their tag)
  const L = LANES * BATCH
  const boundOf = (i: number) => i - 1 + Math.min(HOT, i + 1) + (COLD_KEYS - 1) * Math.min(COLD, i + 1) + L
  const over = cold.filter((s) => s.position > boundOf(s.i + 1)).length
  const rate = (HOT + COLD_KEYS * COLD) / (drainMs / 1000)
  const worst = boundOf(COLD)
  console.log(`\n== ${label}${TOTAL === undefined ? "" : `, total cap ${TOTAL} over every key`}`)
  console.log(`enqueue ${HOT + COLD_KEYS * COLD} jobs (2 enqueueMany): ${c.enqueueMs.toFixed(0)} ms; 1,000 single enqueues: ${c.singleMs.toFixed(0)} ms (${(c.singleMs / 1000).toFixed(2)} ms each)`)
  console.log(`claim (fetch of ${BATCH} + finalizes, one fiber, 300 in a row): ${c.claimMs.toFixed(2)} ms each`)
  console.log(`Jain's index of per-key throughput while all ${totals.size} keys are backlogged: ${jain([...counts.values()]).toFixed(4)} (window: ${windowJobs} jobs)`)
  console.log(
    `cold wait: p50 ${pct(cold.map((s) => s.at), 50).toFixed(0)} ms / ${pct(cold.map((s) => s.position), 50)} positions, p99 ${pct(cold.map((s) => s.at), 99).toFixed(0)} ms / ${pct(cold.map((s) => s.position), 99)} positions`
  )
  console.log(
    `bound (a cold key's last job, i = ${COLD}): ${worst} positions = ${COLD - 1} + ${Math.min(HOT, COLD + 1)} + ${COLD_KEYS - 1} x ${Math.min(COLD, COLD + 1)} + L ${L}; ${(worst / rate * 1000).toFixed(0)} ms at the measured rate; cold jobs over their own bound: ${over} of ${cold.length}`
  )
  console.log(`throughput: ${rate.toFixed(0)} jobs/s (drained in ${(drainMs / 1000).toFixed(1)} s)`)
}

/** A throwaway enqueue and a few claims, so that the first measured run does not pay the warm-up. */
const warmUp = () =>
  withDatabase((url) =>
    Effect.runPromise(
      Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        yield* p.enqueueMany(Item, Array.from({ length: 2000 }, (_, i) => ({ key: `w${i % 20}`, i })), (item) => paramsOf(i0++ % 2 === 0)(item.key))
        const store = yield* JobStore
        for (let n = 0; n < 50; n++) {
          const got = yield* store.fetch("warm", BATCH, Duration.seconds(30))
          for (const job of got) yield* store.finalize({ job, workerId: "warm", outcome: Job.Outcome.Succeeded(), metadata: job.metadata })
        }
      }).pipe(Effect.provide(env(url, [])), Effect.scoped)
    )
  )
let i0 = 0

await warmUp()
// ROUNDS=2 runs the pair twice, in both orders (the machine's load drifts between runs)
const rounds = Number(process.env.ROUNDS ?? 1)
for (let r = 0; r < rounds; r++) {
  for (const weighted of r % 2 === 0 ? [false, true] : [true, false]) await report(weighted)
}
