/**
 * Validation of the concurrency page's form input, with messages meant for the person who typed it.
 * The rules are the admin layer's own (`PolicyKey`, `PositiveInt`); the limit manager checks them
 * again before writing.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import { PolicyKey, PositiveInt } from "../policy/PolicyValues.js"

/** A valid limit to write. */
export interface LimitInput {
  readonly key: string
  readonly slots: number
}

/** One problem with one field. */
export interface FieldError {
  readonly field: NameField | "slots"
  readonly message: string
}

/** The name field of a form: a key's override, or a group's (a total cap's). */
export type NameField = "key" | "group"

/** The field's label, as the messages begin. */
export const labelOf = (field: NameField | "slots"): string => (field === "key" ? "Key" : field === "group" ? "Group" : "Slots")

const Input = Schema.Struct({ key: PolicyKey, slots: PositiveInt })

const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()

/**
 * Checks a key (or a group: `field`) alone, for deletes: the same rules as one to save, so no such
 * override can exist otherwise.
 */
export const parseKey = (key: string | undefined, field: NameField = "key"): Result.Result<string, ReadonlyArray<FieldError>> => {
  if (key === undefined || key.trim() === "") return Result.fail([{ field, message: `${labelOf(field)} must not be empty.` }])
  const decoded = Schema.decodeUnknownResult(PolicyKey)(key)
  if (Result.isSuccess(decoded)) return Result.succeed(decoded.success)
  const issue = formatIssue(decoded.failure.issue).issues[0]
  const text = `${labelOf(field)} ${issue?.message ?? "is not valid"}`
  return Result.fail([{ field, message: text.includes("at most") ? `${text} (got ${key.length}).` : `${text}.` }])
}

/**
 * Checks the raw `key` (or group: `field`) and `slots` fields. Slots must be written as a whole number
 * (digits only): "1.5", "1e3", "abc" and "" are refused rather than rounded or coerced.
 */
export const parse = (key: string | undefined, slots: string | undefined, field: NameField = "key"): Result.Result<LimitInput, ReadonlyArray<FieldError>> => {
  const errors: Array<FieldError> = []
  const rawSlots = (slots ?? "").trim()
  const slotsNumber = /^\d{1,10}$/.test(rawSlots) ? Number(rawSlots) : undefined
  if (slotsNumber === undefined) {
    errors.push({ field: "slots", message: `Slots must be a whole number of at least 1 (got "${rawSlots.slice(0, 40)}").` })
  }
  const decoded = Schema.decodeUnknownResult(Input)({ key: key ?? "", slots: slotsNumber ?? 1 }, { errors: "all" })
  if (Result.isFailure(decoded)) {
    for (const issue of formatIssue(decoded.failure.issue).issues) {
      const which = issue.path?.[0] === "slots" ? "slots" : field
      // the rules are worded to follow the field's name ("must not be empty or whitespace")
      const text = `${labelOf(which)} ${issue.message}`
      errors.push({ field: which, message: which !== "slots" && (key ?? "").length > 0 && text.includes("at most") ? `${text} (got ${(key ?? "").length}).` : `${text}.` })
    }
  }
  return errors.length > 0 || Result.isFailure(decoded) ? Result.fail(errors) : Result.succeed(decoded.success)
}
