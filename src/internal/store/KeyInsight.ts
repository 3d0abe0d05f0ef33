/**
 * Read-only views of concurrency keys for the dashboard: the live keys (rows Scheduled, Enqueued or
 * Processing that carry a key in their metadata — set at enqueue, or stamped by a finished attempt —
 * plus every admin override), what holds and waits for each key, and what each key did over the last
 * 5 minutes, hour and day. Every store implements it (`JobStoreService.insight`); nothing here writes.
 *
 * A key a running job resolved from its handler or contract reaches the row with the attempt's
 * finalizing write (the stamp, see the concurrency spec). Until then its worker reports the job with
 * the key (`WorkerReport.slots`, sent within moments of the handler's start), and the views count it
 * as a holder from that report.
 *
 * @since 0.3.0
 */
import type * as Effect from "effect/Effect"
import type { StoreError } from "./StoreError.js"
import { MAX_LIMIT } from "../policy/PolicyValues.js"

/**
 * An admin override handed to the reads (the concurrency addon's `ConcurrencyLimitManager.list`), so
 * that the views agree with what the addon enforces whichever layer holds the overrides.
 *
 * @since 0.3.0
 * @category models
 */
export interface KeyOverride {
  readonly key: string
  readonly slots: number
}

/**
 * A job holding a slot of a key: a Processing row that carries the key.
 *
 * @since 0.3.0
 * @category models
 */
export interface KeyHolder {
  readonly id: string
  readonly type: string
  /** The worker that claimed it (`locked_by`). */
  readonly workerId: string | null
  /** When the current attempt claimed it (the claim sets `updated_at`; heartbeats do not). */
  readonly since: Date
}

/**
 * Outcomes of a key's jobs over one window: Requeued audit entries, and rows that ended Succeeded or
 * Deleted (by the time of their last write).
 *
 * @since 0.3.0
 * @category models
 */
export interface WindowCounts {
  readonly requeued: number
  readonly succeeded: number
  readonly deleted: number
}

/**
 * The windows of {@link KeySummary.windows}.
 *
 * @since 0.3.0
 * @category models
 */
export const windows = [
  { name: "5m", seconds: 300 },
  { name: "1h", seconds: 3600 },
  { name: "24h", seconds: 86_400 }
] as const

/**
 * One window's name.
 *
 * @since 0.3.0
 * @category models
 */
export type WindowName = (typeof windows)[number]["name"]

/**
 * Everything the dashboard shows about one key.
 *
 * @since 0.3.0
 * @category models
 */
export interface KeySummary {
  readonly key: string
  /** Processing rows carrying the key. */
  readonly running: number
  /** Enqueued/Scheduled rows of the key that are due. */
  readonly waiting: number
  /** When the oldest of those started waiting (created, or its scheduled time if created Scheduled). */
  readonly waitingSince: Date | null
  /** The smallest and largest limit the key's live rows carry (null: no live row). */
  readonly declared: { readonly min: number; readonly max: number } | null
  /** The admin override's slots (null: none). */
  readonly adminSlots: number | null
  /** `waiting` × seconds since `waitingSince`: the sort order of the live view. */
  readonly pressure: number
  /** Up to {@link maxHolders} holders, oldest claim first. */
  readonly holders: ReadonlyArray<KeyHolder>
  readonly windows: Readonly<Record<WindowName, WindowCounts>>
}

/**
 * The most holders listed per key (`running` has the full count).
 *
 * @since 0.3.0
 * @category models
 */
export const maxHolders = 20

/**
 * A page of the live view.
 *
 * @since 0.3.0
 * @category models
 */
export interface KeyPage {
  readonly rows: ReadonlyArray<KeySummary>
  readonly total: number
  /**
   * When the order of the keys was computed, when it is not this request's: a store whose ranking
   * is costly (many live keys) reuses it for a few seconds. The rows' figures are read live either way.
   */
  readonly rankedAt?: Date | undefined
}

/**
 * One key seen from one of its jobs: the key's summary, and how many pending rows of the key are
 * ahead of the job by (ScheduleTime, id).
 *
 * @since 0.3.0
 * @category models
 */
export interface KeyLine {
  readonly summary: KeySummary
  readonly ahead: number
}

/**
 * The reads.
 *
 * @since 0.3.0
 * @category models
 */
export interface KeyInsightService {
  /**
   * Live keys and admin-overridden keys, by pressure (highest first), then key. A page that is not
   * whole numbers >= 0 holds no rows.
   */
  readonly liveKeys: (options: {
    readonly overrides: ReadonlyArray<KeyOverride>
    readonly limit: number
    readonly offset: number
  }) => Effect.Effect<KeyPage, StoreError>
  /**
   * One key (with its admin override's slots, or null), and the position of the job `id` in the key's
   * waiting line (pending rows ahead of it by ScheduleTime, id; 0 when the job is not a row).
   */
  readonly line: (key: string, options: { readonly override: number | null; readonly id: string }) => Effect.Effect<KeyLine, StoreError>
}

/**
 * The limit the addon enforces for a key: the admin override, else the largest declared limit, else 1.
 *
 * @since 0.3.0
 * @category models
 */
export const effectiveLimit = (s: Pick<KeySummary, "adminSlots" | "declared">): { readonly limit: number; readonly source: "admin" | "declared" | "default" } =>
  s.adminSlots !== null
    ? { limit: s.adminSlots, source: "admin" }
    : s.declared !== null
      ? { limit: s.declared.max, source: "declared" }
      : { limit: 1, source: "default" }

/** A row limit as the fetch reads it: a whole number 1..2^31-1, anything else counts as 1. */
export const rowLimit = (raw: unknown): number =>
  typeof raw === "number" && Number.isSafeInteger(raw) && raw >= 1 && raw <= MAX_LIMIT
    ? raw
    : typeof raw === "string" && /^[1-9][0-9]{0,9}$/.test(raw) && Number(raw) <= MAX_LIMIT
      ? Number(raw)
      : 1

/** The concurrency key a row carries (string or number in the JSON), if any. */
export const keyOfMetadata = (metadata: unknown): string | undefined => {
  const k = (metadata as any)?.policies?.concurrency?.value?.key
  return typeof k === "string" || typeof k === "number" ? String(k) : undefined
}

/** The limit a row carries (raw, see {@link rowLimit}). */
export const limitOfMetadata = (metadata: unknown): number => rowLimit((metadata as any)?.policies?.concurrency?.value?.limit)
