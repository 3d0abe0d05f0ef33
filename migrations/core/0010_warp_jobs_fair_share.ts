import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Weighted fair share (opt-in, `ConcurrencyOptions.weight`): the `fair_tag` of a row whose concurrency
 * policy carries a weight (null on every other row, so rows stored before keep ScheduleTime order), and
 * the partial indexes that keep tagging and claiming index lookups, never a walk of the backlog:
 * - `warp_jobs_fair_due`: pending fair rows by tag — the claim's tag order, and the virtual time (the
 *   smallest due tag);
 * - `warp_jobs_fair_time`: pending fair rows by ScheduleTime — the positions the fair rows take in the
 *   merge with the other rows;
 * - `warp_jobs_fair_flow`: pending fair rows by (key, tag) — the last tag of a flow;
 * - `warp_jobs_fair_running`: Processing fair rows by tag — the virtual time when no fair row is due;
 * - `warp_jobs_due_unfair`: the due index of the other non-Fifo rows (`warp_jobs_due_plain` without the
 *   fair rows), so that the ScheduleTime branch of the claim never walks past a backlog of fair rows. It
 *   replaces `warp_jobs_due_plain` (dropped), so a row without a weight still updates as many indexes.
 * `IF NOT EXISTS`: on a large table an operator may have built them `CONCURRENTLY` beforehand (plain
 * `CREATE INDEX` blocks writes while it runs). Adding a nullable column without a default rewrites nothing.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE warp_jobs ADD COLUMN IF NOT EXISTS fair_tag double precision`
  yield* sql`
    CREATE INDEX IF NOT EXISTS warp_jobs_fair_due ON warp_jobs (fair_tag, id)
    WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NOT NULL`
  yield* sql`
    CREATE INDEX IF NOT EXISTS warp_jobs_fair_time ON warp_jobs (schedule_time)
    WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NOT NULL`
  yield* sql`
    CREATE INDEX IF NOT EXISTS warp_jobs_fair_flow ON warp_jobs ((metadata #>> '{policies,concurrency,value,key}'), fair_tag)
    WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NOT NULL`
  yield* sql`
    CREATE INDEX IF NOT EXISTS warp_jobs_fair_running ON warp_jobs (fair_tag)
    WHERE state = 'Processing' AND fair_tag IS NOT NULL`
  yield* sql`
    CREATE INDEX IF NOT EXISTS warp_jobs_due_unfair ON warp_jobs (schedule_time)
    WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NULL
      AND ((metadata #>> '{policies,concurrency,value,mode}') IS DISTINCT FROM 'Fifo' OR (metadata #>> '{policies,concurrency,value,key}') IS NULL)`
  yield* sql`DROP INDEX IF EXISTS warp_jobs_due_plain`
})
