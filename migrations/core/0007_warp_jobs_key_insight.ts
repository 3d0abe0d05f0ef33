import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The dashboard's key views (`KeyInsight`): the live rows that carry a concurrency key, by key (the
 * live keys, their holders, waiting counts and waiting lines come from it, never from a scan of the
 * table), and the ended rows that carry one, by (key, last write) (the windowed counts read the last
 * day of a key through it). `IF NOT EXISTS`: on a large table an operator may have built them
 * `CONCURRENTLY` beforehand (plain `CREATE INDEX` blocks writes while it runs).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE INDEX IF NOT EXISTS warp_jobs_key_live ON warp_jobs ((metadata #>> '{policies,concurrency,value,key}'), state, schedule_time, id)
    WHERE state IN ('Scheduled','Enqueued','Processing') AND (metadata #>> '{policies,concurrency,value,key}') IS NOT NULL`
  yield* sql`
    CREATE INDEX IF NOT EXISTS warp_jobs_key_done ON warp_jobs ((metadata #>> '{policies,concurrency,value,key}'), updated_at)
    WHERE state IN ('Succeeded','Failed','Deleted') AND (metadata #>> '{policies,concurrency,value,key}') IS NOT NULL`
})
