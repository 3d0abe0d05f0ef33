/**
 * Recurring (cron) registrations, parsed with `effect/Cron` in UTC. Register them with the handlers
 * (`Registry.layer({ handlers, recurring })` or `Warp.layer({ recurring })`); the scheduler fires them.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/job/Recurring.js"

/**
 * A recurring registration: fire `contract` with `payload` on every `cron` tick.
 *
 * @since 0.1.0
 * @category models
 */
export type Recurring<A = any> = internal.Recurring<A>

/**
 * A recurring declaration that cannot fire (blank id, unparsable cron expression).
 *
 * @since 0.1.0
 * @category errors
 */
export const InvalidRecurring = internal.InvalidRecurring

/**
 * A recurring declaration that cannot fire (blank id, unparsable cron expression).
 *
 * @since 0.1.0
 * @category errors
 */
export type InvalidRecurring = internal.InvalidRecurring

/**
 * A recurring registration: `Recurring.make("nightly-report", Report, "0 3 * * *", { kind: "daily" })`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = internal.make
