/**
 * The persisted `metadata` column of a job row: explicit enqueue policy at publish, and after the
 * first attempt's finalizing write, the resolved winner of every family (the stamp).
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { type FamilyName, familyNames, type Policies } from "./PolicyFamily.js"
import {
  CircuitBreakerPolicy,
  ConcurrencyPolicy,
  RateLimitPolicy,
  RetryPolicy,
  TimeoutPolicy
} from "./PolicyValues.js"

/** Which rung a stamped value came from. Global defaults are never stamped. */
export const Source = Schema.Literal("enqueue", "handler", "contract")
/** Which rung a stamped value came from. */
export type Source = typeof Source.Type

const entry = <A, I>(value: Schema.Schema<A, I>) =>
  Schema.optional(Schema.Struct({ source: Source, value }))

/** One entry per family (absent = nothing at this slot). */
export const PolicyEntries = Schema.Struct({
  concurrency: entry(ConcurrencyPolicy),
  retry: entry(RetryPolicy),
  timeout: entry(TimeoutPolicy),
  rateLimit: entry(RateLimitPolicy),
  circuitBreaker: entry(CircuitBreakerPolicy)
})
/** One entry per family (absent = nothing at this slot). */
export type PolicyEntries = typeof PolicyEntries.Type

/** The whole metadata document. `stampedAt` present = resolved; later attempts never re-resolve. */
export class JobMetadata extends Schema.Class<JobMetadata>("JobMetadata")({
  policies: PolicyEntries,
  stampedAt: Schema.optional(Schema.String)
}) {
  /** Metadata with nothing in it. */
  static readonly empty = new JobMetadata({ policies: {} })

  /** The values of every entry, without their sources. */
  get values(): Policies {
    const out: Record<string, unknown> = {}
    for (const k of familyNames) {
      const e = this.policies[k]
      if (e !== undefined) out[k] = e.value
    }
    return out as Policies
  }

  /** The source of one family's entry, if any. */
  sourceOf(family: FamilyName): Source | undefined {
    return this.policies[family]?.source
  }
}

/** Metadata's JSON form (what the database column holds). */
export const JobMetadataJson = Schema.encodedSchema(JobMetadata)

const decodeStrict = Schema.decodeUnknownEither(JobMetadata, { onExcessProperty: "error" })
const encodeSync = Schema.encodeSync(JobMetadata)

/**
 * Documents decoded lately, by their JSON text (up to 1,024, then started afresh): the rows of one
 * contract enqueued alike carry the same document, and its Schema decode was a tenth of a keyless
 * attempt's CPU. The decoded instances are immutable, so attempts may share one.
 */
const decoded = new Map<string, JobMetadata>()
/** What each decoded or built instance encodes to (computed once per instance). */
const encoded = new WeakMap<JobMetadata, unknown>()

/** Decodes a stored metadata document strictly: unknown families and wrong types are errors. */
export const decode = (u: unknown): Either.Either<JobMetadata, string> => {
  let text: string | undefined
  try {
    text = JSON.stringify(u)
  } catch {
    text = undefined
  }
  const hit = text === undefined ? undefined : decoded.get(text)
  if (hit !== undefined) return Either.right(hit)
  return decodeStrict(u).pipe(
    Either.map((m) => {
      if (text !== undefined) {
        if (decoded.size >= 1024) decoded.clear()
        decoded.set(text, m)
      }
      return m
    }),
    Either.mapLeft((e) => ParseResult.TreeFormatter.formatErrorSync(e))
  )
}

/** Encodes metadata for storage. */
export const encode = (m: JobMetadata): unknown => {
  let out = encoded.get(m)
  if (out === undefined) {
    out = encodeSync(m)
    encoded.set(m, out)
  }
  return out
}

/**
 * The check `new JobMetadata(props)` runs, compiled once: the class constructor derives the type side
 * of its fields and compiles a parser for it at every call (a new AST each time, so Effect's parser
 * cache misses), which cost every attempt's resolution a parser build.
 */
const validateProps = ParseResult.validateSync(Schema.Struct(JobMetadata.fields).annotations({ title: "JobMetadata (Constructor)" }))

/** Builds metadata from explicit entries (checked as the class constructor checks them). */
export const fromEntries = (policies: PolicyEntries, stampedAt?: string): JobMetadata =>
  new JobMetadata(validateProps(stampedAt === undefined ? { policies } : { policies, stampedAt }), true)
