/**
 * Declarations for the retry, timeout, rate-limit and circuit-breaker families.
 * (Concurrency lives in `concurrency/Concurrency.ts`.)
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Declaration from "./Declaration.js"
import { call, type TimeoutScope } from "./PolicyValues.js"

/** Options of {@link Retry}. */
export interface RetryOptions {
  /** Delay before the second attempt (default 1 second). */
  readonly initialDelay?: Duration.Input
  /** Multiplier applied per further attempt (default 2). */
  readonly factor?: number
  /** Upper bound of one delay (default 1 hour). */
  readonly maxDelay?: Duration.Input
}

/**
 * A duration in milliseconds, a negative one read as 0 — as Effect 3's `Duration` did (Effect 4 keeps
 * the sign, and a negative value would then be refused with another number in the message).
 */
const millisOf = (d: Duration.Input): number => {
  const ms = Duration.toMillis(d)
  return ms < 0 ? 0 : ms
}

const retryFields = (maxAttempts: number, o?: RetryOptions) => ({
  maxAttempts,
  initialDelayMs: millisOf(o?.initialDelay ?? "1 second"),
  factor: o?.factor ?? 2,
  maxDelayMs: millisOf(o?.maxDelay ?? "1 hour")
})

/** Up to `maxAttempts` attempts in total; a failed attempt is rescheduled with exponential backoff. */
export const Retry = (maxAttempts: number, options?: RetryOptions): Declaration.Declaration<"retry", "anywhere"> =>
  Declaration.make("retry", retryFields(maxAttempts, options), "anywhere", call("Retry", maxAttempts, options))

/** @internal */
export const retryValue = (maxAttempts: number, options?: RetryOptions, entry = call("JobParameters.withRetry", maxAttempts, options)) =>
  Declaration.makeEither("retry", retryFields(maxAttempts, options), "anywhere", entry)

/**
 * A timeout. `PerAttempt` (default) interrupts one handler run; `Total` is a wall-clock deadline from
 * enqueue, stamped at publish — so it is accepted on a contract or at enqueue, never on a handler
 * (the handler's `policy` type rejects it).
 */
export function Timeout(duration: Duration.Input, options: { readonly scope: "Total" }): Declaration.Declaration<"timeout", "publishOnly">
export function Timeout(duration: Duration.Input, options?: { readonly scope?: "PerAttempt" }): Declaration.Declaration<"timeout", "anywhere">
export function Timeout(duration: Duration.Input, options?: { readonly scope?: TimeoutScope }): Declaration.Declaration<"timeout"> {
  const scope = options?.scope ?? "PerAttempt"
  return Declaration.make("timeout", { scope, durationMs: millisOf(duration) }, scope === "Total" ? "publishOnly" : "anywhere", call("Timeout", duration, options))
}

/** At most `limit` starts of jobs sharing `key` per `window`, across all workers; surplus is requeued to the next window. */
export const RateLimit = (key: string, limit: number, window: Duration.Input): Declaration.Declaration<"rateLimit", "anywhere"> =>
  Declaration.make("rateLimit", { key, limit, windowMs: millisOf(window) }, "anywhere", call("RateLimit", key, limit, window))

/** After `threshold` consecutive failures in `group`, jobs of the group are requeued until `cooldown` has passed. */
export const CircuitBreaker = (group: string, threshold: number, cooldown: Duration.Input): Declaration.Declaration<"circuitBreaker", "anywhere"> =>
  Declaration.make("circuitBreaker", { group, threshold, cooldownMs: millisOf(cooldown) }, "anywhere", call("CircuitBreaker", group, threshold, cooldown))
