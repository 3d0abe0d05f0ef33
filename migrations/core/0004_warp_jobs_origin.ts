import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The creation entry of a job's audit trail, kept on the job row: an enqueue writes one row, and the
 * trail's `Enqueued` / `Scheduled for …` entry is derived from `origin` (the state the job was
 * created in), `origin_for` (the time a Scheduled job was created for) and `created_at`. Rows written
 * before this migration keep `origin` NULL and their creation entry in `warp_job_logs`. Nullable
 * columns without a default: adding them rewrites nothing.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE warp_jobs
      ADD COLUMN IF NOT EXISTS origin text CHECK (origin IN ('Enqueued','Scheduled')),
      ADD COLUMN IF NOT EXISTS origin_for timestamptz`
})
