/**
 * The immutable builder of explicit enqueue-time metadata. Only what it sets explicitly is stored at
 * publish — nothing else is stamped before the first attempt.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Result from "effect/Result"
import type { ConcurrencyDraft } from "../concurrency/Concurrency.js"
import type { InvalidArgument } from "../error/InvalidArgument.js"
import * as Priority from "../job/Priority.js"
import * as Declaration from "../policy/Declaration.js"
import { InvalidPolicy } from "../policy/InvalidPolicy.js"
import type { FamilyName } from "../policy/PolicyFamily.js"
import type { ConcurrencyMode, TimeoutScope, TotalCap } from "../policy/PolicyValues.js"
import { type RetryOptions, retryValue } from "../policy/Policies.js"
import { call, checkFairMode, checkRequeueMode } from "../policy/PolicyValues.js"

/** A typed accessor of one metadata slot, editable through a mutable draft. */
export interface MetadataAccessor<K extends FamilyName, D> {
  readonly family: K
  readonly draft: () => D
  readonly build: (draft: D) => Result.Result<Declaration.Declaration<K>, InvalidPolicy>
}

/**
 * The options of `withMutex` / `withSemaphore` (their 4th argument, in place of a bare total cap).
 *
 * @since 0.3.0
 * @category models
 */
export interface ConcurrencyParameterOptions {
  /** A total cap over a group of keys. */
  readonly total?: TotalCap | undefined
  /** Opt-in weighted fair share: a finite number > 0 (see `ConcurrencyOptions.weight`). */
  readonly weight?: number | undefined
  /**
   * Opt-in, mode `Wait` only: `false` leaves the job unclaimed while its key is full, instead of
   * requeueing it (see `ConcurrencyOptions.requeue`).
   *
   * @since 1.1.0
   */
  readonly requeue?: boolean | undefined
}

/** A bare total cap (`{ group, limit }`, the 4th argument before 0.3.0) or options. */
const splitOptions = (o: TotalCap | ConcurrencyParameterOptions | undefined): ConcurrencyParameterOptions =>
  o === undefined ? {} : typeof o === "object" && o !== null && ("group" in o || "limit" in o) ? { total: o as TotalCap } : (o as ConcurrencyParameterOptions)

/** Explicit enqueue-time metadata: one declaration per family, a priority, or the first invalid input. */
export class JobParameters {
  private constructor(
    /** The explicit entries, by family. */
    readonly entries: ReadonlyMap<FamilyName, Declaration.Declaration>,
    /** The first invalid input given to the builder; `Publisher` fails with it. */
    readonly error: InvalidPolicy | InvalidArgument | undefined,
    /**
     * The explicit priority (`withPriority`), if any: it wins over the handler's and the contract's.
     *
     * @since 1.1.0
     */
    readonly priority?: number | undefined
  ) {}

  /** Parameters with nothing set. */
  static make(): JobParameters {
    return new JobParameters(new Map(), undefined)
  }

  private with(d: Result.Result<Declaration.Declaration, InvalidPolicy>): JobParameters {
    if (this.error !== undefined) return this
    if (Result.isFailure(d)) return new JobParameters(this.entries, d.failure, this.priority)
    const next = new Map(this.entries)
    next.set(d.success.family, d.success)
    return new JobParameters(next, undefined, this.priority)
  }

  /**
   * The job's priority: an integer in [-32768, 32767]; higher runs first (default 0, or the handler's
   * or contract's `priority`). Anything else is the builder's first invalid input, an `InvalidArgument`
   * naming `priority`.
   *
   * @since 1.1.0
   */
  withPriority(priority: number): JobParameters {
    if (this.error !== undefined) return this
    const e = Priority.check("JobParameters.withPriority", priority)
    return new JobParameters(this.entries, e, e === undefined ? priority : this.priority)
  }

  /**
   * At most one job of `key` at once (mode default Skip). The 4th argument: a total cap over a group of
   * keys (`{ group, limit }`), or options `{ total?, weight? }` (`weight`: opt-in weighted fair share,
   * see `ConcurrencyOptions.weight`).
   */
  withMutex(key: string, mode: ConcurrencyMode = "Skip", options?: TotalCap | ConcurrencyParameterOptions): JobParameters {
    return this.concurrency("JobParameters.withMutex", [key, mode], { key, limit: 1, mode }, options)
  }

  /**
   * At most `limit` jobs of `key` at once (mode default Wait); `limit` must be an integer >= 1. The 4th
   * argument: a total cap (`{ group, limit }`: also at most `total.limit` jobs of all the keys of its
   * group), or options `{ total?, weight? }` (`weight`: see `ConcurrencyOptions.weight`).
   */
  withSemaphore(key: string, limit: number, mode: ConcurrencyMode = "Wait", options?: TotalCap | ConcurrencyParameterOptions): JobParameters {
    return this.concurrency("JobParameters.withSemaphore", [key, limit, mode], { key, limit, mode }, options)
  }

  private concurrency(
    name: string,
    args: ReadonlyArray<unknown>,
    input: { readonly key: string; readonly limit: number; readonly mode: ConcurrencyMode },
    options: TotalCap | ConcurrencyParameterOptions | undefined
  ): JobParameters {
    const { requeue, total, weight } = splitOptions(options)
    const entry = options === undefined ? call(name, ...args) : call(name, ...args, options)
    const d = Declaration.makeEither(
      "concurrency",
      { ...input, ...(total === undefined ? {} : { total }), ...(weight === undefined ? {} : { weight }), ...(requeue === undefined ? {} : { requeue }) },
      "anywhere",
      entry
    )
    const refused = Result.isSuccess(d) ? (checkFairMode(entry, input.mode, weight) ?? checkRequeueMode(entry, input.mode, requeue)) : undefined
    return this.with(refused === undefined ? d : Result.fail(refused))
  }

  /** Up to `maxAttempts` attempts with exponential backoff. */
  withRetry(maxAttempts: number, options?: RetryOptions): JobParameters {
    return this.with(retryValue(maxAttempts, options))
  }

  /** A per-attempt timeout, or (`scope: "Total"`) a deadline from this enqueue, stamped now. */
  withTimeout(duration: Duration.Input, scope: TimeoutScope = "PerAttempt"): JobParameters {
    return this.with(Declaration.makeEither("timeout", { scope, durationMs: Duration.toMillis(duration) }, "anywhere", call("JobParameters.withTimeout", duration, scope)))
  }

  /** At most `limit` starts of `key` per `window`. */
  withRateLimit(key: string, limit: number, window: Duration.Input): JobParameters {
    return this.with(Declaration.makeEither("rateLimit", { key, limit, windowMs: Duration.toMillis(window) }, "anywhere", call("JobParameters.withRateLimit", key, limit, window)))
  }

  /** Edits one slot through its typed accessor, e.g. `configure(ConcurrencyMetadata, m => { m.key = "k" })`. */
  configure<K extends FamilyName, D>(accessor: MetadataAccessor<K, D>, f: (draft: D) => void): JobParameters {
    const draft = accessor.draft()
    f(draft)
    return this.with(accessor.build(draft))
  }
}

/** @internal re-export for the accessor type of concurrency. */
export type { ConcurrencyDraft }
