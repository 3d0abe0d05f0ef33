/**
 * The pipeline: behaviors wrapped around the handler, outermost first. A behavior receives the
 * attempt and the rest of the pipeline (`next`) and returns the attempt's typed `Outcome`; it may
 * short-circuit (not call `next`), hold resources in the attempt's `Scope`, or map the outcome.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Attempt } from "./Attempt.js"
import type { Outcome } from "../job/Outcome.js"
import type { FamilyName } from "../policy/PolicyFamily.js"
import type { Slot } from "../semaphore/SemaphoreProvider.js"

/** One pipeline behavior, with its own requirements already provided. */
export interface Behavior {
  readonly name: string
  /**
   * Whether this behavior admits the attempt by holding a slot around `next` (the concurrency gate).
   * The worker runs the attempt's finalizing write inside the last such behavior, so the write can
   * release the slot it holds (see `HeldSlot`); the behaviors after it run inside the slot.
   */
  readonly holdsSlot?: boolean
  /**
   * For a behavior that holds a slot: whether another job may run under `slot`, which this behavior
   * admitted an earlier job of the same policy with (slot reuse) — true only if the job would be
   * admitted to that very slot now (an admin override may have lowered the key's limit below it since).
   * Absent: never.
   */
  readonly admitsUnder?: (attempt: Attempt, slot: Slot) => Effect.Effect<boolean>
  readonly wrap: (attempt: Attempt, next: Effect.Effect<Outcome, never, Scope.Scope>) => Effect.Effect<Outcome, never, Scope.Scope>
}

/** Composes behaviors around `inner`, the first behavior outermost. */
export const compose = (
  behaviors: ReadonlyArray<Behavior>,
  attempt: Attempt,
  inner: Effect.Effect<Outcome, never, Scope.Scope>
): Effect.Effect<Outcome, never, Scope.Scope> => behaviors.reduceRight((next, b) => b.wrap(attempt, next), inner)

/**
 * An addon: a behavior for the worker's pipeline, built from the services it names in `R`. Addons are
 * values handed to the worker (`Worker.make({ addons: [Concurrency.addon] })`), so the worker's type
 * shows every service its pipeline needs; an addon not handed over is absent, and the worker never
 * touches its services. `order` places it in the pipeline: lower runs outermost.
 */
export interface Addon<R = never> {
  readonly name: string
  readonly order: number
  /**
   * The policy families this addon enforces. The worker refuses to start when a registered handler or
   * contract declares a family that neither its core (retry, timeout) nor an addon enforces, and fails a
   * job whose enqueue-time policy has one (see `Enforcement`).
   */
  readonly enforces?: ReadonlyArray<FamilyName>
  readonly behavior: Effect.Effect<Behavior, never, R>
}

/** The services an array of addons needs. */
export type AddonServices<A extends ReadonlyArray<Addon<any>>> = A[number] extends infer X ? (X extends Addon<infer R> ? R : never) : never

/** Pipeline order of the built-in addons: the concurrency gate outermost, the rate limiter innermost. */
export const order = { concurrency: 0, circuitBreaker: 10, rateLimit: 20 } as const
