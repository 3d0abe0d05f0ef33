import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Job priority (`JobParameters.withPriority`, a handler's or contract's `priority`): the `priority` of
 * each row (NOT NULL DEFAULT 0: the rows stored before keep their order; a constant default rewrites
 * nothing), and `warp_jobs_due_unfair` re-keyed from (schedule_time) to (priority DESC, schedule_time),
 * same predicate, so that the claim walks the due plain rows in priority order, then by ScheduleTime,
 * and stops at its LIMIT. The new index is built under a name of its own, `warp_jobs_due_priority`
 * (`IF NOT EXISTS`: on a large table an operator may have built it `CONCURRENTLY` beforehand, since a
 * plain `CREATE INDEX` blocks writes while it runs), then the old one is dropped and the new one takes
 * its name. And `warp_jobs_fair_priority` over (flow key, priority DESC, fair_tag, id) of the pending weighted
 * rows: when a weighted key's turn comes the claim takes its highest-priority due row, one probe per key
 * (`IF NOT EXISTS`: it may be built `CONCURRENTLY` beforehand too).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE warp_jobs ADD COLUMN IF NOT EXISTS priority integer NOT NULL DEFAULT 0`
  yield* sql`
    CREATE INDEX IF NOT EXISTS warp_jobs_due_priority ON warp_jobs (priority DESC, schedule_time)
    WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NULL
      AND ((metadata #>> '{policies,concurrency,value,mode}') IS DISTINCT FROM 'Fifo' OR (metadata #>> '{policies,concurrency,value,key}') IS NULL)`
  yield* sql`
    CREATE INDEX IF NOT EXISTS warp_jobs_fair_priority ON warp_jobs ((metadata #>> '{policies,concurrency,value,key}'), priority DESC, fair_tag, id)
    WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NOT NULL`
  yield* sql`DROP INDEX IF EXISTS warp_jobs_due_unfair`
  yield* sql`ALTER INDEX warp_jobs_due_priority RENAME TO warp_jobs_due_unfair`
})
