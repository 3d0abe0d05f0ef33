/**
 * @since 0.1.0
 */
import * as Data from "effect/Data"

/**
 * A policy declaration or enqueue-time parameter that no execution path can honour
 * (a `Semaphore` limit of 0, an empty key, a `Total` timeout on a handler, two
 * policies of one family on one declaration site, ...).
 *
 * Raised synchronously by declaration constructors (a declaration is module-level code, like an
 * attribute) and returned in the error channel by `Publisher` when carried by `JobParameters`.
 */
export class InvalidPolicy extends Data.TaggedError("InvalidPolicy")<{
  readonly family: string
  readonly message: string
}> {}
