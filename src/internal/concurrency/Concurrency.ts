/**
 * `Mutex` and `Semaphore`: two spellings of one concurrency policy family.
 * A mutex is a semaphore with one slot; the split keeps intent honest in code.
 *
 * @since 0.1.0
 */
import type { LimitFrom } from "../policy/ComputedLimit.js"
import * as Declaration from "../policy/Declaration.js"
import { InvalidPolicy } from "../policy/InvalidPolicy.js"
import { call, checkFairMode, checkRequeueMode, type ConcurrencyMode, type TotalCap } from "../policy/PolicyValues.js"

export type { LimitFrom } from "../policy/ComputedLimit.js"

export { ConcurrencyMode, ConcurrencyPolicy, TotalCap } from "../policy/PolicyValues.js"

/** Options shared by {@link Mutex} and {@link Semaphore}. */
export interface ConcurrencyOptions {
  /** `Skip`, `Wait` or `Fifo` (strict submission order per key, see {@link ConcurrencyMode}). */
  readonly mode?: ConcurrencyMode
  /**
   * A total cap over a group of keys (`{ group, limit }`): a job runs only when its key has a free slot
   * and its group does too, so at most `limit` jobs of all the keys declaring `group` run at once.
   */
  readonly total?: TotalCap
  /**
   * Opt-in weighted fair share (a finite number > 0): the jobs of weighted keys are claimed in
   * proportion to their keys' weights while several keys have jobs waiting (start-time fair queuing
   * tags, given at enqueue), so a key with a deep backlog cannot starve one with a few jobs. Keys
   * without a weight keep ScheduleTime order. Carried onto the row at publish from a contract or
   * handler declaration, like a Fifo policy. Not with mode `Fifo` (its order is submission order).
   *
   * @since 0.3.0
   */
  readonly weight?: number
  /**
   * Opt-in, beyond the spec, mode `Wait` only: `false` leaves a job unclaimed while its key is full
   * (its key's live holders, counted from the job rows, fill its limit), instead of the spec's
   * mechanism, where a worker picks it up, finds the key full and requeues it (`Requeued — '{key}' full
   * ({N} slots)`, `stats:requeued`). Such jobs then cost no claim and no requeue write while they wait;
   * the trail of a job shows no requeue entry unless two claims raced for the key's last slot (the slot
   * is still what enforces the limit: the loser is requeued as in the spec), and `stats:requeued` no
   * longer measures how often the key was full. Any other mode throws `InvalidPolicy`, as does a
   * computed limit (the claim reads the stamped limit). Default `true`: the spec's behaviour. See
   * docs/claim-admission.md.
   *
   * @since 1.1.0
   */
  readonly requeue?: boolean
}

const totalOf = (options: ConcurrencyOptions | undefined) => ({
  ...(options?.total === undefined ? {} : { total: options.total }),
  ...(options?.weight === undefined ? {} : { weight: options.weight }),
  ...(options?.requeue === undefined ? {} : { requeue: options.requeue })
})

const declare = (input: { key: string; limit: number; mode: ConcurrencyMode }, options: ConcurrencyOptions | undefined, entry: string) => {
  const d = Declaration.make("concurrency", { ...input, ...totalOf(options) }, "anywhere", entry)
  const refused = checkFairMode(entry, input.mode, options?.weight) ?? checkRequeueMode(entry, input.mode, options?.requeue)
  if (refused !== undefined) throw refused
  return d
}

/**
 * At most one job of `key` processing at once, across all workers and processes.
 * Default mode `Skip` (duplicate detection). Throws `InvalidPolicy` for a blank or oversized key.
 *
 * @example
 * const ProcessPayment = Contract.job("ProcessPayment", Schema.Struct({ customerId: Schema.Number }), {
 *   policy: [Mutex("payment-processing")]
 * })
 */
export const Mutex = (key: string, options?: ConcurrencyOptions): Declaration.Declaration<"concurrency", "anywhere"> =>
  declare({ key, limit: 1, mode: options?.mode ?? "Skip" }, options, call("Mutex", key, options))

/**
 * At most `limit` jobs of `key` processing at once, across all workers and processes.
 * Default mode `Wait` ("queue surplus, don't drop"). `limit` must be an integer >= 1;
 * anything else throws `InvalidPolicy` — never a silent clamp.
 *
 * `limit` may also be a function of the job's (decoded) payload, on a contract or handler: it is
 * called once, by the attempt that resolves and stamps the policy, and the number is stamped — every
 * later attempt and the claim read that number. A result that is not an integer >= 1 (NaN, 0, 1.5)
 * or a throw fails the job with a message naming the key and the value. Not with mode `Fifo` (its
 * order is read before any attempt resolves): throws `InvalidPolicy`.
 */
export const Semaphore = <P = any>(
  key: string,
  limit: number | LimitFrom<P>,
  options?: ConcurrencyOptions
): Declaration.Declaration<"concurrency", "anywhere"> => {
  if (typeof limit !== "function") {
    return declare({ key, limit, mode: options?.mode ?? "Wait" }, options, call("Semaphore", key, limit, options))
  }
  const entry = call("Semaphore", key, "<computed>", options)
  if (options?.mode === "Fifo") {
    throw new InvalidPolicy({ family: "concurrency", message: `${entry}: a computed limit cannot be used with mode 'Fifo'`, entry, value: options.mode })
  }
  if (options?.requeue === false) {
    throw new InvalidPolicy({ family: "concurrency", message: `${entry}: a computed limit cannot be used with requeue: false`, entry, value: options.requeue })
  }
  // the limit 1 is a placeholder: resolution replaces it with the computed number before stamping
  const declaration = declare({ key, limit: 1, mode: options?.mode ?? "Wait" }, options, entry)
  return { ...declaration, limitFrom: limit as LimitFrom<unknown> }
}

/**
 * The mutable draft edited by `JobParameters.configure(ConcurrencyMetadata, m => ...)`.
 * `limit` defaults to 1; `mode` defaults to Skip at limit 1 and Wait above it.
 */
export interface ConcurrencyDraft {
  key?: string
  limit?: number
  mode?: ConcurrencyMode
}

/** Typed accessor for the `concurrency` metadata slot, for `JobParameters.configure`. */
export const ConcurrencyMetadata = {
  family: "concurrency" as const,
  draft: (): ConcurrencyDraft => ({}),
  build: (d: ConcurrencyDraft) => {
    const limit = d.limit ?? 1
    return Declaration.makeEither("concurrency", { key: d.key, limit, mode: d.mode ?? (limit === 1 ? "Skip" : "Wait") }, "anywhere", "JobParameters.configure(ConcurrencyMetadata)")
  }
}
