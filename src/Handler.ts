/**
 * Handlers: the code that runs a contract, built by typed constructors. Only job and message handlers
 * accept a `policy` option.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/job/Handler.js"

/**
 * What a handler learns about the attempt running it.
 *
 * @since 0.1.0
 * @category models
 */
export type AttemptInfo = internal.AttemptInfo

/**
 * Options of job and message handlers (`policy`). `Total` timeouts are not accepted here.
 *
 * @since 0.1.0
 * @category models
 */
export type HandlerOptions = internal.HandlerOptions

/**
 * Runs one job of a job contract.
 *
 * @since 0.1.0
 * @category models
 */
export type JobHandler<A = any, E = any, R = any> = internal.JobHandler<A, E, R>

/**
 * Runs this handler's child of every published message of a message contract.
 *
 * @since 0.1.0
 * @category models
 */
export type MessageHandler<A = any, E = any, R = any> = internal.MessageHandler<A, E, R>

/**
 * Runs a job as a stream drained to completion (no policy).
 *
 * @since 0.1.0
 * @category models
 */
export type StreamHandler<A = any, E = any, R = any> = internal.StreamHandler<A, E, R>

/**
 * Answers an in-memory request in-process (no policy).
 *
 * @since 0.1.0
 * @category models
 */
export type RequestHandler<A = any, B = any, E = any, R = any> = internal.RequestHandler<A, B, E, R>

/**
 * Any handler.
 *
 * @since 0.1.0
 * @category models
 */
export type AnyHandler = internal.AnyHandler

/**
 * The services a handler's effect requires.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements<H> = internal.Requirements<H>

/**
 * A job handler: `Handler.job(SendInvoice, ({ customerId }) => ...)`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const job = internal.job

/**
 * A message handler.
 *
 * @since 0.1.0
 * @category constructors
 */
export const message = internal.message

/**
 * A stream handler.
 *
 * @since 0.1.0
 * @category constructors
 */
export const stream = internal.stream

/**
 * A request handler.
 *
 * @since 0.1.0
 * @category constructors
 */
export const request = internal.request

/**
 * A handler derived from another (same contract, different options or body).
 *
 * @since 0.1.0
 * @category constructors
 */
export const derive = internal.derive
