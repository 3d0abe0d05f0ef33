import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Job keys (`JobParameters.withJobKey` / `withThrottle` / `withDebounce`):
 * - `job_key`: the key a row was enqueued with (kept for display and the dashboard's `jobKey=` filter,
 *   through `warp_jobs_job_key`);
 * - `job_key_live`: the key while the row may hold it; `warp_jobs_job_key_live` is UNIQUE on
 *   (type, job_key_live), so that an insert's `ON CONFLICT` arbitrates between producers in any process;
 * - `job_key_mode`: what the insert that created the row does to a live holder (`keep`, `replace`,
 *   `replacePayload`), read from the proposed row by the conflicting insert;
 * - `job_key_hold`: how long the row holds the key (`Pending`: while Scheduled or Enqueued; `Processing`:
 *   while Processing too; `Throttle`: until `job_key_until`, whatever its state).
 * Nothing but an insert of the key writes `job_key_live`: a row that no longer holds (by `job_key_hold`,
 * its state and `job_key_until`) is released by the next insert of its key, so the claim and the
 * finalizing writes stay as they were.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE warp_jobs
    ADD COLUMN IF NOT EXISTS job_key text,
    ADD COLUMN IF NOT EXISTS job_key_live text,
    ADD COLUMN IF NOT EXISTS job_key_mode text CHECK (job_key_mode IN ('keep','replace','replacePayload')),
    ADD COLUMN IF NOT EXISTS job_key_hold text CHECK (job_key_hold IN ('Pending','Processing','Throttle')),
    ADD COLUMN IF NOT EXISTS job_key_until timestamptz`
  yield* sql`CREATE UNIQUE INDEX IF NOT EXISTS warp_jobs_job_key_live ON warp_jobs (type, job_key_live) WHERE job_key_live IS NOT NULL`
  yield* sql`CREATE INDEX IF NOT EXISTS warp_jobs_job_key ON warp_jobs (job_key) WHERE job_key IS NOT NULL`
})
