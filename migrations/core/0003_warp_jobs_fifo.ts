import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Fifo-mode concurrency: the live rows of Fifo keys in submission order per key (the fetch walks the
 * distinct keys and each key's head through it), and a due index without Fifo rows, so that the fetch
 * of every other row never walks past a backlog of Fifo rows waiting for their turn. `IF NOT EXISTS`:
 * on a large table an operator may have built them `CONCURRENTLY` beforehand (plain `CREATE INDEX`
 * blocks writes while it runs).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE INDEX IF NOT EXISTS warp_jobs_fifo ON warp_jobs ((metadata #>> '{policies,concurrency,value,key}'), created_at, id)
    WHERE state IN ('Scheduled','Enqueued','Processing') AND (metadata #>> '{policies,concurrency,value,mode}') = 'Fifo'`
  yield* sql`
    CREATE INDEX IF NOT EXISTS warp_jobs_due_plain ON warp_jobs (schedule_time)
    WHERE state IN ('Scheduled','Enqueued')
      AND ((metadata #>> '{policies,concurrency,value,mode}') IS DISTINCT FROM 'Fifo' OR (metadata #>> '{policies,concurrency,value,key}') IS NULL)`
})
