/** What every system adapter runs, and what it reports. */
import type { DbCounters } from "../lib/server.js"

/** A backlog run: `jobs` rows enqueued up front, then workers drain them (or the cap ends the run). */
export interface BacklogSpec {
  readonly jobs: number
  /** The key of job `i` (undefined: keyless). */
  readonly keyOf: (i: number) => string | undefined
  /** Jobs of one key running at once. */
  readonly limit: number
  /** Worker slots (fibers / concurrency) in the one worker process. */
  readonly workers: number
  /** Handler time (0: no-op). */
  readonly handlerMs: number
  /** The run stops here even if jobs are left. */
  readonly capMs: number
  /** Idle poll interval of the worker. */
  readonly pollMs: number
  /** Register the concurrency addon (warp only; scenario 1). */
  readonly addon?: boolean
  /** warp only: `true` turns the worker's slot reuse on (opt-in; off by default). */
  readonly slotReuse?: boolean
  /** warp only: the concurrency mode of keyed jobs (default `Wait`; `Fifo` is the opt-in strict order). */
  readonly mode?: "Wait" | "Fifo"
  /** warp only: the PostgreSQL provider's lock-delay (default on). */
  readonly lockDelay?: boolean
  /** warp only: the fair-share weight of every keyed job (issue 17; default none: ScheduleTime order). */
  readonly weight?: number
  /** warp only: a total cap over every key (one group), held with the per-key `limit`. */
  readonly total?: number
}

/** A dedupe run: producers enqueue `enqueues` jobs (key of job i: `keyOf(i)`) while the worker runs. */
export interface DedupeSpec {
  readonly enqueues: number
  readonly keys: number
  readonly keyOf: (i: number) => string
  readonly producers: number
  readonly workers: number
  readonly handlerMs: number
  readonly pollMs: number
  readonly capMs: number
}

/**
 * What a dedupe run measured (scenario 4). Every variant counts the handler runs per key; `accepted`
 * and `outcomes` are each system's own word on the enqueues (pg-boss: ids returned; graphile-worker:
 * distinct job ids returned; this project: `submit`'s outcomes where it has them).
 */
export interface DedupeResult {
  readonly runsPerKey: Map<string, number>
  /** Worst number of handlers of one key running at once. */
  readonly maxHolders: number
  /** ms from the first enqueue's call to the last one's return (4 producers). */
  readonly enqueueMs: number
  /** ms from the first enqueue's call until nothing was pending or running. */
  readonly settleMs: number
  /** Enqueues the system reported as new jobs. */
  readonly accepted: number
  /** Jobs by state at the end (this project), `{}` elsewhere. */
  readonly states: Record<string, number>
  /** The enqueue's outcomes by tag, where the system tells (this project's `submit`: Created / Replaced / Joined). */
  readonly outcomes?: Record<string, number>
}

/**
 * Priority under a backlog (scenario 15): `backlog` no-op jobs at the default priority are written up
 * front; one worker of `workers` lanes drains them; `leadMs` after the worker started, `high` no-op
 * jobs of a higher priority (each system's own way: see run.ts) are enqueued one every `everyMs` (a
 * steady rate, each enqueue on its own, not waiting for the previous). A sample is the time from a high
 * job's enqueue call to its handler's start (its enqueue's own time included: on a busy server a worker
 * often starts the job before the enqueue's reply is read, so the time from the return can be negative;
 * it is kept beside). Job `i` is low for `i < backlog`, high `i - backlog` after.
 */
export interface PrioritySpec {
  readonly backlog: number
  readonly workers: number
  readonly pollMs: number
  readonly leadMs: number
  readonly high: number
  readonly everyMs: number
  /** A high job not started this long after its enqueue counts as this long (and as a timeout). */
  readonly timeoutMs: number
}

/** What a priority run measured. */
export interface PriorityResult {
  /** ms from each high job's enqueue call to its handler's start (timeouts count as `timeoutMs`). */
  readonly waits: ReadonlyArray<number>
  /** The same from the enqueue's return (negative where the handler started before the reply was read). */
  readonly fromReturn: ReadonlyArray<number>
  readonly timeouts: number
  /** High jobs whose enqueue returned while low jobs were still not done (the backlog not drained). */
  readonly underBacklog: number
  /** By high job: whether its enqueue returned before the backlog drained (its sample measures priority, not an idle pickup). */
  readonly backlogged: ReadonlyArray<boolean>
  /** Low jobs completed over the run. */
  readonly lowCompleted: number
  /** ms from the worker's start to the last low completion. */
  readonly drainMs: number
  /** ms to write the backlog (each system's bulk path). */
  readonly insertMs: number
}

/** The handlers' side of a priority run: low completions and high starts, by job number. */
export class PriorityProbe {
  lowDone = 0
  lastLowAt = 0
  readonly highStartedAt = new Map<number, number>()
  constructor(readonly backlog: number) {}
  /** Job `i`'s handler starts (a high job is marked). */
  start(i: number) {
    if (i >= this.backlog) this.highStartedAt.set(i - this.backlog, performance.now())
  }
  /** Job `i`'s handler ends (a low job is counted). */
  end(i: number) {
    if (i < this.backlog) {
      this.lowDone++
      this.lastLowAt = performance.now()
    }
  }
}

/**
 * The bench's side of a priority run, once the worker runs (started at `workerStart`): waits
 * `spec.leadMs`, enqueues the high jobs at the steady rate (`enqueueHigh(k)` enqueues job
 * `backlog + k`), waits until all of them started (or timed out), and reads the figures.
 */
export const measurePriority = async (
  spec: PrioritySpec,
  probe: PriorityProbe,
  workerStart: number,
  enqueueHigh: (k: number) => Promise<unknown>
): Promise<Omit<PriorityResult, "insertMs">> => {
  await sleep(Math.max(0, workerStart + spec.leadMs - performance.now()))
  const first = performance.now()
  const calls: Array<number> = []
  const returns: Array<number> = []
  const backlogged: Array<boolean> = []
  const pending: Array<Promise<unknown>> = []
  for (let k = 0; k < spec.high; k++) {
    await sleep(Math.max(0, first + k * spec.everyMs - performance.now()))
    calls[k] = performance.now()
    pending.push(
      enqueueHigh(k).then(() => {
        returns[k] = performance.now()
        backlogged[k] = probe.lowDone < probe.backlog
      })
    )
  }
  await Promise.all(pending)
  const last = Math.max(...returns)
  await waitUntil(() => probe.highStartedAt.size >= spec.high, spec.timeoutMs, last)
  const waits: Array<number> = []
  const fromReturn: Array<number> = []
  let timeouts = 0
  for (let k = 0; k < spec.high; k++) {
    const at = probe.highStartedAt.get(k)
    if (at === undefined || at - calls[k]! > spec.timeoutMs) timeouts++
    waits.push(at === undefined ? spec.timeoutMs : Math.min(spec.timeoutMs, at - calls[k]!))
    fromReturn.push(at === undefined ? spec.timeoutMs : Math.min(spec.timeoutMs, at - returns[k]!))
  }
  const lowCompleted = probe.lowDone
  const drainMs = (lowCompleted > 0 ? probe.lastLowAt : performance.now()) - workerStart
  return { waits, fromReturn, timeouts, underBacklog: backlogged.filter((b) => b).length, backlogged, lowCompleted, drainMs }
}

/** What a backlog run measured. */
export interface BacklogResult {
  /** Handler completions inside the window. */
  readonly completed: number
  readonly elapsedMs: number
  /** Worst number of handlers of one key running at once (checked at every instant). */
  readonly maxHolders: number
  /** Immediate requeues (warp: Wait-mode "full" pickups). */
  readonly requeues: number
  /** Succeeded jobs as the system's own tables say. */
  readonly succeeded: number
  /** CPU time of the process running the worker over the window, ms (every system's backlog run). */
  readonly cpuMs?: number
  /**
   * CPU time of the PostgreSQL server over the same window, ms: the postmaster and every process below
   * it, exited backends included (`lib/serverCpu.ts`); NaN where this machine's `/proc` cannot see it.
   */
  readonly serverCpuMs?: number
  /**
   * CPU time of the backends of the run's own database over the window, ms (polled from /proc every
   * 50 ms; without the server's background processes and without other clients of a shared server).
   */
  readonly databaseCpuMs?: number
  /** The server's CPU time while the backlog was written (before the window), ms; NaN as above. */
  readonly serverCpuInsertMs?: number
  /** Server counters over the processing window (workers started .. workers stopped). */
  readonly db: DbCounters
  /** The key of every completion, in completion order. */
  readonly order?: ReadonlyArray<string | undefined>
  /** Worst number of keyed handlers running at once, all keys together (a total cap's check). */
  readonly maxLive?: number
}

/** Counts live handlers per key (and of all keys together) at every instant; keeps the completion order. */
export class Holders {
  private readonly live = new Map<string, number>()
  private all = 0
  max = 0
  maxLive = 0
  completed = 0
  readonly order: Array<string | undefined> = []
  enter(key: string | undefined) {
    if (key === undefined) return
    const n = (this.live.get(key) ?? 0) + 1
    this.live.set(key, n)
    if (n > this.max) this.max = n
    if (++this.all > this.maxLive) this.maxLive = this.all
  }
  exit(key: string | undefined) {
    this.completed++
    this.order.push(key)
    if (key !== undefined) {
      this.live.set(key, (this.live.get(key) ?? 1) - 1)
      this.all--
    }
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Resolves when `done()` turns true (checked every 2 ms) or after `capMs`; returns the elapsed ms. */
export const waitUntil = async (done: () => boolean, capMs: number, t0 = performance.now()): Promise<number> => {
  while (!done() && performance.now() - t0 < capMs) await sleep(2)
  return performance.now() - t0
}

/**
 * A producer run: `jobs` enqueues of a no-op job into an empty queue, nothing working. `single`: one
 * enqueue per call, `producers` concurrent callers; `bulk`: sequential calls of `batch` jobs each.
 */
export interface ProducerSpec {
  readonly mode: "single" | "bulk"
  readonly jobs: number
  readonly producers: number
  readonly batch: number
  /** `single` only: give every job a concurrency key (warp `withSemaphore`, graphile `queueName`, pg-boss `group`). */
  readonly keyed?: boolean
}

/** What a producer run measured. */
export interface ProducerResult {
  readonly jobs: number
  readonly elapsedMs: number
  /** Rows of the system's tables after the run (to check every job landed). */
  readonly rows: number
  /** Server counters over the enqueue window (pools closed before the read). */
  readonly db: DbCounters
}

/** Splits `jobs` into `producers` near-equal shares. */
export const shares = (jobs: number, producers: number): Array<number> =>
  Array.from({ length: producers }, (_, p) => Math.floor(jobs / producers) + (p < jobs % producers ? 1 : 0))

/**
 * Claim latency with a large backlog: `jobs` waiting jobs spread over `keys` concurrency keys (limit 1
 * each; key of job i: `keyOf(i)`), written up front and analyzed ({@link ClaimRig}); then, block after
 * block, one worker process of `workers` lanes runs no-op handlers (one job per claim) until a block's
 * claims that returned a job were timed. A claim is the system's claiming statement, timed in this
 * process from the call to its reply (pool wait included, as a lane sees it).
 */
export interface ClaimSpec {
  readonly jobs: number
  readonly keys: number
  readonly keyOf: (i: number) => string
  readonly workers: number
  readonly pollMs: number
  /** A block stops here even if it has not timed its claims. */
  readonly capMs: number
  /** warp only: the concurrency mode of the keyed jobs (default `Wait`). */
  readonly mode?: "Wait" | "Fifo"
}

/** What one block measured. */
export interface ClaimBlock {
  /** ms per claim that returned a job, after the block's warm-up, in claim order. */
  readonly samples: ReadonlyArray<number>
  /** Claims that returned nothing (in the whole block). */
  readonly empty: number
  /** Jobs the handlers completed. */
  readonly completed: number
  /** Worst number of handlers of one key running at once. */
  readonly maxHolders: number
  /** The samples by where each claim ran (this project: `own` fetches and `carried` claims), when told. */
  readonly byKind?: Readonly<Record<string, ReadonlyArray<number>>>
}

/** A written backlog, measured in blocks (so that two backlogs can be measured alternately). */
export interface ClaimRig {
  /** Seconds the backlog took to write (one call after another) and analyze. */
  readonly insertSeconds: number
  /** Waiting rows now. */
  readonly waiting: () => Promise<number>
  /** Starts a worker, times `warmup + claims` claims that return a job (keeps the last `claims`), stops it. */
  readonly block: (claims: number, warmup: number) => Promise<ClaimBlock>
}

/** Keeps the timings of claims that returned a job after the first `warmup`, up to `claims`; counts empty ones. */
export class ClaimTimer {
  readonly samples: Array<number> = []
  empty = 0
  seen = 0
  constructor(
    private readonly warmup: number,
    private readonly claims: number
  ) {}
  /** Samples by where the claim ran (a system that claims in one place only records none). */
  readonly byKind: Record<string, Array<number>> = {}
  record(ms: number, rows: number, kind?: string) {
    if (rows === 0) {
      this.empty++
      return
    }
    this.seen++
    if (this.seen > this.warmup && this.samples.length < this.claims) {
      this.samples.push(ms)
      if (kind !== undefined) (this.byKind[kind] ??= []).push(ms)
    }
  }
  get done() {
    return this.samples.length >= this.claims
  }
}

/**
 * Pickup latency on an idle worker (scenario 13): one worker of `workers` lanes with nothing to do;
 * before sample k the bench waits `gaps[k]` ms (seeded, spread over more than one poll interval, so
 * that the enqueue lands at a random point of a poller's cycle), then enqueues one no-op job and
 * waits for its handler to start. A sample is the time from the enqueue's return to the handler's
 * start (and, kept beside it, from the enqueue's call). The first `warmup` samples are dropped.
 */
export interface PickupSpec {
  readonly workers: number
  readonly gaps: ReadonlyArray<number>
  readonly warmup: number
  /** A sample whose handler has not started after this long counts as this long (and as a timeout). */
  readonly timeoutMs: number
}

/**
 * How soon a Wait job starts after its key's slot frees (scenario 13's second part): per sample, job A
 * of key `k` (limit 1) starts and holds the key for `holds[k]` ms; job B of the same key is enqueued
 * once A has started (so B meets the key held); the sample is the time from A's handler returning to
 * B's handler starting. Then `gaps[k]` ms of quiet before the next sample.
 */
export interface HandoffSpec extends PickupSpec {
  readonly holds: ReadonlyArray<number>
}

/** What a pickup or handoff run measured: ms per sample (after the warm-up) and the timeouts among them. */
export interface PickupResult {
  readonly samples: ReadonlyArray<number>
  /** Pickup only: ms from the enqueue's call (not its return) to the handler's start. */
  readonly fromCall?: ReadonlyArray<number>
  readonly timeouts: number
}

/** Handler starts (and ends) by job number, awaited by the bench; a start may come before it is awaited. */
export class Signals {
  private readonly waiting = new Map<string, (at: number) => void>()
  private readonly early = new Map<string, number>()
  /** Marks `what` (e.g. `start:3`) now. */
  mark(what: string) {
    const at = performance.now()
    const w = this.waiting.get(what)
    if (w === undefined) this.early.set(what, at)
    else {
      this.waiting.delete(what)
      w(at)
    }
  }
  /** When `what` was (or will be) marked; `undefined` after `timeoutMs`. */
  when(what: string, timeoutMs: number): Promise<number | undefined> {
    const at = this.early.get(what)
    if (at !== undefined) {
      this.early.delete(what)
      return Promise.resolve(at)
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiting.delete(what)
        resolve(undefined)
      }, timeoutMs)
      this.waiting.set(what, (t) => {
        clearTimeout(timer)
        resolve(t)
      })
    })
  }
}

/**
 * The bench's side of a pickup run: `enqueue(k)` enqueues job k and resolves when the enqueue
 * returns; `signals` is marked `start:k` by the handler.
 */
export const measurePickups = async (spec: PickupSpec, signals: Signals, enqueue: (k: number) => Promise<unknown>): Promise<PickupResult> => {
  const samples: Array<number> = []
  const fromCall: Array<number> = []
  let timeouts = 0
  for (let k = 0; k < spec.gaps.length; k++) {
    await sleep(spec.gaps[k]!)
    const started = signals.when(`start:${k}`, spec.timeoutMs)
    const called = performance.now()
    await enqueue(k)
    const returned = performance.now()
    const at = await started
    if (k < spec.warmup) continue
    if (at === undefined) timeouts++
    samples.push(at === undefined ? spec.timeoutMs : at - returned)
    fromCall.push(at === undefined ? spec.timeoutMs : at - called)
  }
  return { samples, fromCall, timeouts }
}

/**
 * The bench's side of a handoff run: `enqueue(k, role)` enqueues job A or B of sample k (key `k`,
 * limit 1); the handlers mark `start:A:k`, `end:A:k` (A's handler returning, after its hold) and
 * `start:B:k`. B is enqueued once A has started.
 */
export const measureHandoffs = async (spec: HandoffSpec, signals: Signals, enqueue: (k: number, role: "A" | "B") => Promise<unknown>): Promise<PickupResult> => {
  const samples: Array<number> = []
  let timeouts = 0
  for (let k = 0; k < spec.gaps.length; k++) {
    await sleep(spec.gaps[k]!)
    const aStarted = signals.when(`start:A:${k}`, spec.timeoutMs)
    const aEnded = signals.when(`end:A:${k}`, spec.timeoutMs + spec.holds[k]!)
    const bStarted = signals.when(`start:B:${k}`, 2 * spec.timeoutMs + spec.holds[k]!)
    await enqueue(k, "A")
    if ((await aStarted) === undefined) throw new Error(`job A of sample ${k} did not start within ${spec.timeoutMs} ms`)
    await enqueue(k, "B")
    const freed = await aEnded
    const at = await bStarted
    if (freed === undefined) throw new Error(`job A of sample ${k} did not end`)
    if (k < spec.warmup) continue
    if (at === undefined) timeouts++
    samples.push(at === undefined ? spec.timeoutMs : at - freed)
  }
  return { samples, timeouts }
}
