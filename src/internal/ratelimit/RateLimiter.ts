/**
 * The rate limiter: counts starts per (key, fixed window) and admits at most `limit` of them.
 * Windows are aligned on the epoch (`floor(now / window) * window`), so every worker agrees on them.
 *
 * `layerPg` counts with one atomic upsert on `warp_rate_limit_windows` (created by the core
 * migrations) and takes time from the database, so workers with skewed clocks share one window;
 * `layerMemory` counts in-process and takes time from Effect's `Clock` (drivable by `TestClock`).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import type { RateLimitPolicy } from "../policy/PolicyValues.js"

/** The answer to one start request. */
export type Admission = Data.TaggedEnum<{
  /** The start is counted: it is the `count`-th of its window. */
  Admitted: { readonly key: string; readonly limit: number; readonly count: number; readonly windowStart: Date }
  /** The window already holds `limit` starts; the next one opens at `nextWindow`. */
  Limited: { readonly key: string; readonly limit: number; readonly windowStart: Date; readonly nextWindow: Date }
}>

/** Constructors and matchers of {@link Admission}. */
export const Admission = Data.taggedEnum<Admission>()

/** The window table could not be read or written. */
export class RateLimitStoreError extends Data.TaggedError("RateLimitStoreError")<{
  readonly operation: string
  readonly cause: unknown
}> {}

/** The rate limiter service. */
export interface RateLimiterService {
  /** Counts one start of `policy.key` in the current window, unless the window is full. */
  readonly tryStart: (policy: RateLimitPolicy) => Effect.Effect<Admission, RateLimitStoreError>
  /** The starts counted so far in the current window of `key` (for inspection). */
  readonly current: (key: string, windowMs: number) => Effect.Effect<number, RateLimitStoreError>
}

/** The rate limiter tag. */
export class RateLimiter extends Context.Service<RateLimiter, RateLimiterService>()("warp/RateLimiter") {}

/** The start of the window holding `nowMs`. */
export const windowStartOf = (nowMs: number, windowMs: number): number => Math.floor(nowMs / windowMs) * windowMs

/** Builds an in-memory limiter (one process). */
export const makeMemory = Effect.sync((): RateLimiterService => {
  /** key -> window start -> starts */
  const windows = new Map<string, Map<number, { readonly end: number; count: number }>>()
  const current = (key: string, windowMs: number) =>
    Effect.map(Clock.currentTimeMillis, (now) => windows.get(key)?.get(windowStartOf(now, windowMs))?.count ?? 0)
  return {
    tryStart: ({ key, limit, windowMs }) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const start = windowStartOf(now, windowMs)
        const byStart = windows.get(key) ?? new Map<number, { readonly end: number; count: number }>()
        windows.set(key, byStart)
        for (const [s, w] of byStart) if (w.end <= start) byStart.delete(s)
        const w = byStart.get(start) ?? { end: start + windowMs, count: 0 }
        byStart.set(start, w)
        if (w.count >= limit) {
          return Admission.Limited({ key, limit, windowStart: new Date(start), nextWindow: new Date(start + windowMs) })
        }
        w.count++
        return Admission.Admitted({ key, limit, count: w.count, windowStart: new Date(start) })
      }),
    current
  }
})

/** Builds the PostgreSQL limiter on the `SqlClient` in context. */
export const makePg = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const fail = (operation: string) => (cause: unknown) => new RateLimitStoreError({ operation, cause })
  const service: RateLimiterService = {
    tryStart: ({ key, limit, windowMs }) =>
      sql`
        WITH w AS (
          SELECT (floor(extract(epoch FROM now()) * 1000)::bigint / ${windowMs}) * ${windowMs} AS start_ms
        ), b AS (
          SELECT start_ms, to_timestamp(start_ms / 1000.0) AS start FROM w
        ), d AS (
          DELETE FROM warp_rate_limit_windows WHERE key = ${key} AND window_end <= (SELECT start FROM b)
        ), u AS (
          INSERT INTO warp_rate_limit_windows AS r (key, window_start, window_end, starts)
          SELECT ${key}, start, start + ${windowMs} * interval '1 millisecond', 1 FROM b
          ON CONFLICT (key, window_start) DO UPDATE SET starts = r.starts + 1 WHERE r.starts < ${limit}
          RETURNING starts
        )
        SELECT (SELECT start_ms FROM b) AS start_ms, (SELECT starts FROM u) AS starts`.pipe(
        Effect.map((rows) => {
          const row = rows[0] as { start_ms: string | number; starts: number | null }
          const start = Number(row.start_ms)
          return row.starts === null
            ? Admission.Limited({ key, limit, windowStart: new Date(start), nextWindow: new Date(start + windowMs) })
            : Admission.Admitted({ key, limit, count: Number(row.starts), windowStart: new Date(start) })
        }),
        Effect.mapError(fail("tryStart"))
      ),
    current: (key, windowMs) =>
      sql`
        SELECT starts FROM warp_rate_limit_windows
        WHERE key = ${key}
          AND window_start = to_timestamp(((floor(extract(epoch FROM now()) * 1000)::bigint / ${windowMs}) * ${windowMs}) / 1000.0)`.pipe(
        Effect.map((rows) => Number((rows[0] as { starts?: number } | undefined)?.starts ?? 0)),
        Effect.mapError(fail("current"))
      )
  }
  return service
})

/** An in-memory limiter Layer. */
export const layerMemory: Layer.Layer<RateLimiter> = Layer.effect(RateLimiter, makeMemory)

/**
 * The PostgreSQL limiter. Its table comes with the core migrations (run by `JobStorePg.layer`, or
 * `Migrations.core` when the app migrates on its own).
 */
export const layerPg: Layer.Layer<RateLimiter, never, SqlClient.SqlClient> = Layer.effect(RateLimiter, makePg)
