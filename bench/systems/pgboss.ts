/**
 * pg-boss. Per-key cap in Wait semantics = `group: { id: key }` on each job and
 * `groupConcurrency: N` on the worker (pg-boss's own global per-group limit, tracked in the
 * database). Dedupe (Skip) = a queue with policy `exclusive` and `singletonKey: key` on each send
 * (a send is refused while a job of the key is queued or active).
 */
import { PgBoss } from "pg-boss"
import { diffCounters, readCounters, withClient } from "../lib/server.js"
import { cpuWindow, databaseOf, serverCpu } from "../lib/serverCpu.js"
import {
  type BacklogResult,
  type BacklogSpec,
  type ClaimBlock,
  type ClaimRig,
  type ClaimSpec,
  ClaimTimer,
  type DedupeResult,
  type DedupeSpec,
  type HandoffSpec,
  Holders,
  measureHandoffs,
  measurePickups,
  measurePriority,
  type PickupResult,
  type PickupSpec,
  PriorityProbe,
  type PriorityResult,
  type PrioritySpec,
  Signals,
  type ProducerResult,
  type ProducerSpec,
  shares,
  sleep,
  waitUntil
} from "./common.js"

export const name = "pg-boss"

const QUEUE = "bench"

/**
 * Tuned for throughput: the shortest poll pg-boss accepts (0.5 s), and burst mode (fetch again at once
 * while the previous fetch returned a job and the cached ready count is positive), with the stats
 * that burst mode reads refreshed every second.
 */
const boss = (url: string, max: number, refreshEverySecond = true) => {
  const b = new PgBoss({
    connectionString: url,
    max,
    schedule: false,
    ...(refreshEverySecond ? { superviseIntervalSeconds: 1, monitorIntervalSeconds: 1, queueCacheIntervalSeconds: 1 } : {})
  })
  b.on("error", (e: unknown) => console.error("pg-boss error:", (e as Error)?.message ?? e))
  return b
}

const workOptions = (spec: { workers: number; pollMs: number }) => ({
  localConcurrency: spec.workers,
  batchSize: 1,
  pollingIntervalSeconds: Math.max(0.5, spec.pollMs / 1000),
  burstWhenReadyExceeds: 1
})

export const backlog = async (url: string, spec: BacklogSpec): Promise<BacklogResult> => {
  const server = await serverCpu(url)
  const inserting = cpuWindow(server)
  const setup = boss(url, 4)
  await setup.start()
  await setup.createQueue(QUEUE)
  for (let start = 0; start < spec.jobs; start += 2000) {
    const jobs = []
    for (let i = start; i < Math.min(spec.jobs, start + 2000); i++) {
      const key = spec.keyOf(i)
      jobs.push({ data: { i, key }, ...(key === undefined ? {} : { group: { id: key } }) })
    }
    await setup.insert(QUEUE, jobs)
  }
  await setup.stop({ graceful: true, close: true })
  const serverCpuInsertMs = inserting.end().serverCpuMs
  const before = await readCounters(url)
  const holders = new Holders()
  const t0 = performance.now()
  // CPU time of this (the worker's) process and of the server over the window, as systems/warp.ts measures them
  const window = cpuWindow(server, databaseOf(url))
  const b = boss(url, spec.workers + 4)
  await b.start()
  await b.work(QUEUE, { ...workOptions(spec), ...(spec.keyOf(0) === undefined ? {} : { groupConcurrency: spec.limit }) }, async (jobs: any[]) => {
    for (const job of jobs) {
      holders.enter(job.data.key)
      if (spec.handlerMs > 0) await sleep(spec.handlerMs)
      holders.exit(job.data.key)
    }
  })
  const elapsedMs = await waitUntil(() => holders.completed >= spec.jobs, spec.capMs, t0)
  const { cpuMs, serverCpuMs, databaseCpuMs } = window.end()
  await b.stop({ graceful: true, close: true, timeout: 10_000 })
  // stop() resolves before its pool has closed everywhere; give it a moment
  await sleep(200)
  const after = await readCounters(url)
  const succeeded = await withClient(url, async (c) => Number((await c.query(`SELECT count(*)::int AS n FROM pgboss.job WHERE state = 'completed'`)).rows[0].n))
  return { completed: holders.completed, elapsedMs, maxHolders: holders.max, requeues: 0, succeeded, cpuMs, serverCpuMs, databaseCpuMs, serverCpuInsertMs, db: diffCounters(before, after), order: holders.order, maxLive: holders.maxLive }
}

/**
 * Dedupe (scenario 4): producers send `enqueues` jobs while workers run. `exclusive`: a queue with
 * policy `exclusive` and `singletonKey: key` on each send (refused while a job of the key is queued or
 * active). `throttle`: a standard queue and `sendThrottled(..., seconds, key)` (`singletonKey` +
 * `singletonSeconds`: at most one job of the key per time slot of `seconds`, the rest refused).
 */
export const dedupe = async (url: string, spec: DedupeSpec, mode: "exclusive" | { readonly throttleSeconds: number } = "exclusive"): Promise<DedupeResult> => {
  const b = boss(url, spec.workers + spec.producers + 4)
  await b.start()
  await b.createQueue(QUEUE, mode === "exclusive" ? { policy: "exclusive" } : {})
  const holders = new Holders()
  const runsPerKey = new Map<string, number>()
  await b.work(QUEUE, workOptions(spec), async (jobs: any[]) => {
    for (const job of jobs) {
      holders.enter(job.data.key)
      if (spec.handlerMs > 0) await sleep(spec.handlerMs)
      holders.exit(job.data.key)
      runsPerKey.set(job.data.key, (runsPerKey.get(job.data.key) ?? 0) + 1)
    }
  })
  const t0 = performance.now()
  let next = 0
  let accepted = 0
  const producer = async () => {
    while (next < spec.enqueues) {
      const i = next++
      const key = spec.keyOf(i)
      const id = mode === "exclusive" ? await b.send(QUEUE, { i, key }, { singletonKey: key }) : await b.sendThrottled(QUEUE, { i, key }, null, mode.throttleSeconds, key)
      if (id !== null) accepted++
    }
  }
  await Promise.all(Array.from({ length: spec.producers }, producer))
  const enqueueMs = performance.now() - t0
  const settled = async () =>
    withClient(url, async (c) => Number((await c.query(`SELECT count(*)::int AS n FROM pgboss.job WHERE state IN ('created','retry','active')`)).rows[0].n) === 0)
  let done = false
  while (!done && performance.now() - t0 < spec.capMs) {
    done = await settled()
    if (!done) await sleep(50)
  }
  const settleMs = performance.now() - t0
  await b.stop({ graceful: true, close: true, timeout: 10_000 })
  return { runsPerKey, maxHolders: holders.max, enqueueMs, settleMs, accepted, states: {} }
}

/**
 * Priority under a backlog (scenario 15): the backlog with `insert` (2,000 a call, priority 0), `work()`
 * as in the backlog runs; the high jobs with `send(..., { priority: 10 })` (pg-boss fetches `ORDER BY
 * priority DESC, created_on`).
 */
export const priority = async (url: string, spec: PrioritySpec): Promise<PriorityResult> => {
  const t0 = performance.now()
  const setup = boss(url, 4)
  await setup.start()
  await setup.createQueue(QUEUE)
  for (let start = 0; start < spec.backlog; start += 2000) {
    await setup.insert(QUEUE, Array.from({ length: Math.min(2000, spec.backlog - start) }, (_, j) => ({ data: { i: start + j } })))
  }
  await setup.stop({ graceful: true, close: true })
  const insertMs = performance.now() - t0
  const probe = new PriorityProbe(spec.backlog)
  const b = boss(url, spec.workers + 4)
  await b.start()
  const workerStart = performance.now()
  await b.work(QUEUE, workOptions(spec), async (jobs: any[]) => {
    for (const job of jobs) {
      probe.start(job.data.i)
      probe.end(job.data.i)
    }
  })
  try {
    const measured = await measurePriority(spec, probe, workerStart, (k) => b.send(QUEUE, { i: spec.backlog + k }, { priority: 10 }))
    return { ...measured, insertMs }
  } finally {
    await b.stop({ graceful: true, close: true, timeout: 10_000 })
    await sleep(200)
  }
}

/** Producers: `send` one at a time from `spec.producers` callers, or `insert` calls of `spec.batch` jobs. */
export const producers = async (url: string, spec: ProducerSpec): Promise<ProducerResult> => {
  const setup = boss(url, 2)
  await setup.start()
  await setup.createQueue(QUEUE)
  await setup.stop({ graceful: true, close: true })
  const before = await readCounters(url)
  const b = boss(url, spec.producers + 2)
  await b.start()
  const t0 = performance.now()
  if (spec.mode === "single") {
    await Promise.all(
      shares(spec.jobs, spec.producers).map(async (n, p) => {
        for (let i = 0; i < n; i++) {
          await b.send(QUEUE, { i }, spec.keyed === true ? { group: { id: `k${(p * n + i) % 100}` } } : {})
        }
      })
    )
  } else {
    for (let start = 0; start < spec.jobs; start += spec.batch) {
      const n = Math.min(spec.batch, spec.jobs - start)
      await b.insert(QUEUE, Array.from({ length: n }, (_, i) => ({ data: { i: start + i } })))
    }
  }
  const elapsedMs = performance.now() - t0
  await b.stop({ graceful: true, close: true })
  const after = await readCounters(url)
  const rows = await withClient(url, async (c) => Number((await c.query(`SELECT count(*)::int AS n FROM pgboss.job`)).rows[0].n))
  return { jobs: spec.jobs, elapsedMs, rows, db: diffCounters(before, after) }
}

/**
 * Claim latency with a large backlog: key k = `group: { id: k }` on each job and
 * `groupConcurrency: 1` on `work()` (limit 1 per key, checked in its fetch), `batchSize: 1`. The
 * backlog is written with `insert`, 10,000 jobs a call, and analyzed. Per block, every fetch statement
 * the worker sends is timed by wrapping `executeSql` of pg-boss's own database object.
 */
export const claimLatency = async (url: string, spec: ClaimSpec): Promise<ClaimRig> => {
  const t0 = performance.now()
  const setup = boss(url, 4)
  await setup.start()
  await setup.createQueue(QUEUE)
  for (let start = 0; start < spec.jobs; start += 10_000) {
    const jobs = []
    for (let i = start; i < Math.min(spec.jobs, start + 10_000); i++) {
      const key = spec.keyOf(i)
      jobs.push({ data: { i, key }, group: { id: key } })
    }
    await setup.insert(QUEUE, jobs)
  }
  await setup.stop({ graceful: true, close: true })
  await withClient(url, (c) => c.query("ANALYZE pgboss.job"))
  const insertSeconds = (performance.now() - t0) / 1000
  const waiting = () =>
    withClient(url, async (c) => Number((await c.query(`SELECT count(*)::int AS n FROM pgboss.job WHERE state IN ('created', 'retry')`)).rows[0].n))
  const block = async (claims: number, warmup: number): Promise<ClaimBlock> => {
    const timer = new ClaimTimer(warmup, claims)
    const holders = new Holders()
    // supervision and queue stats at their default intervals here: refreshed every second they would
    // count a backlog of 10^6 rows every second beside the claims (burst mode reads the ready count
    // cached at start, which stays positive)
    const b = boss(url, spec.workers + 4, false)
    await b.start()
    const db = b.getDb()
    const executeSql = db.executeSql.bind(db)
    db.executeSql = async (text: string, values?: Array<unknown>) => {
      // the fetch (plans.fetchNextJob): the only statement with its `next` CTE
      const isClaim = text.includes("next AS (")
      const started = performance.now()
      const r = await executeSql(text, values)
      if (isClaim) timer.record(performance.now() - started, r.rows.length)
      return r
    }
    const started = performance.now()
    await b.work(QUEUE, { ...workOptions(spec), groupConcurrency: 1 }, async (jobs: any[]) => {
      for (const job of jobs) {
        holders.enter(job.data.key)
        holders.exit(job.data.key)
      }
    })
    await waitUntil(() => timer.done, spec.capMs, started)
    await b.stop({ graceful: true, close: true, timeout: 10_000 })
    await sleep(200)
    return { samples: timer.samples, empty: timer.empty, completed: holders.completed, maxHolders: holders.max }
  }
  return { insertSeconds, waiting, block }
}

/**
 * Scenario 13 on pg-boss: `work()` as in the backlog runs (`localConcurrency`, `batchSize: 1`, its
 * shortest poll of 0.5 s, burst mode; queues without the opt-in `notify`), idle for 500 ms; jobs are
 * sent with `send`. `use` runs while it is idle.
 */
const idleBoss = async <A>(url: string, workers: number, group: boolean, signals: Signals, use: (b: PgBoss) => Promise<A>): Promise<A> => {
  const b = boss(url, workers + 4)
  await b.start()
  await b.createQueue(QUEUE)
  await b.work(QUEUE, { ...workOptions({ workers, pollMs: 100 }), ...(group ? { groupConcurrency: 1 } : {}) }, async (jobs: any[]) => {
    for (const job of jobs) {
      const { k, role, holdMs } = job.data as { k: number; role?: string; holdMs?: number }
      signals.mark(role === undefined ? `start:${k}` : `start:${role}:${k}`)
      if (holdMs !== undefined && holdMs > 0) await sleep(holdMs)
      if (role !== undefined) signals.mark(`end:${role}:${k}`)
    }
  })
  try {
    await sleep(500)
    return await use(b)
  } finally {
    await b.stop({ graceful: true, close: true, timeout: 10_000 })
    await sleep(200)
  }
}

/** Pickup latency on an idle worker: `send` of a job without a group, to its handler's start. */
export const pickup = (url: string, spec: PickupSpec): Promise<PickupResult> => {
  const signals = new Signals()
  return idleBoss(url, spec.workers, false, signals, (b) => measurePickups(spec, signals, (k) => b.send(QUEUE, { k })))
}

/**
 * A grouped job's start after the active job of its group completes: A and B with `group: { id: "k" }`
 * and `groupConcurrency: 1` on `work()` (B is skipped by every fetch while A is active).
 */
export const handoff = (url: string, spec: HandoffSpec): Promise<PickupResult> => {
  const signals = new Signals()
  return idleBoss(url, spec.workers, true, signals, (b) =>
    measureHandoffs(spec, signals, (k, role) => b.send(QUEUE, { k, role, ...(role === "A" ? { holdMs: spec.holds[k]! } : {}) }, { group: { id: "k" } }))
  )
}
