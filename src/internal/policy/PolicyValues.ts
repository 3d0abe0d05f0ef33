/**
 * The persisted shapes of every policy family. These are what a job row's metadata stores.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Describe from "../error/Describe.js"
import { InvalidPolicy } from "./InvalidPolicy.js"

/** Longest accepted concurrency / rate-limit / circuit-breaker key, in UTF-16 code units. */
export const MAX_KEY_LENGTH = 512

/**
 * A key naming a shared constraint: non-blank, at most {@link MAX_KEY_LENGTH} characters, storable
 * unchanged by PostgreSQL (no NUL, no unpaired surrogate). The filters' messages are rules, worded to
 * follow the field's name (`key must not be empty or whitespace`).
 */
export const PolicyKey = Schema.String.check(
  Schema.makeFilter((s: string) => s.trim().length > 0 || "must not be empty or whitespace"),
  Schema.makeFilter((s: string) => s.length <= MAX_KEY_LENGTH || `must be at most ${MAX_KEY_LENGTH} characters`),
  Schema.makeFilter((s: string) => Describe.unstorableText(s) ?? true)
)

/**
 * The largest accepted limit (PostgreSQL `integer`).
 *
 * @since 0.1.0
 * @category validation
 */
export const MAX_LIMIT = 2_147_483_647

/** A whole number >= 1 (and at most {@link MAX_LIMIT}). */
export const PositiveInt = Schema.Number.check(
  Schema.makeFilter((n: number) => (Number.isInteger(n) && n >= 1 && n <= MAX_LIMIT) || `must be an integer >= 1 and at most ${MAX_LIMIT}`)
)

/** What happens when a job is picked up while its concurrency key is full. */
export const ConcurrencyMode = Schema.Literals(["Skip", "Wait", "Fifo", "CancelNewest", "CancelRunning"])
/**
 * `Skip` drops the surplus job (Deleted); `Wait` requeues it (Enqueued, ScheduleTime = now); `Fifo`
 * requeues it like `Wait`, and the store only hands out the oldest jobs of the key, in submission order
 * (created_at, id), while fewer than its limit run — so the gate rarely finds the key full.
 * `CancelNewest` is `Skip` named for what it does (the newcomer is cancelled, same texts). `CancelRunning`
 * is the other way round: a newcomer that finds the key full asks the running holders older than it to
 * stop (their workers interrupt them; they end Deleted with `Cancelled — replaced by newer job {id} of
 * '{key}' (running attempt N interrupted)`) and is requeued like `Wait` to take the freed slot.
 */
export type ConcurrencyMode = typeof ConcurrencyMode.Type

/**
 * A total cap over a group of keys: at most `limit` jobs of all the keys declaring `group` processing at
 * once, held together with each key's own limit.
 */
export const TotalCap = Schema.Struct({ group: PolicyKey, limit: PositiveInt })

/** A total cap over a group of keys (see {@link TotalCap}). */
export type TotalCap = typeof TotalCap.Type

/**
 * A fair-share weight: a finite number > 0. A key of weight 2 is served twice as often as a key of
 * weight 1 while both have jobs waiting (see `ConcurrencyOptions.weight`).
 */
export const FairWeight = Schema.Number.check(
  Schema.makeFilter((n: number) => (Number.isFinite(n) && n > 0) || "must be a finite number > 0")
)

/**
 * The `concurrency` metadata slot: at most `limit` jobs of `key` processing at once, and, with `total`,
 * at most `total.limit` jobs of its group. With `weight`, the key's jobs are claimed in weighted fair
 * share with the other weighted keys (rows stored before `weight` existed decode without it). With
 * `requeue: false`, a job is left unclaimed while its key is full.
 */
export class ConcurrencyPolicy extends Schema.Class<ConcurrencyPolicy>("ConcurrencyPolicy")({
  key: PolicyKey,
  limit: PositiveInt,
  mode: ConcurrencyMode,
  total: Schema.optional(TotalCap),
  weight: Schema.optional(FairWeight),
  /**
   * `false` (opt-in, mode Wait only): the claim leaves the job unclaimed while its key is full, instead
   * of the gate requeueing it (see `ConcurrencyOptions.requeue`). Rows stored without it decode as before.
   */
  requeue: Schema.optional(Schema.Boolean)
}) {}

/** Refuses a weight on a Fifo-mode policy (its order is submission order, not fair share). */
export const checkFairMode = (entry: string, mode: ConcurrencyMode, weight: number | undefined): InvalidPolicy | undefined =>
  weight !== undefined && mode === "Fifo"
    ? new InvalidPolicy({ family: "concurrency", message: `${entry}: a weight cannot be used with mode 'Fifo'`, entry, value: weight })
    : undefined

/** Refuses `requeue: false` on a mode other than Wait (only a Wait job is requeued while its key is full). */
export const checkRequeueMode = (entry: string, mode: ConcurrencyMode, requeue: boolean | undefined): InvalidPolicy | undefined =>
  requeue === false && mode !== "Wait"
    ? new InvalidPolicy({ family: "concurrency", message: `${entry}: requeue: false can only be used with mode 'Wait' (got '${mode}')`, entry, value: requeue })
    : undefined

/**
 * Effect 3's `nonNegative()` and `greaterThanOrEqualTo(min)` (removed or reworded in Effect 4), with
 * the same expectation texts.
 */
const nonNegative = Schema.makeFilter((n: number) => n >= 0, { expected: "a non-negative number" })
const atLeast = (min: number) => Schema.makeFilter((n: number) => n >= min, { expected: `a number greater than or equal to ${min}` })

/** The `retry` metadata slot: up to `maxAttempts` attempts, exponential backoff between them. */
export class RetryPolicy extends Schema.Class<RetryPolicy>("RetryPolicy")({
  maxAttempts: PositiveInt,
  initialDelayMs: Schema.Number.check(nonNegative),
  factor: Schema.Number.check(atLeast(1)),
  maxDelayMs: Schema.Number.check(nonNegative)
}) {}

/** Where a timeout's clock starts: each attempt, or the enqueue (a wall-clock deadline). */
export const TimeoutScope = Schema.Literals(["PerAttempt", "Total"])
/** `PerAttempt` bounds one handler run; `Total` bounds the job from its enqueue. */
export type TimeoutScope = typeof TimeoutScope.Type

/** The `timeout` metadata slot. A `Total` timeout carries the absolute `deadline` stamped at publish. */
export class TimeoutPolicy extends Schema.Class<TimeoutPolicy>("TimeoutPolicy")({
  scope: TimeoutScope,
  durationMs: PositiveInt,
  deadline: Schema.optional(Schema.String)
}) {}

/** The `rateLimit` metadata slot: at most `limit` starts of `key` per `windowMs`. */
export class RateLimitPolicy extends Schema.Class<RateLimitPolicy>("RateLimitPolicy")({
  key: PolicyKey,
  limit: PositiveInt,
  windowMs: PositiveInt
}) {}

/** The `circuitBreaker` metadata slot: `threshold` consecutive failures of `group` open it for `cooldownMs`. */
export class CircuitBreakerPolicy extends Schema.Class<CircuitBreakerPolicy>("CircuitBreakerPolicy")({
  group: PolicyKey,
  threshold: PositiveInt,
  cooldownMs: PositiveInt
}) {}

/**
 * @since 0.1.0
 * @category errors
 *
 * The message of a refused policy input: `Semaphore("payments", 0): limit must be an integer >= 1
 * and at most 2147483647, got 0` — the call as written, the field, the rule, the value.
 */
export const policyMessage = (entry: string, v: Describe.Violation, more = 0): string => {
  const field = v.path.length === 0 ? "the value" : Describe.formatPath("", v.path).replace(/^\./, "")
  const got = !v.found || /\bgot\b/.test(v.rule) ? "" : `, got ${Describe.show(v.value)}`
  return `${entry}: ${field} ${v.rule}${got}${more > 0 ? ` (and ${more} more)` : ""}`
}

/**
 * Validates raw fields against a policy schema, mapping parse errors to {@link InvalidPolicy} whose
 * message names `entry` (the call as written; default `'<family>' policy`), the field, the rule and
 * the offending value; Schema's error stays on `issue`.
 *
 * @since 0.1.0
 * @category validation
 */
export const validate = <A, I>(
  family: string,
  schema: Schema.Codec<A, I>,
  input: unknown,
  entry: string = `'${family}' policy`
): Result.Result<A, InvalidPolicy> =>
  Schema.decodeUnknownResult(schema)(input).pipe(
    Result.mapError((issue) => {
      const vs = Describe.violations(issue, input)
      const first: Describe.Violation = vs[0] ?? { path: [], found: true, value: input, rule: issue.message }
      return new InvalidPolicy({
        family,
        message: policyMessage(entry, first, vs.length - 1),
        entry,
        path: first.path,
        value: first.value,
        rule: first.rule,
        issue
      })
    })
  )

/**
 * A call written for a message: `Semaphore("payments", 0)`.
 *
 * @since 0.1.0
 * @category errors
 */
export const call = (name: string, ...args: ReadonlyArray<unknown>): string =>
  `${name}(${args.filter((a, i) => a !== undefined || i < args.length - 1).map((a) => Describe.show(a, 24)).join(", ")})`
