/**
 * One worker's settings and the state its lanes, watchers and attempts share: what it holds, since
 * when, and which of its handlers an operator asked to stop.
 *
 * @since 0.3.0
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import type { Addon } from "../attempt/Pipeline.js"
import type { RetentionOptions } from "../job/Retention.js"
import * as StoreHealth from "./StoreHealth.js"

/** Worker options. */
export interface WorkerOptions<A extends ReadonlyArray<Addon<any>> = ReadonlyArray<Addon<never>>> {
  /**
   * The addons of the pipeline (e.g. `[Concurrency.addon, RateLimitAddon.addon]`), placed by their
   * `order`; the worker needs the services they name. Without an addon, the worker ignores its family
   * (still resolved and stamped, like any policy).
   */
  readonly addons?: A
  /** Fibers running attempts at once (default 4). */
  readonly concurrency?: number
  /** Idle wait between empty fetches (default 100 ms). */
  readonly pollInterval?: Duration.Input
  /** Claim lease, renewed by a heartbeat every third of it (default 30 s). */
  readonly lease?: Duration.Input
  /** How long closing the scope waits for running attempts before interrupting them (default 10 s). */
  readonly gracePeriod?: Duration.Input
  /** This worker's id in claims and audit entries (default random). */
  readonly workerId?: string
  /**
   * Slot reuse for Wait-mode concurrency keys — opt-in, off by default (`{}` turns it on with 64 jobs,
   * 250 ms). A fiber holding a slot of key k claims the next due jobs whose policy is the same key,
   * limit and mode and runs them under the same slot (each job's finalizing write in flight while the
   * next runs), until none is due or either bound is reached; once every write has landed it releases
   * the slot. A job runs under the held slot only if its key's limit (an admin override included) still
   * covers the slot's index. Off by default: a hot key's jobs then run one after another under a held
   * slot instead of each meeting the full key, so the trail shows fewer `Requeued — … full` entries than
   * one admission per job gives.
   */
  readonly slotReuse?: false | { readonly maxJobs?: number; readonly maxDuration?: Duration.Input } | undefined
  /**
   * Most rows one fiber claims per fetch (default 8). A fiber starts at 1 and doubles while full
   * batches of quick jobs run uncontended; 1 turns batching off (one claim per attempt). On the built-in
   * PostgreSQL path the finalizing write of a batch's last keyed attempt carries the next claim.
   */
  readonly maxBatch?: number
  /**
   * How often the worker asks the store whether an operator cancelled a job it is running (default
   * 1 s; see `JobStoreService.requestCancel`). Asked only while it holds jobs.
   */
  readonly cancelCheckInterval?: Duration.Input
  /**
   * Retention of finished jobs (see `Retention.RetentionOptions`; on by default: Succeeded and Deleted
   * kept 1 day, Failed 7 days, tombstones 7 days, pruned every 30 s in batches of 500); a contract's
   * `retention` overrides it for its job type. `false`: this worker prunes nothing (another process may).
   * The worker's build fails with `InvalidArgument` for a setting that cannot be honoured.
   */
  readonly retention?: RetentionOptions | false | undefined
}

/** The worker's settings, with every default applied. */
export interface WorkerConfig {
  readonly workerId: string
  readonly lanes: number
  readonly pollInterval: Duration.Duration
  readonly lease: Duration.Duration
  readonly leaseMs: number
  readonly heartbeatMs: number
  readonly grace: Duration.Duration
  readonly maxBatch: number
  /** Slot reuse bounds, when it is on. */
  readonly reuse: { readonly maxJobs: number; readonly maxMs: number } | undefined
  readonly cancelCheck: Duration.Duration
}

/** Most rows a worker fiber claims at once, by default. */
export const BATCH_MAX = 8

/** Applies the defaults to `options`. */
export const config = (options: WorkerOptions<ReadonlyArray<Addon<any>>>): WorkerConfig => {
  const lease = Duration.fromInputUnsafe(options.lease ?? "30 seconds")
  const leaseMs = Duration.toMillis(lease)
  return {
    workerId: options.workerId ?? `worker-${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
    lanes: options.concurrency ?? 4,
    pollInterval: Duration.fromInputUnsafe(options.pollInterval ?? "100 millis"),
    lease,
    leaseMs,
    heartbeatMs: Math.max(10, leaseMs / 3),
    grace: Duration.fromInputUnsafe(options.gracePeriod ?? "10 seconds"),
    maxBatch: Math.max(1, Math.floor(options.maxBatch ?? BATCH_MAX)),
    reuse:
      options.slotReuse === undefined || options.slotReuse === false
        ? undefined
        : {
            maxJobs: Math.max(1, options.slotReuse?.maxJobs ?? 64),
            maxMs: Duration.toMillis(Duration.fromInputUnsafe(options.slotReuse?.maxDuration ?? "250 millis"))
          },
    cancelCheck: Duration.fromInputUnsafe(options.cancelCheckInterval ?? "1 second")
  }
}

/** What the worker's parts share while it runs. */
export interface WorkerState {
  readonly config: WorkerConfig
  /** Ids of the jobs this worker holds (claimed, running or finalizing). */
  readonly inFlight: Set<string>
  /** When each claimed job's lease runs out unless a heartbeat renews it (local clock, epoch ms). */
  readonly leaseUntil: Map<string, number>
  /** The concurrency key of each running handler (it holds a slot of it), by job id. */
  readonly runningKeys: Map<string, string>
  /** Running jobs whose row does not carry their key yet, with the limit and the key's source (see `WorkerReport.slots`). */
  readonly unstamped: Map<string, { readonly limit: number; readonly source: string }>
  /** Asks for a report to the registry soon (the heartbeat sends one anyway). */
  readonly reportSoon: Queue.Queue<void>
  /** The running handlers' cancel signals, by job id: each interrupts its handler, the cause becoming the attempt's. */
  readonly cancelSignals: Map<string, (cause: string) => Effect.Effect<void>>
  /** Cancels asked for jobs this worker holds: the cause, by job id. */
  readonly cancelAsked: Map<string, string>
  /** Completed when the worker begins to stop: lanes claim no more. */
  readonly stopping: Deferred.Deferred<void>
  /** Whether the store answers (one log line per outage). */
  readonly health: StoreHealth.StoreHealth
}

/** Fresh state for a worker with `config`. */
export const make = (config: WorkerConfig): Effect.Effect<WorkerState> =>
  Effect.map(Effect.zip(Deferred.make<void>(), Queue.sliding<void>(1)), ([stopping, reportSoon]) => ({
    config,
    unstamped: new Map(),
    reportSoon,
    inFlight: new Set(),
    leaseUntil: new Map(),
    runningKeys: new Map(),
    cancelSignals: new Map(),
    cancelAsked: new Map(),
    stopping,
    health: StoreHealth.make(config.workerId)
  }))

/** Store calls that failed are retried quickly (the store's return is noticed within half a second). */
export const storeRetry = Schedule.min([Schedule.exponential("50 millis"), Schedule.spaced("500 millis")])
