/**
 * Recurring jobs: cron-scheduled firings of a job contract. Firings bypass the publish pipeline
 * (no enqueue-time metadata) and still honour the contract's declared policy, because resolution
 * happens at execution.
 *
 * @since 0.1.0
 */
import type { JobContract } from "./Contract.js"

/** A recurring registration: fire `contract` with `payload` on every `cron` tick. */
export interface Recurring<A = any> {
  readonly id: string
  readonly contract: JobContract<string, A>
  readonly cron: string
  readonly payload: A
}

/** Declares a recurring job. `id` must be unique; `cron` is a standard 5- or 6-field expression (UTC). */
export const make = <A>(id: string, contract: JobContract<string, A>, cron: string, payload: A): Recurring<A> => ({
  id,
  contract,
  cron,
  payload
})
