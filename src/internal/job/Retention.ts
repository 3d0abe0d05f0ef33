/**
 * Retention of finished jobs: how long (and how many) Succeeded, Failed and Deleted rows a store keeps
 * before the pruner removes them with their audit trail, leaving a small tombstone so that a read of a
 * pruned job says it expired. Worker options carry the policy (`WorkerOptions.retention`); a contract
 * may override it for its own job type (`ContractOptions.retention`).
 *
 * Defaults (see docs/retention.md for the reasoning): Succeeded and Deleted kept 1 day, Failed kept 7
 * days, no count limit; tombstones kept 7 days after the prune; the pruner runs every 30 seconds, 500
 * rows a batch.
 *
 * @since 1.1.0
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Result from "effect/Result"
import * as InvalidArgument from "../error/InvalidArgument.js"
import type { JobState } from "./JobState.js"

/**
 * A state a job ends in, whose rows retention removes.
 *
 * @since 1.1.0
 * @category models
 */
export type TerminalState = Extract<JobState, "Succeeded" | "Failed" | "Deleted">

/**
 * The terminal states, in the order plans list them.
 *
 * @since 1.1.0
 * @category models
 */
export const terminal: ReadonlyArray<TerminalState> = ["Succeeded", "Failed", "Deleted"]

/**
 * How long and how many finished rows of one state to keep. A row goes when it finished more than
 * `maxAge` ago (`Duration.infinity`: never by age), or when more than `maxCount` newer rows of its job
 * type are in the same state (no `maxCount`: no count limit). The finish time is the row's last write.
 *
 * @since 1.1.0
 * @category models
 */
export interface StateRetention {
  readonly maxAge?: Duration.Input | undefined
  readonly maxCount?: number | undefined
}

/**
 * A contract's override of the worker's retention, for its job type only: each given state replaces
 * the worker's setting of that state (both fields: a state given as `{ maxAge: "1 hour" }` has no
 * count limit, whatever the worker's says). `deleteOnSuccess: true` removes its Succeeded rows at the
 * next prune (`succeeded: { maxAge: 0 }`).
 *
 * @since 1.1.0
 * @category models
 */
export interface RetentionOverride {
  readonly succeeded?: StateRetention | undefined
  readonly failed?: StateRetention | undefined
  readonly deleted?: StateRetention | undefined
  readonly deleteOnSuccess?: boolean | undefined
}

/**
 * The worker's retention policy (every field optional; see the module's defaults).
 *
 * @since 1.1.0
 * @category models
 */
export interface RetentionOptions extends RetentionOverride {
  /**
   * How long a pruned job's tombstone is kept (default 7 days): meanwhile `JobStore.get` fails with
   * `JobExpired` for its id; after that the id is not found. `0` keeps none.
   */
  readonly tombstones?: Duration.Input | undefined
  /** How often the pruner runs (default 30 seconds); each run prunes in batches until nothing expired is left. */
  readonly interval?: Duration.Input | undefined
  /** Rows removed per batch, each batch its own short transaction (default 500, at most 10,000). */
  readonly batchSize?: number | undefined
}

/**
 * One state's resolved setting: milliseconds (`null`: kept forever by age) and count (`null`: no limit).
 *
 * @since 1.1.0
 * @category models
 */
export interface StatePlan {
  readonly maxAgeMs: number | null
  readonly maxCount: number | null
}

/**
 * Every terminal state's setting.
 *
 * @since 1.1.0
 * @category models
 */
export type StatePlans = Readonly<Record<TerminalState, StatePlan>>

/**
 * What one prune applies: the worker's settings, the overrides of the job types whose contracts carry
 * one, and the tombstones' age.
 *
 * @since 1.1.0
 * @category models
 */
export interface RetentionPlan {
  readonly defaults: StatePlans
  readonly overrides: ReadonlyMap<string, StatePlans>
  /** How long tombstones are kept (ms; {@link FOREVER_MS}: never removed). */
  readonly tombstoneMs: number
  /** Rows per batch. */
  readonly batchSize: number
}

/** @since 1.1.0 */
export const DEFAULT_SUCCEEDED = "1 day"
/** @since 1.1.0 */
export const DEFAULT_DELETED = "1 day"
/** @since 1.1.0 */
export const DEFAULT_FAILED = "7 days"
/** @since 1.1.0 */
export const DEFAULT_TOMBSTONES = "7 days"
/** @since 1.1.0 */
export const DEFAULT_INTERVAL = "30 seconds"
/** @since 1.1.0 */
export const DEFAULT_BATCH = 500
/** @since 1.1.0 */
export const MAX_BATCH = 10_000

/** An age from which a setting means forever (100 years): beyond the range date arithmetic keeps exact. */
export const FOREVER_MS = 100 * 365.25 * 86_400_000

/**
 * How far back the dashboard's per-key figures look (its longest window, 24 h): rows pruned younger
 * than this are folded into the per-key history first, so the figures do not drop.
 *
 * @since 1.1.0
 */
export const HISTORY_MS = 86_400_000

/**
 * The per-key history keeps an event by the end of its second while it is younger than this (the
 * dashboard's shortest window, 5 minutes) when it is folded, else by the end of its minute: a window
 * counts a pruned job as long as the job's own time is inside it, and up to a second (5-minute window)
 * or a minute (hour and day windows) longer — figures never drop when rows go, and may lead by that much
 * at a window's edge; the history holds at most one row per key and minute for events older than 5 minutes.
 *
 * @since 1.1.0
 */
export const FINE_MS = 300_000

/** The history bucket (its end) of an event at `at` folded at `now` (see {@link FINE_MS}). */
export const historyBucket = (at: number, now: number): number =>
  at >= now - FINE_MS ? at - (at % 1000) + 1000 : at - (at % 60_000) + 60_000

/**
 * A retention setting that cannot be honoured: `message` names where, the field, the rule and the value.
 *
 * @since 1.1.0
 * @category errors
 */
export type InvalidRetention = InvalidArgument.InvalidArgument

const durationMs = (entry: string, field: string, input: unknown): Result.Result<number, InvalidArgument.InvalidArgument> => {
  const bad = () => Result.fail(InvalidArgument.make(entry, field, input, "must be a duration >= 0 (e.g. \"1 day\", 0, Duration.infinity)"))
  if (input === null || (typeof input !== "string" && typeof input !== "number" && typeof input !== "object" && typeof input !== "bigint")) return bad()
  let d: Duration.Duration | undefined
  try {
    d = Duration.fromInputUnsafe(input as Duration.Input)
  } catch {
    return bad()
  }
  const ms = Duration.toMillis(d)
  if (Number.isNaN(ms) || ms < 0) return bad()
  return Result.succeed(ms)
}

const countOf = (entry: string, field: string, input: unknown): Result.Result<number | null, InvalidArgument.InvalidArgument> =>
  input === undefined
    ? Result.succeed(null)
    : typeof input === "number" && Number.isSafeInteger(input) && input >= 0 && input <= 2_147_483_647
      ? Result.succeed(input)
      : Result.fail(InvalidArgument.make(entry, field, input, "must be a whole number 0..2147483647"))

const stateOf = (
  entry: string,
  name: string,
  given: StateRetention | undefined,
  fallback: StatePlan
): Result.Result<StatePlan, InvalidArgument.InvalidArgument> => {
  if (given === undefined) return Result.succeed(fallback)
  if (typeof given !== "object" || given === null) return Result.fail(InvalidArgument.make(entry, name, given, "must be { maxAge?, maxCount? }"))
  return Result.gen(function* () {
    const age = given.maxAge === undefined ? null : yield* durationMs(entry, `${name}.maxAge`, given.maxAge)
    const count = yield* countOf(entry, `${name}.maxCount`, given.maxCount)
    return { maxAgeMs: age === null || age >= FOREVER_MS ? null : age, maxCount: count }
  })
}

const plans = (entry: string, o: RetentionOverride, base: StatePlans): Result.Result<StatePlans, InvalidArgument.InvalidArgument> =>
  Result.gen(function* () {
    if (o.deleteOnSuccess !== undefined && typeof o.deleteOnSuccess !== "boolean") {
      return yield* Result.fail(InvalidArgument.make(entry, "deleteOnSuccess", o.deleteOnSuccess, "must be a boolean"))
    }
    const succeeded = yield* stateOf(entry, "succeeded", o.succeeded, base.Succeeded)
    return {
      Succeeded: o.deleteOnSuccess === true ? { maxAgeMs: 0, maxCount: succeeded.maxCount } : succeeded,
      Failed: yield* stateOf(entry, "failed", o.failed, base.Failed),
      Deleted: yield* stateOf(entry, "deleted", o.deleted, base.Deleted)
    }
  })

/**
 * The defaults: Succeeded and Deleted 1 day, Failed 7 days, no count limit.
 *
 * @since 1.1.0
 */
export const defaultPlans: StatePlans = {
  Succeeded: { maxAgeMs: Duration.toMillis(Duration.fromInputUnsafe(DEFAULT_SUCCEEDED)), maxCount: null },
  Failed: { maxAgeMs: Duration.toMillis(Duration.fromInputUnsafe(DEFAULT_FAILED)), maxCount: null },
  Deleted: { maxAgeMs: Duration.toMillis(Duration.fromInputUnsafe(DEFAULT_DELETED)), maxCount: null }
}

/**
 * A contract's override checked (`entry` names the call for the error), as the states it sets.
 *
 * @since 1.1.0
 * @category validation
 */
export const checkOverride = (entry: string, o: RetentionOverride): Result.Result<RetentionOverride, InvalidArgument.InvalidArgument> => {
  if (typeof o !== "object" || o === null) return Result.fail(InvalidArgument.make(entry, "retention", o, "must be an object"))
  return Result.map(plans(entry, o, defaultPlans), () => o)
}

/** A worker's resolved retention: the plan and the pruner's interval. */
export interface Resolved {
  readonly plan: RetentionPlan
  readonly intervalMs: number
}

/**
 * Resolves the worker's options and the contracts' overrides (by job type) into a plan, or the first
 * setting that cannot be honoured.
 *
 * @since 1.1.0
 * @category constructors
 */
export const resolve = (
  options: RetentionOptions,
  overrides: ReadonlyArray<readonly [type: string, RetentionOverride]>,
  entry = "Worker.make"
): Result.Result<Resolved, InvalidArgument.InvalidArgument> =>
  Result.gen(function* () {
    if (typeof options !== "object" || options === null) return yield* Result.fail(InvalidArgument.make(entry, "retention", options, "must be an object or false"))
    const at = `${entry} retention`
    const defaults = yield* plans(at, options, defaultPlans)
    const tombstoneMs = yield* durationMs(at, "tombstones", options.tombstones ?? DEFAULT_TOMBSTONES)
    const intervalMs = yield* durationMs(at, "interval", options.interval ?? DEFAULT_INTERVAL)
    if (intervalMs === 0 || intervalMs === Infinity) {
      return yield* Result.fail(InvalidArgument.make(at, "interval", options.interval, "must be a finite duration > 0"))
    }
    const batch = options.batchSize ?? DEFAULT_BATCH
    if (!(typeof batch === "number" && Number.isSafeInteger(batch) && batch >= 1 && batch <= MAX_BATCH)) {
      return yield* Result.fail(InvalidArgument.make(at, "batchSize", batch, `must be a whole number 1..${MAX_BATCH}`))
    }
    const byType = new Map<string, StatePlans>()
    for (const [type, o] of overrides) byType.set(type, yield* plans(`contract '${type}' retention`, o, defaults))
    return { plan: { defaults, overrides: byType, tombstoneMs: Math.min(tombstoneMs, FOREVER_MS), batchSize: batch }, intervalMs }
  })

/** The setting of `state` for rows of `type` under `plan`. */
export const planFor = (plan: RetentionPlan, type: string, state: TerminalState): StatePlan => (plan.overrides.get(type) ?? plan.defaults)[state]

/**
 * A job that was removed by retention: it existed, ended `state` at `finishedAt`, and was pruned at
 * `prunedAt`. `JobStore.get` fails with it while the job's tombstone is kept
 * (`RetentionOptions.tombstones`); after that the id is simply not found.
 *
 * @since 1.1.0
 * @category errors
 */
export class JobExpired extends Data.TaggedError("JobExpired")<{
  readonly id: string
  readonly type: string
  readonly state: TerminalState
  readonly finishedAt: Date
  readonly prunedAt: Date
}> {
  override get message(): string {
    return `Job ${this.id} (${this.type}) expired: it ended ${this.state} at ${this.finishedAt.toISOString()} and was removed by retention at ${this.prunedAt.toISOString()}`
  }
}

/**
 * What one prune batch did: whether it ran (false: another process was pruning), the rows removed per
 * state, the tombstones and per-key history rows removed, and whether a full batch was removed (more
 * may be expired).
 *
 * @since 1.1.0
 * @category models
 */
export interface PruneResult {
  readonly ran: boolean
  readonly pruned: Readonly<Record<TerminalState, number>>
  readonly tombstones: number
  readonly full: boolean
}

/** The number of rows a result removed. */
export const total = (r: PruneResult): number => r.pruned.Succeeded + r.pruned.Failed + r.pruned.Deleted

/** A result of a batch that did not run. */
export const busy: PruneResult = { ran: false, pruned: { Succeeded: 0, Failed: 0, Deleted: 0 }, tombstones: 0, full: false }
