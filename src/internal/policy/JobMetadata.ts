/**
 * The persisted `metadata` column of a job row: explicit enqueue policy at publish, and after the
 * first attempt's finalizing write, the resolved winner of every family (the stamp).
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
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
export const Source = Schema.Literals(["enqueue", "handler", "contract"])
/** Which rung a stamped value came from. */
export type Source = typeof Source.Type

const entry = <S extends Schema.Top>(value: S) =>
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
export const JobMetadataJson = Schema.toEncoded(JobMetadata)

const decodeStrict = Schema.decodeUnknownResult(JobMetadata, { onExcessProperty: "error" })
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
export const decode = (u: unknown): Result.Result<JobMetadata, string> => {
  let text: string | undefined
  try {
    text = JSON.stringify(u)
  } catch {
    text = undefined
  }
  const hit = text === undefined ? undefined : decoded.get(text)
  if (hit !== undefined) return Result.succeed(hit)
  return decodeStrict(u).pipe(
    Result.map((m) => {
      if (text !== undefined) {
        if (decoded.size >= 1024) decoded.clear()
        decoded.set(text, m)
      }
      return m
    }),
    Result.mapError((e) => e.message)
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
 * Builds metadata from explicit entries (checked by the class constructor). Effect 3's constructor
 * compiled a parser at every call, so this checked the props with a parser compiled once and skipped
 * the constructor's check; Effect 4's constructor compiles its struct's parser once and keeps it.
 */
export const fromEntries = (policies: PolicyEntries, stampedAt?: string): JobMetadata =>
  new JobMetadata(stampedAt === undefined ? { policies } : { policies, stampedAt })
