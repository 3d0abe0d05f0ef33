import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Connections per worker: `warp_workers.application_name` is the `application_name` of the
 * connection a worker's report was written on (`Database.layer` sets `warp-effect {pid}@{hostname}` by
 * default). The workers listing counts the sessions of `pg_stat_activity` that carry it.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE warp_workers ADD COLUMN IF NOT EXISTS application_name text`
})
