/**
 * Whether `warp_concurrency_limits` exists, for the claims (see `fetch`).
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** How `warp_concurrency_limits` stands: missing, without `expires_at`, or with it (migration 0002). */
export type LimitsTable = "absent" | "plain" | "expiring"

/**
 * Whether `warp_concurrency_limits` exists (the concurrency addon's migration ran): claims then read
 * the override of each claimed row's key — ignoring an expired one when the table has `expires_at`
 * (migration 0002). Checked when the returned effect runs (at the store's build); the effect it returns
 * checks again, while absent or without `expires_at`, at most every 10 s.
 */
export const readsLimits = (sql: SqlClient.SqlClient): Effect.Effect<Effect.Effect<LimitsTable>> =>
  Effect.gen(function* () {
    const limitsTable = sql`SELECT to_regclass('warp_concurrency_limits') IS NOT NULL AS present,
      EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('warp_concurrency_limits')
              AND attname = 'expires_at' AND NOT attisdropped) AS expiring`.pipe(
      Effect.map((rows): LimitsTable => ((rows[0] as any)?.present !== true ? "absent" : (rows[0] as any)?.expiring === true ? "expiring" : "plain")),
      Effect.orElseSucceed((): LimitsTable => "absent")
    )
    let hasLimits = yield* limitsTable
    let limitsCheckedAt = Date.now()
    const readsLimits = Effect.suspend(() => {
      if (hasLimits === "expiring" || Date.now() - limitsCheckedAt < 10_000) return Effect.succeed(hasLimits)
      limitsCheckedAt = Date.now()
      return Effect.tap(limitsTable, (present) => Effect.sync(() => (hasLimits = present)))
    })
    return readsLimits
  })
