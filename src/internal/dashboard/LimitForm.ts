/**
 * Validation of the concurrency page's form input, with messages meant for the person who typed it.
 * The rules are the admin layer's own (`PolicyKey`, `PositiveInt`); the limit manager checks them
 * again before writing.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { PolicyKey, PositiveInt } from "../policy/PolicyValues.js"

/** A valid limit to write. */
export interface LimitInput {
  readonly key: string
  readonly slots: number
}

/** One problem with one field. */
export interface FieldError {
  readonly field: "key" | "slots"
  readonly message: string
}

const Input = Schema.Struct({ key: PolicyKey, slots: PositiveInt })

/** Checks a key alone (for deletes): the same rules as a key to save, so no such key can exist otherwise. */
export const parseKey = (key: string | undefined): Either.Either<string, ReadonlyArray<FieldError>> => {
  if (key === undefined || key.trim() === "") return Either.left([{ field: "key", message: "Key must not be empty." }])
  const decoded = Schema.decodeUnknownEither(PolicyKey)(key)
  if (Either.isRight(decoded)) return Either.right(decoded.right)
  const issue = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)[0]
  const text = `Key ${issue?.message ?? "is not valid"}`
  return Either.left([{ field: "key", message: text.includes("at most") ? `${text} (got ${key.length}).` : `${text}.` }])
}

/**
 * Checks the raw `key` and `slots` fields. Slots must be written as a whole number (digits only):
 * "1.5", "1e3", "abc" and "" are refused rather than rounded or coerced.
 */
export const parse = (key: string | undefined, slots: string | undefined): Either.Either<LimitInput, ReadonlyArray<FieldError>> => {
  const errors: Array<FieldError> = []
  const rawSlots = (slots ?? "").trim()
  const slotsNumber = /^\d{1,10}$/.test(rawSlots) ? Number(rawSlots) : undefined
  if (slotsNumber === undefined) {
    errors.push({ field: "slots", message: `Slots must be a whole number of at least 1 (got "${rawSlots.slice(0, 40)}").` })
  }
  const decoded = Schema.decodeUnknownEither(Input)({ key: key ?? "", slots: slotsNumber ?? 1 }, { errors: "all" })
  if (Either.isLeft(decoded)) {
    for (const issue of ParseResult.ArrayFormatter.formatErrorSync(decoded.left)) {
      const field = issue.path[0] === "slots" ? "slots" : "key"
      // the rules are worded to follow the field's name ("must not be empty or whitespace")
      const text = `${field === "key" ? "Key" : "Slots"} ${issue.message}`
      errors.push({ field, message: field === "key" && (key ?? "").length > 0 && text.includes("at most") ? `${text} (got ${(key ?? "").length}).` : `${text}.` })
    }
  }
  return errors.length > 0 || Either.isLeft(decoded) ? Either.left(errors) : Either.right(decoded.right)
}
