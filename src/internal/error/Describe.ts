/**
 * The shared vocabulary of the public errors: how a value, a path and a rule are written in a
 * message a person reads. Schema's own tree stays on the error (`issue`) for tools; these helpers
 * derive the one-line text from it with `SchemaIssue.makeFormatterStandardSchemaV1`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"

/** The longest rendering of an offending value in a message, in characters. */
export const MAX_SHOWN = 60

/**
 * A value as a person should read it in a message: strings quoted with their escapes visible (a NUL
 * shows as `\u0000`), `NaN`, `Infinity`, `-0`, `123n`, `undefined`, `Invalid Date` written as such,
 * and anything longer than {@link MAX_SHOWN} characters cut with its full length noted.
 *
 * @since 0.1.0
 * @category formatting
 */
export const show = (value: unknown, max: number = MAX_SHOWN): string => {
  const text = render(value)
  if (text.length <= max) return text
  const length = typeof value === "string" ? `${value.length} characters` : "cut"
  return `${text.slice(0, max)}… (${length})`
}

const render = (value: unknown): string => {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value)
    case "number":
      return Object.is(value, -0) ? "-0" : String(value)
    case "bigint":
      return `${value}n`
    case "undefined":
      return "undefined"
    case "symbol":
      return value.toString()
    case "function":
      return `function ${value.name || "(anonymous)"}`
    case "boolean":
      return String(value)
  }
  if (value === null) return "null"
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? "Invalid Date" : `Date(${value.toISOString()})`
  if (Array.isArray(value)) return `[${value.slice(0, 8).map(render).join(", ")}${value.length > 8 ? ", …" : ""}]`
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) return `${proto?.constructor?.name ?? "object"} instance`
  try {
    return JSON.stringify(value) ?? "object"
  } catch {
    return "object"
  }
}

/**
 * A path written for a message: `SendInvoice.customerId`, `SendInvoice.items[2].price`,
 * `SendInvoice["odd key"]`.
 *
 * @since 0.1.0
 * @category formatting
 */
export const formatPath = (root: string, path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (out, k) =>
      typeof k === "number"
        ? `${out}[${k}]`
        : typeof k === "string" && /^[A-Za-z_$][\w$]*$/.test(k)
          ? `${out}.${k}`
          : `${out}[${typeof k === "symbol" ? k.toString() : JSON.stringify(k)}]`,
    root
  )

/** The value at `path` inside `root`, if it can be read. */
export const at = (root: unknown, path: ReadonlyArray<PropertyKey>): { readonly found: boolean; readonly value: unknown } => {
  let cur: unknown = root
  for (const k of path) {
    if (cur === null || (typeof cur !== "object" && typeof cur !== "function")) return { found: false, value: undefined }
    try {
      if (!(k in (cur as object))) return { found: false, value: undefined }
      cur = (cur as any)[k]
    } catch {
      return { found: false, value: undefined }
    }
  }
  return { found: true, value: cur }
}

/** One broken rule: where, what was found, which rule. */
export interface Violation {
  readonly path: ReadonlyArray<PropertyKey>
  /** Whether a value exists at `path` (a missing field has none). */
  readonly found: boolean
  readonly value: unknown
  /** The rule, worded to follow the path: `must be an integer >= 1`, `expected number`, `is missing`. */
  readonly rule: string
}

/** Messages the formatter gives the leaves that carry no message of their own: a missing key, a key not allowed. */
const MISSING = "\u0000missing"
const UNEXPECTED = "\u0000unexpected"

/** Schema's own flattening of an issue (one entry per leaf, with its path), with the missing and unexpected keys marked. */
const formatter = SchemaIssue.makeFormatterStandardSchemaV1({
  leafHook: (issue) => (issue._tag === "MissingKey" ? MISSING : issue._tag === "UnexpectedKey" ? UNEXPECTED : SchemaIssue.defaultLeafHook(issue))
})

/**
 * Turns Schema's message for one issue into a rule: `Expected number, got "x"` becomes
 * `expected number` (the actual value is shown apart, from the input), a filter's own message is
 * kept, and a missing key reads `is missing`.
 */
const ruleOf = (m: string): string => {
  if (m === MISSING) return "is missing"
  if (m === UNEXPECTED) return "is not allowed here"
  const expected = /^Expected ([\s\S]*?), got [\s\S]*$/.exec(m)
  if (expected !== null) return `expected ${expected[1]}`
  return m.charAt(0).toLowerCase() + m.slice(1)
}

/**
 * The violations a schema error reports, read against the `input` it was given (so each carries the
 * offending value).
 *
 * @since 0.1.0
 * @category formatting
 */
export const violations = (error: Schema.SchemaError | SchemaIssue.Issue, input: unknown): ReadonlyArray<Violation> =>
  formatter(Schema.isSchemaError(error) ? error.issue : error).issues.map((issue) => {
    const path = (issue.path ?? []).map((k) => (typeof k === "object" && k !== null ? k.key : k))
    const found = issue.message === MISSING ? { found: false, value: undefined } : at(input, path)
    return { path, found: found.found, value: found.value, rule: ruleOf(issue.message) }
  })

/**
 * One violation as a clause: `SendInvoice.customerId: expected number, got "abc"`. A rule that
 * already quotes the value (`expected an integer >= 1, got 0`) is not given it twice.
 *
 * @since 0.1.0
 * @category formatting
 */
export const clause = (root: string, v: Violation): string => {
  const where = formatPath(root, v.path)
  const got = !v.found || /\bgot\b/.test(v.rule) ? "" : `, got ${show(v.value)}`
  return `${where}: ${v.rule}${got}`
}

/** The first clause, and how many more there are. */
export const summary = (root: string, vs: ReadonlyArray<Violation>): string =>
  vs.length === 0 ? `${root}: invalid` : `${clause(root, vs[0]!)}${vs.length > 1 ? ` (and ${vs.length - 1} more)` : ""}`

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * Why a string cannot be stored as PostgreSQL text or jsonb unchanged, or undefined: a NUL character
 * (PostgreSQL refuses it) or an unpaired UTF-16 surrogate (not valid Unicode: refused by jsonb, and
 * replaced by U+FFFD in text).
 *
 * @since 0.1.0
 * @category validation
 */
export const unstorableText = (s: string): string | undefined =>
  s.includes("\u0000")
    ? "must not contain a NUL character (PostgreSQL cannot store it)"
    : loneSurrogate.test(s)
      ? "must be valid Unicode (it has an unpaired surrogate, which PostgreSQL cannot store)"
      : undefined

/** What every readable error of the public API carries for tools, beside its `message`. */
export interface Details {
  /** The refused call, as written: `Publisher.enqueue`, `Semaphore("payments", 0)`, ... */
  readonly entry?: string | undefined
  /** Where the offending value sits (`["customerId"]`, `["limit"]`). */
  readonly path?: ReadonlyArray<PropertyKey> | undefined
  /** The offending value. */
  readonly value?: unknown
  /** The rule it broke: `must be an integer >= 1`. */
  readonly rule?: string | undefined
  /** Schema's error, for tools. */
  readonly issue?: Schema.SchemaError | undefined
}
