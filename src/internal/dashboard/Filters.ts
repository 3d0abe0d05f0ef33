/**
 * The jobs list's search and filters, read from the URL (so a filtered list can be shared and the
 * pager keeps it) and written back into links. Every field is checked; a bad one is a message for
 * a 400 page, never a store error.
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import * as SchemaTransformation from "effect/SchemaTransformation"
import * as Describe from "../error/Describe.js"
import { JobState } from "../job/JobState.js"
import { MAX_KEY_LENGTH } from "../policy/PolicyValues.js"
import type { JobFilter } from "../store/JobStore.js"

/** The longest text a filter field accepts (ids, types and keys are shorter). */
export const MAX_FIELD_LENGTH = MAX_KEY_LENGTH

/** The filters of the jobs list, as the page and its links carry them. */
export interface Filters {
  readonly id?: string | undefined
  readonly key?: string | undefined
  readonly type?: string | undefined
  /** Exactly this job key (since 1.1.0). */
  readonly jobKey?: string | undefined
  readonly state?: JobState | undefined
  readonly after?: Date | undefined
  readonly before?: Date | undefined
  /**
   * Jobs of this priority or higher.
   *
   * @since 1.1.0
   */
  readonly priority?: number | undefined
}

/** A text field: at most {@link MAX_FIELD_LENGTH} characters, storable (no NUL, no unpaired surrogate). */
const Text = (label: string) =>
  Schema.String.check(
    Schema.makeFilter((s: string) => s.length <= MAX_FIELD_LENGTH || `${label} must be at most ${MAX_FIELD_LENGTH} characters (got ${s.length})`),
    Schema.makeFilter((s: string) => {
      const bad = Describe.unstorableText(s)
      return bad === undefined ? true : `${label} ${bad}`
    })
  )

/** A time: an ISO date ("2026-12-05"), or date and time ("2026-12-05T10:30", UTC unless it says otherwise). */
const Time = (label: string) =>
  Schema.String.pipe(
    Schema.decodeTo(
      Schema.Date,
      SchemaTransformation.transformEffect({
        decode: (s: string) => {
          const ok = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?(?:Z|[+-]\d{2}:\d{2})?)?$/.test(s)
          const iso = s.replace(" ", "T")
          const d = new Date(/(Z|[+-]\d{2}:\d{2})$/.test(iso) || !iso.includes("T") ? iso : `${iso}Z`)
          // a day the month has (Date would roll 2026-02-30 over to March 2)
          const [y, m, day] = s.slice(0, 10).split("-").map(Number) as [number, number, number]
          const real = new Date(Date.UTC(y, m - 1, day)).getUTCDate() === day
          return ok && real && !Number.isNaN(d.getTime())
            ? Effect.succeed(d)
            : Effect.fail(
                new SchemaIssue.InvalidValue({ message: `${label} must be a date like 2026-12-05 or 2026-12-05T10:30 (UTC), got "${s.slice(0, 40)}"` }, s)
              )
        },
        encode: (d: Date) => Effect.succeed(d.toISOString())
      })
    )
  )

/** A priority: a whole number in [-32768, 32767]. */
const Priority = Schema.String.pipe(
  Schema.decodeTo(
    Schema.Number,
    SchemaTransformation.transformEffect({
      decode: (s: string) => {
        const n = Number(s)
        return /^[+-]?\d{1,6}$/.test(s) && n >= -32768 && n <= 32767
          ? Effect.succeed(n)
          : Effect.fail(new SchemaIssue.InvalidValue({ message: `Priority must be a whole number from -32768 to 32767, got "${s.slice(0, 40)}"` }, s))
      },
      encode: (n: number) => Effect.succeed(String(n))
    })
  )
)

const Query = Schema.Struct({
  id: Schema.optional(Text("Id")),
  key: Schema.optional(Text("Key")),
  type: Schema.optional(Text("Type")),
  jobKey: Schema.optional(Text("Job key")),
  state: Schema.optional(
    Schema.String.check(
      Schema.makeFilter(
        (s: string) => (JobState.literals as ReadonlyArray<string>).includes(s) || `There is no job state called "${s.slice(0, 40)}". States: ${JobState.literals.join(", ")}`
      )
    )
  ),
  after: Schema.optional(Time("Created after")),
  before: Schema.optional(Time("Created before")),
  priority: Schema.optional(Priority)
})

const decode = Schema.decodeUnknownResult(Query)

const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()

/** The filter fields' names, in link order. */
export const names = ["id", "key", "type", "jobKey", "state", "after", "before", "priority"] as const

/**
 * Reads the filters from query parameters (an empty field means "not filtered"). Left: what is
 * wrong, for a 400 page.
 */
export const parse = (params: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>): Result.Result<Filters, string> => {
  const input: Record<string, string> = {}
  for (const name of names) {
    const v = params[name]
    if (v === undefined) continue
    if (typeof v !== "string") return Result.fail(`The filter "${name}" is given more than once.`)
    // an empty field is "not filtered"; text is matched as typed, a state or time trimmed
    if (v.trim() === "") continue
    input[name] = name === "id" || name === "key" || name === "type" || name === "jobKey" ? v : v.trim()
  }
  return Result.mapBoth(decode(input, { errors: "first" }), {
    onFailure: (e) => `${formatIssue(e.issue).issues[0]?.message ?? "A filter is not valid"}.`,
    onSuccess: (q) => ({
      id: q.id,
      key: q.key,
      type: q.type,
      ...(q.jobKey === undefined ? {} : { jobKey: q.jobKey }),
      state: q.state as JobState | undefined,
      after: q.after,
      before: q.before,
      priority: q.priority
    })
  })
}

/** The store's filter for these filters. */
export const toStore = (f: Filters): JobFilter => ({
  id: f.id,
  keyPrefix: f.key,
  type: f.type,
  jobKey: f.jobKey,
  state: f.state,
  createdAfter: f.after,
  createdBefore: f.before,
  minPriority: f.priority
})

/** Whether any filter is set. */
export const isFiltered = (f: Filters): boolean => names.some((n) => f[n] !== undefined)

/** How a time filter is written back into a URL and a form field (UTC, to the minute when it has no seconds). */
export const formatTime = (d: Date): string => {
  const iso = d.toISOString()
  return iso.endsWith(":00.000Z") ? iso.slice(0, 16) : iso.endsWith(".000Z") ? iso.slice(0, 19) : iso.slice(0, 23)
}

/** The query parameters of these filters (and `extra`), for links and hidden form fields. */
export const toParams = (f: Filters, extra: Record<string, string> = {}): URLSearchParams => {
  const q = new URLSearchParams()
  if (f.id !== undefined) q.set("id", f.id)
  if (f.key !== undefined) q.set("key", f.key)
  if (f.type !== undefined) q.set("type", f.type)
  if (f.jobKey !== undefined) q.set("jobKey", f.jobKey)
  if (f.state !== undefined) q.set("state", f.state)
  if (f.after !== undefined) q.set("after", formatTime(f.after))
  if (f.before !== undefined) q.set("before", formatTime(f.before))
  if (f.priority !== undefined) q.set("priority", String(f.priority))
  for (const [k, v] of Object.entries(extra)) q.set(k, v)
  return q
}

/** The jobs list's href for these filters (page 1 unless given). */
export const href = (prefix: string, f: Filters, page = 1): string => {
  const q = toParams(f, page > 1 ? { page: String(page) } : {})
  const s = q.toString()
  return `${prefix}/jobs${s === "" ? "" : `?${s}`}`
}

/** The filters in words, for a confirmation ("type is ChargeCard · key starts with payment-"). */
export const describe = (f: Filters): string => {
  const parts: Array<string> = []
  if (f.id !== undefined) parts.push(`id is "${f.id}"`)
  if (f.key !== undefined) parts.push(`concurrency key starts with "${f.key}"`)
  if (f.type !== undefined) parts.push(`type is "${f.type}"`)
  if (f.jobKey !== undefined) parts.push(`job key is "${f.jobKey}"`)
  if (f.state !== undefined) parts.push(`state is ${f.state}`)
  if (f.after !== undefined) parts.push(`created at or after ${formatTime(f.after)} UTC`)
  if (f.before !== undefined) parts.push(`created before ${formatTime(f.before)} UTC`)
  if (f.priority !== undefined) parts.push(`priority is ${f.priority} or higher`)
  return parts.length === 0 ? "every job (no filter)" : parts.join(" · ")
}
