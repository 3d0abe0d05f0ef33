/**
 * Typed errors of publishing.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"

/** A payload that does not match its contract's schema; nothing was inserted. */
export class InvalidPayload extends Data.TaggedError("InvalidPayload")<{
  readonly type: string
  readonly message: string
}> {}
