/**
 * Whether `warp_concurrency_limits` exists, for the claims (see `fetch`).
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * How `warp_concurrency_limits` stands: missing, without `expires_at`, with it (migration 0002), or with
 * it and `warp_concurrency_group_limits` beside it (migration 0003: the claims then read the groups'
 * overrides too, see `./fetch.ts`).
 */
export type LimitsTable = "absent" | "plain" | "expiring" | "grouped"

/** Whether the overrides of `warp_concurrency_limits` carry `expires_at`. */
export const expiring = (t: LimitsTable): boolean => t === "expiring" || t === "grouped"

/**
 * Whether `warp_concurrency_limits` exists (the concurrency addon's migration ran): claims then read
 * the override of each claimed row's key — ignoring an expired one when the table has `expires_at`
 * (migration 0002). Checked when the returned effect runs (at the store's build); the effect it returns
 * checks again, until the groups' table is there too, at most every second (the claims' admission needs the overrides).
 */
export const readsLimits = (sql: SqlClient.SqlClient): Effect.Effect<Effect.Effect<LimitsTable>> =>
  Effect.gen(function* () {
    const limitsTable = sql`SELECT to_regclass('warp_concurrency_limits') IS NOT NULL AS present,
      EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('warp_concurrency_limits')
              AND attname = 'expires_at' AND NOT attisdropped) AS expiring,
      to_regclass('warp_concurrency_group_limits') IS NOT NULL AS grouped`.pipe(
      Effect.map((rows): LimitsTable => {
        const r = rows[0] as any
        return r?.present !== true ? "absent" : r?.expiring !== true ? "plain" : r?.grouped === true ? "grouped" : "expiring"
      }),
      Effect.orElseSucceed((): LimitsTable => "absent")
    )
    let hasLimits = yield* limitsTable
    let limitsCheckedAt = Date.now()
    const readsLimits = Effect.suspend(() => {
      if (hasLimits === "grouped" || Date.now() - limitsCheckedAt < 1_000) return Effect.succeed(hasLimits)
      limitsCheckedAt = Date.now()
      return Effect.tap(limitsTable, (present) => Effect.sync(() => (hasLimits = present)))
    })
    return readsLimits
  })
