/**
 * Saga handlers: policy-exempt. A saga serializes on its own per-correlation mutex and manages its
 * own reschedules, so no outer policy (declared or global default) applies to it.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type { JobContract } from "./Contract.js"
import type { AttemptInfo } from "./Handler.js"

/** What a saga step asks for next. */
export type SagaStep = Data.TaggedEnum<{
  Complete: {}
  Reschedule: { readonly after: Duration.Input; readonly reason: string }
}>

/** Constructors of {@link SagaStep}. */
export const SagaStep = Data.taggedEnum<SagaStep>()

/** A saga handler. Its type has no `policy` field: sagas are policy-exempt. */
export interface SagaHandler<A = any, E = any, R = any> {
  readonly _tag: "SagaHandler"
  readonly contract: JobContract<string, A>
  readonly name: string
  /** The correlation id; steps of one correlation never run at the same time. */
  readonly correlate: (payload: A) => string
  readonly run: (payload: A, attempt: AttemptInfo) => Effect.Effect<SagaStep, E, R>
}

/** Builds a saga handler. */
export const saga = <A, E, R>(
  contract: JobContract<string, A>,
  options: {
    readonly correlate: (payload: A) => string
    readonly run: (payload: A, attempt: AttemptInfo) => Effect.Effect<SagaStep, E, R>
  }
): SagaHandler<A, E, R> => ({ _tag: "SagaHandler", contract, name: contract.name, ...options })

/** The semaphore name of one correlation's mutex. */
export const lockName = (type: string, correlationId: string): string => `warp:saga:${type}:${correlationId}`
