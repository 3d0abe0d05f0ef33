import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Admin overrides may expire: `expires_at` NULL = sticky (as before); otherwise the override is
 * ignored from `expires_at` on (claims, `get`, `list`) and purged lazily.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE warp_concurrency_limits ADD COLUMN IF NOT EXISTS expires_at timestamptz NULL`
})
