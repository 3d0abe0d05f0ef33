/** graphile-worker: per-key serialisation is `queue_name` (one job of a queue runs at a time). */
import { Logger, makeWorkerUtils, run, type RunnerOptions } from "graphile-worker"
import pg from "pg"
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
  type ProducerResult,
  type ProducerSpec,
  shares,
  Signals,
  sleep,
  waitUntil
} from "./common.js"

export const name = "graphile-worker"

const silent = new Logger(() => () => {})

/**
 * A pool of ours with error listeners (the pool's and every client's): graphile-worker's idle clients are
 * terminated when the bench drops a run's database (`WITH (FORCE)`), and a pool without a listener would
 * crash the whole run.
 */
const guardedPool = (url: string, max: number): pg.Pool => {
  const pool = new pg.Pool({ connectionString: url, max })
  pool.on("error", () => {})
  pool.on("connect", (client) => client.on("error", () => {}))
  return pool
}

/**
 * graphile-worker's runner with `options` (silent, no signal handling) on a pool of ours of `max` clients
 * (see {@link guardedPool}), or on `pool` when given (ended by its owner); `stop` stops the runner and
 * ends the pool it made.
 */
const startRunner = async (
  url: string,
  max: number,
  options: Omit<RunnerOptions, "pgPool" | "connectionString" | "maxPoolSize" | "logger" | "noHandleSignals">,
  pool?: pg.Pool
) => {
  const own = pool === undefined ? guardedPool(url, max) : undefined
  const runner = await run({ ...options, pgPool: pool ?? own!, noHandleSignals: true, logger: silent })
  return {
    stop: async () => {
      await runner.stop()
      await own?.end()
    }
  }
}

/**
 * The queue of job `i`. graphile-worker's queues are serial, so a limit of N on key k is modelled as
 * N queues `k#0..k#{N-1}` filled round-robin (the same key never runs more than N at once).
 */
const queueOf = (spec: BacklogSpec, i: number): string | undefined => {
  const key = spec.keyOf(i)
  return key === undefined ? undefined : spec.limit === 1 ? key : `${key}#${i % spec.limit}`
}

export const backlog = async (url: string, spec: BacklogSpec): Promise<BacklogResult> => {
  const server = await serverCpu(url)
  const inserting = cpuWindow(server)
  const utils = await makeWorkerUtils({ connectionString: url, logger: silent })
  await utils.migrate()
  for (let start = 0; start < spec.jobs; start += 2000) {
    const specs = []
    for (let i = start; i < Math.min(spec.jobs, start + 2000); i++) {
      const queueName = queueOf(spec, i)
      specs.push({ identifier: "bench", payload: { i, key: spec.keyOf(i) }, ...(queueName === undefined ? {} : { queueName }) })
    }
    await utils.addJobs(specs)
  }
  await utils.release()
  const serverCpuInsertMs = inserting.end().serverCpuMs
  const before = await readCounters(url)
  const holders = new Holders()
  const t0 = performance.now()
  // CPU time of this (the worker's) process and of the server over the window, as systems/warp.ts measures them
  const window = cpuWindow(server, databaseOf(url))
  const runner = await startRunner(url, spec.workers + 2, {
    concurrency: spec.workers,
    pollInterval: spec.pollMs,
    taskList: {
      bench: async (payload: any) => {
        holders.enter(payload.key)
        if (spec.handlerMs > 0) await new Promise((r) => setTimeout(r, spec.handlerMs))
        holders.exit(payload.key)
      }
    }
  })
  const elapsedMs = await waitUntil(() => holders.completed >= spec.jobs, spec.capMs, t0)
  const { cpuMs, serverCpuMs, databaseCpuMs } = window.end()
  await runner.stop()
  const after = await readCounters(url)
  // completed jobs are deleted by graphile-worker
  const left = await withClient(url, async (c) => Number((await c.query(`SELECT count(*)::int AS n FROM graphile_worker.jobs`)).rows[0].n))
  return { completed: holders.completed, elapsedMs, maxHolders: holders.max, requeues: 0, succeeded: spec.jobs - left, cpuMs, serverCpuMs, databaseCpuMs, serverCpuInsertMs, db: diffCounters(before, after), order: holders.order, maxLive: holders.maxLive }
}

/**
 * Dedupe by job key (scenario 4): producers `addJob` each job with `jobKey: key` while a runner
 * (`concurrency`, `pollInterval`, no queue) works. `unsafe_dedupe`: the add is dropped while a job of
 * the key exists, waiting or locked (running); `replace` (its default): a waiting job of the key is
 * replaced (payload, run_at), a locked one loses its key and a new job is added beside it. Completed
 * jobs are deleted, so the key is free again once its job is done. `accepted` = distinct job ids
 * returned (a dropped or replacing add returns the existing job's id).
 */
export const dedupe = async (url: string, spec: DedupeSpec, jobKeyMode: "unsafe_dedupe" | "replace"): Promise<DedupeResult> => {
  const holders = new Holders()
  const runsPerKey = new Map<string, number>()
  // producers and runner share one pool, as before
  const pool = guardedPool(url, spec.workers + 2)
  const utils = await makeWorkerUtils({ pgPool: pool, logger: silent })
  await utils.migrate()
  const runner = await startRunner(url, spec.workers + 2, {
    concurrency: spec.workers,
    pollInterval: spec.pollMs,
    taskList: {
      bench: async (payload: any) => {
        holders.enter(payload.key)
        if (spec.handlerMs > 0) await sleep(spec.handlerMs)
        holders.exit(payload.key)
        runsPerKey.set(payload.key, (runsPerKey.get(payload.key) ?? 0) + 1)
      }
    }
  }, pool)
  const ids = new Set<string>()
  const t0 = performance.now()
  let next = 0
  const producer = async () => {
    while (next < spec.enqueues) {
      const i = next++
      const key = spec.keyOf(i)
      const job = await utils.addJob("bench", { i, key }, { jobKey: key, jobKeyMode })
      ids.add(String(job.id))
    }
  }
  await Promise.all(Array.from({ length: spec.producers }, producer))
  const enqueueMs = performance.now() - t0
  // settled: no job left (completed jobs are deleted)
  while (performance.now() - t0 < spec.capMs) {
    const left = await withClient(url, async (c) => Number((await c.query(`SELECT count(*)::int AS n FROM graphile_worker.jobs`)).rows[0].n))
    if (left === 0) break
    await sleep(50)
  }
  const settleMs = performance.now() - t0
  await runner.stop()
  await utils.release()
  await pool.end()
  return { runsPerKey, maxHolders: holders.max, enqueueMs, settleMs, accepted: ids.size, states: {} }
}

/**
 * Priority under a backlog (scenario 15): the backlog with `addJobs` (2,000 a call, priority 0), a runner
 * as in the backlog runs; the high jobs with `addJob(..., { priority: -10 })` (graphile-worker runs
 * numerically smaller priorities first).
 */
export const priority = async (url: string, spec: PrioritySpec): Promise<PriorityResult> => {
  const t0 = performance.now()
  const utils = await makeWorkerUtils({ connectionString: url, logger: silent })
  await utils.migrate()
  for (let start = 0; start < spec.backlog; start += 2000) {
    await utils.addJobs(Array.from({ length: Math.min(2000, spec.backlog - start) }, (_, j) => ({ identifier: "bench", payload: { i: start + j } })))
  }
  const insertMs = performance.now() - t0
  const probe = new PriorityProbe(spec.backlog)
  const workerStart = performance.now()
  const runner = await startRunner(url, spec.workers + 2, {
    concurrency: spec.workers,
    pollInterval: spec.pollMs,
    taskList: {
      bench: async (payload: any) => {
        probe.start(payload.i)
        probe.end(payload.i)
      }
    }
  })
  try {
    const measured = await measurePriority(spec, probe, workerStart, (k) => utils.addJob("bench", { i: spec.backlog + k }, { priority: -10 }))
    return { ...measured, insertMs }
  } finally {
    await runner.stop()
    await utils.release()
  }
}

/** Producers: `addJob` one at a time from `spec.producers` callers, or `addJobs` calls of `spec.batch` jobs. */
export const producers = async (url: string, spec: ProducerSpec): Promise<ProducerResult> => {
  const setup = await makeWorkerUtils({ connectionString: url, logger: silent })
  await setup.migrate()
  await setup.release()
  const before = await readCounters(url)
  const utils = await makeWorkerUtils({ connectionString: url, logger: silent })
  const t0 = performance.now()
  if (spec.mode === "single") {
    await Promise.all(
      shares(spec.jobs, spec.producers).map(async (n, p) => {
        for (let i = 0; i < n; i++) {
          await utils.addJob("bench", { i }, spec.keyed === true ? { queueName: `k${(p * n + i) % 100}` } : {})
        }
      })
    )
  } else {
    for (let start = 0; start < spec.jobs; start += spec.batch) {
      const n = Math.min(spec.batch, spec.jobs - start)
      await utils.addJobs(Array.from({ length: n }, (_, i) => ({ identifier: "bench", payload: { i: start + i } })))
    }
  }
  const elapsedMs = performance.now() - t0
  await utils.release()
  const after = await readCounters(url)
  const rows = await withClient(url, async (c) => Number((await c.query(`SELECT count(*)::int AS n FROM graphile_worker.jobs`)).rows[0].n))
  return { jobs: spec.jobs, elapsedMs, rows, db: diffCounters(before, after) }
}

/**
 * Claim latency with a large backlog: key k = `queueName: k` (one job of a queue at a time: limit 1).
 * The backlog is written with `addJobs`, 10,000 jobs a call, and analyzed. graphile-worker claims one
 * job per `get_job` statement (no local queue); per block, every `get_job` the runner sends is timed on
 * a pool of ours (`pgPool`) whose clients' `query` is wrapped.
 */
export const claimLatency = async (url: string, spec: ClaimSpec): Promise<ClaimRig> => {
  const t0 = performance.now()
  const utils = await makeWorkerUtils({ connectionString: url, logger: silent })
  await utils.migrate()
  for (let start = 0; start < spec.jobs; start += 10_000) {
    const specs = []
    for (let i = start; i < Math.min(spec.jobs, start + 10_000); i++) {
      const key = spec.keyOf(i)
      specs.push({ identifier: "bench", payload: { i, key }, queueName: key })
    }
    await utils.addJobs(specs)
  }
  await utils.release()
  await withClient(url, (c) => c.query("ANALYZE graphile_worker._private_jobs; ANALYZE graphile_worker._private_job_queues"))
  const insertSeconds = (performance.now() - t0) / 1000
  const waiting = () =>
    withClient(url, async (c) => Number((await c.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE locked_at IS NULL`)).rows[0].n))
  const block = async (claims: number, warmup: number): Promise<ClaimBlock> => {
    const timer = new ClaimTimer(warmup, claims)
    const pool = guardedPool(url, spec.workers + 2)
    pool.on("connect", (client) => {
      const query = client.query.bind(client) as (...args: Array<unknown>) => unknown
      ;(client as any).query = (...args: Array<unknown>) => {
        const config = args[0] as { name?: string; text?: string } | string
        const isClaim = typeof config === "object" && config !== null && ((config.name ?? "").startsWith("get_job") || (config.text ?? "").includes("_private_job_queues as job_queues"))
        const started = performance.now()
        const out = query(...args)
        if (isClaim && out instanceof Promise) {
          out.then((r: any) => timer.record(performance.now() - started, r?.rows?.length ?? 0), () => {})
        }
        return out
      }
    })
    const holders = new Holders()
    const started = performance.now()
    const runner = await startRunner(url, spec.workers + 2, {
      concurrency: spec.workers,
      pollInterval: spec.pollMs,
      taskList: {
        bench: async (payload: any) => {
          holders.enter(payload.key)
          holders.exit(payload.key)
        }
      }
    }, pool)
    await waitUntil(() => timer.done, spec.capMs, started)
    await runner.stop()
    await pool.end()
    return { samples: timer.samples, empty: timer.empty, completed: holders.completed, maxHolders: holders.max }
  }
  return { insertSeconds, waiting, block }
}

/**
 * Scenario 13 on graphile-worker: a runner as in the backlog runs (`concurrency`, `pollInterval: 100`;
 * it also LISTENs for the NOTIFY its `add_job` sends, so a new job wakes it at once), idle for 500 ms;
 * jobs are added with `WorkerUtils.addJob`. `use` runs while it is idle.
 */
const idleRunner = async <A>(url: string, workers: number, signals: Signals, use: (utils: Awaited<ReturnType<typeof makeWorkerUtils>>) => Promise<A>): Promise<A> => {
  const utils = await makeWorkerUtils({ connectionString: url, logger: silent })
  await utils.migrate()
  const runner = await startRunner(url, workers + 2, {
    concurrency: workers,
    pollInterval: 100,
    taskList: {
      pickup: async (payload: any) => {
        const { k, role, holdMs } = payload as { k: number; role?: string; holdMs?: number }
        signals.mark(role === undefined ? `start:${k}` : `start:${role}:${k}`)
        if (holdMs !== undefined && holdMs > 0) await sleep(holdMs)
        if (role !== undefined) signals.mark(`end:${role}:${k}`)
      }
    }
  })
  try {
    await sleep(500)
    return await use(utils)
  } finally {
    await runner.stop()
    await utils.release()
  }
}

/** Pickup latency on an idle runner: `addJob` of a job without a queue, to its task's start. */
export const pickup = (url: string, spec: PickupSpec): Promise<PickupResult> => {
  const signals = new Signals()
  return idleRunner(url, spec.workers, signals, (utils) => measurePickups(spec, signals, (k) => utils.addJob("pickup", { k })))
}

/**
 * A queued job's start after the job ahead of it in its queue completes: A and B with `queueName: "k"`
 * (a serial queue: graphile-worker's limit 1; B waits, locked out, until A's completion unlocks the queue).
 */
export const handoff = (url: string, spec: HandoffSpec): Promise<PickupResult> => {
  const signals = new Signals()
  return idleRunner(url, spec.workers, signals, (utils) =>
    measureHandoffs(spec, signals, (k, role) => utils.addJob("pickup", { k, role, ...(role === "A" ? { holdMs: spec.holds[k]! } : {}) }, { queueName: "k" }))
  )
}
