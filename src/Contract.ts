/**
 * Contracts: the name and payload schema of a job, a message or a request, and the policies that
 * apply to everything that runs it.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/job/Contract.js"

/**
 * Options of a contract: its `policy` declarations (and, for jobs, the default `queue`).
 *
 * @since 0.1.0
 * @category models
 */
export type ContractOptions = internal.ContractOptions

/**
 * A job contract: one handler runs each published job.
 *
 * @since 0.1.0
 * @category models
 */
export type JobContract<Name extends string = string, A = any, I = any> = internal.JobContract<Name, A, I>

/**
 * A message contract: every handler of the message runs its own child job.
 *
 * @since 0.1.0
 * @category models
 */
export type MessageContract<Name extends string = string, A = any, I = any> = internal.MessageContract<Name, A, I>

/**
 * A request contract: answered in-process by its request handler.
 *
 * @since 0.1.0
 * @category models
 */
export type RequestContract<Name extends string = string, A = any, I = any> = internal.RequestContract<Name, A, I>

/**
 * Any contract.
 *
 * @since 0.1.0
 * @category models
 */
export type AnyContract = internal.AnyContract

/**
 * A job contract: `Contract.job("SendInvoice", Schema.Struct({ ... }), { policy: [Mutex("mailer")] })`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const job = internal.job

/**
 * A message contract (fan-out to every handler registered for it).
 *
 * @since 0.1.0
 * @category constructors
 */
export const message = internal.message

/**
 * A request contract with a response schema.
 *
 * @since 0.1.0
 * @category constructors
 */
export const request = internal.request
