import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Drops `warp_jobs_due` (every pending row by ScheduleTime). Since migration 0010 the claim walks
 * `warp_jobs_due_unfair`, the fair-share indexes and `warp_jobs_fifo`; the one statement left on
 * `warp_jobs_due` (the slot-reuse claim, whose rows are never fair nor Fifo) now walks
 * `warp_jobs_due_unfair` too. Every insert and every claim or finalizing write of a row (an update that
 * changes `state`, so never a heap-only one) wrote one entry more into it. During a rolling upgrade,
 * workers of an earlier version that run with slot reuse on read the head of the queue without an
 * index for their reuse claims until they are upgraded.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP INDEX IF EXISTS warp_jobs_due`
})
