/**
 * The immutable builder of explicit enqueue-time metadata. Only what it sets explicitly is stored at
 * publish — nothing else is stamped before the first attempt.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import type { ConcurrencyDraft } from "../concurrency/Concurrency.js"
import * as Declaration from "../policy/Declaration.js"
import { InvalidPolicy } from "../policy/InvalidPolicy.js"
import type { FamilyName } from "../policy/PolicyFamily.js"
import type { ConcurrencyMode, TimeoutScope, TotalCap } from "../policy/PolicyValues.js"
import { type RetryOptions, retryValue } from "../policy/Policies.js"
import { call } from "../policy/PolicyValues.js"

/** A typed accessor of one metadata slot, editable through a mutable draft. */
export interface MetadataAccessor<K extends FamilyName, D> {
  readonly family: K
  readonly draft: () => D
  readonly build: (draft: D) => Either.Either<Declaration.Declaration<K>, InvalidPolicy>
}

/** Explicit enqueue-time metadata: one declaration per family, or the first invalid input. */
export class JobParameters {
  private constructor(
    /** The explicit entries, by family. */
    readonly entries: ReadonlyMap<FamilyName, Declaration.Declaration>,
    /** The first invalid input given to the builder; `Publisher` fails with it. */
    readonly error: InvalidPolicy | undefined
  ) {}

  /** Parameters with nothing set. */
  static make(): JobParameters {
    return new JobParameters(new Map(), undefined)
  }

  private with(d: Either.Either<Declaration.Declaration, InvalidPolicy>): JobParameters {
    if (this.error !== undefined) return this
    if (Either.isLeft(d)) return new JobParameters(this.entries, d.left)
    const next = new Map(this.entries)
    next.set(d.right.family, d.right)
    return new JobParameters(next, undefined)
  }

  /** At most one job of `key` at once (mode default Skip); with `total`, also at most `total.limit` of its group. */
  withMutex(key: string, mode: ConcurrencyMode = "Skip", total?: TotalCap): JobParameters {
    return this.with(
      Declaration.makeEither(
        "concurrency",
        { key, limit: 1, mode, ...(total === undefined ? {} : { total }) },
        "anywhere",
        total === undefined ? call("JobParameters.withMutex", key, mode) : call("JobParameters.withMutex", key, mode, total)
      )
    )
  }

  /**
   * At most `limit` jobs of `key` at once (mode default Wait); `limit` must be an integer >= 1. With
   * `total`, also at most `total.limit` jobs of all the keys of its group.
   */
  withSemaphore(key: string, limit: number, mode: ConcurrencyMode = "Wait", total?: TotalCap): JobParameters {
    return this.with(
      Declaration.makeEither(
        "concurrency",
        { key, limit, mode, ...(total === undefined ? {} : { total }) },
        "anywhere",
        total === undefined ? call("JobParameters.withSemaphore", key, limit, mode) : call("JobParameters.withSemaphore", key, limit, mode, total)
      )
    )
  }

  /** Up to `maxAttempts` attempts with exponential backoff. */
  withRetry(maxAttempts: number, options?: RetryOptions): JobParameters {
    return this.with(retryValue(maxAttempts, options))
  }

  /** A per-attempt timeout, or (`scope: "Total"`) a deadline from this enqueue, stamped now. */
  withTimeout(duration: Duration.DurationInput, scope: TimeoutScope = "PerAttempt"): JobParameters {
    return this.with(Declaration.makeEither("timeout", { scope, durationMs: Duration.toMillis(duration) }, "anywhere", call("JobParameters.withTimeout", duration, scope)))
  }

  /** At most `limit` starts of `key` per `window`. */
  withRateLimit(key: string, limit: number, window: Duration.DurationInput): JobParameters {
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
