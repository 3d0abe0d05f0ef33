/**
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type { Details } from "../error/Describe.js"

/**
 * A policy declaration or enqueue-time parameter that no execution path can honour
 * (a `Semaphore` limit of 0, an empty key, a `Total` timeout on a handler, two
 * policies of one family on one declaration site, ...).
 *
 * Raised synchronously by declaration constructors (a declaration is module-level code, like an
 * attribute) and returned in the error channel by `Publisher` when carried by `JobParameters`.
 *
 * `message` is for people: the entry point as called, the field, the rule and the value, e.g.
 * `Semaphore("payments", 0): limit must be an integer >= 1, got 0`. Tools read the fields: `entry`,
 * `path`, `value`, `rule`, and `issue` (Schema's parse error, when a schema found the problem).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidPolicy extends Data.TaggedError("InvalidPolicy")<
  {
    readonly family: string
    readonly message: string
  } & Details
> {}
