/**
 * Typed errors of publishing.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type { Details } from "../error/Describe.js"

/**
 * A payload that does not match its contract's schema, or that would not come back unchanged from
 * the job's JSON column (NaN, ±Infinity, a bigint, `undefined` in an array, a `Date` or class
 * instance on the schema's encoded side, a NUL or unpaired surrogate in a string); nothing was
 * inserted.
 *
 * `message` is for people: the entry point, the path, the rule and the value, e.g.
 * `Publisher.enqueue: SendInvoice.customerId: expected a finite number (JSON cannot carry NaN or
 * Infinity), got NaN`. Tools read the fields; `issue` holds Schema's parse error when a schema found
 * the problem.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidPayload extends Data.TaggedError("InvalidPayload")<
  {
    /** The contract's name. */
    readonly type: string
    readonly message: string
  } & Details
> {}
