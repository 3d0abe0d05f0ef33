/**
 * Job priority: an integer in [-32768, 32767]; higher runs first; 0 by default. Set at enqueue
 * (`JobParameters.withPriority`), on a handler or on a contract (`{ priority }`), resolved at publish
 * (enqueue > the handler registered in the publishing process > contract > 0) and written on the row.
 *
 * @since 1.1.0
 */
import * as InvalidArgument from "../error/InvalidArgument.js"

/** The smallest priority. */
export const MIN = -32768

/** The largest priority. */
export const MAX = 32767

/** Why `value` is not a priority, or undefined. */
export const rule = (value: unknown): string | undefined =>
  typeof value !== "number" || !Number.isInteger(value) || value < MIN || value > MAX
    ? `must be an integer in [${MIN}, ${MAX}]`
    : undefined

/** `value` refused as a priority by `entry`, or undefined when it is one. */
export const check = (entry: string, value: unknown): InvalidArgument.InvalidArgument | undefined => {
  const r = rule(value)
  return r === undefined ? undefined : InvalidArgument.make(entry, "priority", value, r)
}

/** A declared priority (`options.priority`), checked: throws `InvalidArgument` at declaration. */
export const declared = (entry: string, value: number | undefined): { readonly priority?: number } => {
  if (value === undefined) return {}
  const e = check(entry, value)
  if (e !== undefined) throw e
  return { priority: value }
}

/** The audit text of a row's creation entry: the base text, with ` (priority N)` for a non-zero priority. */
export const originText = (base: string, priority: number): string => (priority === 0 ? base : `${base} (priority ${priority})`)
