/**
 * Sagas: handlers whose steps of one correlation never run at the same time (serialized on the
 * store's own locks). Sagas are policy-exempt.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/job/Saga.js"

/**
 * What a saga step asks for next.
 *
 * @since 0.1.0
 * @category models
 */
export type SagaStep = internal.SagaStep

/**
 * Constructors of {@link SagaStep}.
 *
 * @since 0.1.0
 * @category constructors
 */
export const SagaStep = internal.SagaStep

/**
 * A saga handler. Its type has no `policy` field.
 *
 * @since 0.1.0
 * @category models
 */
export type SagaHandler<A = any, E = any, R = any> = internal.SagaHandler<A, E, R>

/**
 * Builds a saga handler.
 *
 * @since 0.1.0
 * @category constructors
 */
export const saga = internal.saga
