import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Admin overrides of total caps: one row per group (the `group` of a `total: { group, limit }`
 * declaration), sticky or expiring like the per-key overrides of `warp_concurrency_limits`.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS warp_concurrency_group_limits (
    group_name text PRIMARY KEY,
    slots integer NOT NULL CHECK (slots >= 1),
    updated_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NULL
  )`
})
