/**
 * The pipeline: behaviors wrapped around the handler, outermost first. A behavior receives the
 * attempt and the rest of the pipeline (`next`) and returns the attempt's typed `Outcome`; it may
 * short-circuit (not call `next`), hold resources in the attempt's `Scope`, or map the outcome.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Attempt } from "./Attempt.js"
import type { Outcome } from "./Outcome.js"

/** One pipeline behavior, with its own requirements already provided. */
export interface Behavior {
  readonly name: string
  readonly wrap: (attempt: Attempt, next: Effect.Effect<Outcome, never, Scope.Scope>) => Effect.Effect<Outcome, never, Scope.Scope>
}

/** Composes behaviors around `inner`, the first behavior outermost. */
export const compose = (
  behaviors: ReadonlyArray<Behavior>,
  attempt: Attempt,
  inner: Effect.Effect<Outcome, never, Scope.Scope>
): Effect.Effect<Outcome, never, Scope.Scope> => behaviors.reduceRight((next, b) => b.wrap(attempt, next), inner)

/**
 * A service contributing one behavior to the worker's pipeline. Addons (concurrency, rate limit,
 * circuit breaker) provide such a service from their Layer; without the Layer, the behavior is absent
 * and the worker never touches the addon.
 */
export interface BehaviorProvider {
  readonly behavior: Behavior
}

/** Slot of the concurrency addon's behavior (provided by `Concurrency.layer`). */
export class ConcurrencyAddon extends Context.Tag("warp/addon/Concurrency")<ConcurrencyAddon, BehaviorProvider>() {}
/** Slot of the rate-limit addon's behavior. */
export class RateLimitAddon extends Context.Tag("warp/addon/RateLimit")<RateLimitAddon, BehaviorProvider>() {}
/** Slot of the circuit-breaker addon's behavior. */
export class CircuitBreakerAddon extends Context.Tag("warp/addon/CircuitBreaker")<CircuitBreakerAddon, BehaviorProvider>() {}

/**
 * Addon slots in pipeline order, outermost first. The rate limiter sits innermost, so a start is
 * counted only for a job that the concurrency gate and the circuit breaker let through.
 */
export const addonSlots: ReadonlyArray<Context.Tag<any, BehaviorProvider>> = [ConcurrencyAddon, CircuitBreakerAddon, RateLimitAddon]
