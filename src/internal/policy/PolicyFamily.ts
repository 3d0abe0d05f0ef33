/**
 * One mechanism for every policy family: each family names its metadata slot, its persisted
 * schema and the rungs of the resolution chain it has.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import {
  CircuitBreakerPolicy,
  ConcurrencyPolicy,
  RateLimitPolicy,
  RetryPolicy,
  TimeoutPolicy
} from "./PolicyValues.js"

/** The four rungs of the resolution chain, highest first. */
export type Rung = "enqueue" | "handler" | "contract" | "global"

/** The order in which rungs are consulted. */
export const rungOrder: ReadonlyArray<Rung> = ["enqueue", "handler", "contract", "global"]

/** A policy family: a metadata slot, its schema, and which rungs it has. */
export interface PolicyFamily<K extends string = string, A = unknown> {
  readonly name: K
  readonly schema: Schema.Codec<A, any>
  readonly rungs: ReadonlySet<Rung>
}

const family = <K extends string, A>(name: K, schema: Schema.Codec<A, any>, rungs: ReadonlyArray<Rung>): PolicyFamily<K, A> => ({
  name,
  schema,
  rungs: new Set(rungs)
})

/** Concurrency (`Mutex` / `Semaphore`): no global rung — a keyless policy is not a policy. */
export const concurrency = family("concurrency", ConcurrencyPolicy, ["enqueue", "handler", "contract"])
/** Retry: every rung. */
export const retry = family("retry", RetryPolicy, ["enqueue", "handler", "contract", "global"])
/** Timeout: every rung (a `Total` scope is further restricted to enqueue and contract). */
export const timeout = family("timeout", TimeoutPolicy, ["enqueue", "handler", "contract", "global"])
/** Rate limit: no global rung. */
export const rateLimit = family("rateLimit", RateLimitPolicy, ["enqueue", "handler", "contract"])
/** Circuit breaker: no enqueue rung — its threshold describes a shared dependency group, not one job. */
export const circuitBreaker = family("circuitBreaker", CircuitBreakerPolicy, ["handler", "contract", "global"])

/** Every built-in family, keyed by its metadata slot. */
export const families = { concurrency, retry, timeout, rateLimit, circuitBreaker } as const

/** The name of a metadata slot. */
export type FamilyName = keyof typeof families

/** The value type stored in a family's slot. */
export type FamilyValue<K extends FamilyName> = (typeof families)[K] extends PolicyFamily<any, infer A> ? A : never

/** One resolved value per family (absent = no policy of that family). */
export type Policies = { readonly [K in FamilyName]?: FamilyValue<K> }

/** All family names, in a stable order. */
export const familyNames: ReadonlyArray<FamilyName> = Object.keys(families) as Array<FamilyName>
