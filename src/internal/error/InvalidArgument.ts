/**
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Describe from "./Describe.js"

/**
 * An argument of a public call that cannot be honoured or stored unchanged (a contract name with a
 * NUL character, an invalid `Date` given to `schedule`, ...). Nothing was written.
 *
 * `message` names the call, the argument, the rule and the value:
 * `Publisher.schedule: at must be a valid Date, got Invalid Date`.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidArgument extends Data.TaggedError("InvalidArgument")<{
  /** The refused call: `Publisher.schedule`. */
  readonly entry: string
  /** The argument's name: `at`. */
  readonly argument: string
  /** The offending value. */
  readonly value: unknown
  /** The rule it broke. */
  readonly rule: string
  readonly message: string
}> {}

/**
 * Builds an {@link InvalidArgument} with its message.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (entry: string, argument: string, value: unknown, rule: string): InvalidArgument =>
  new InvalidArgument({ entry, argument, value, rule, message: `${entry}: ${argument} ${rule}, got ${Describe.show(value)}` })

/**
 * Why a name (a contract's, a job id) cannot be stored and found again unchanged, or undefined.
 *
 * @since 0.1.0
 * @category validation
 */
export const nameRule = (name: unknown): string | undefined =>
  typeof name !== "string" ? "must be a string" : name.length === 0 ? "must not be empty" : Describe.unstorableText(name)
