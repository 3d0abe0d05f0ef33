import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Retention of finished jobs (`Retention`):
 * - `warp_jobs_done`: the ended rows by (type, state, last write) — the pruner walks each job type's
 *   expired rows of one state oldest first through it (and finds the job types by a loose scan of it),
 *   and reads the N-th newest of a type for a count limit. A row enters it once, by the write that ends it.
 * - `warp_job_tombstones`: one small row per pruned job (id, type, the state it ended in, when it ended
 *   and when it was pruned), so that `JobStore.get` answers `JobExpired` instead of not found; removed
 *   `tombstones` after the prune, in batches, through `warp_job_tombstones_pruned`.
 * - `warp_key_history`: the dashboard's per-key figures (Succeeded, Deleted and Requeued over the last
 *   5 minutes, hour, day) of pruned keyed jobs, per (key, second), so that they do not drop when rows
 *   go before the day is over; rows older than a day are removed in batches through `warp_key_history_at`.
 * `IF NOT EXISTS`: on a large table an operator may have built `warp_jobs_done` `CONCURRENTLY` beforehand
 * (plain `CREATE INDEX` blocks writes while it runs).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE INDEX IF NOT EXISTS warp_jobs_done ON warp_jobs (type, state, updated_at)
    WHERE state IN ('Succeeded','Failed','Deleted')`
  yield* sql`
    CREATE TABLE IF NOT EXISTS warp_job_tombstones (
      id text PRIMARY KEY,
      type text NOT NULL,
      state text NOT NULL CHECK (state IN ('Succeeded','Failed','Deleted')),
      finished_at timestamptz NOT NULL,
      pruned_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX IF NOT EXISTS warp_job_tombstones_pruned ON warp_job_tombstones (pruned_at)`
  yield* sql`
    CREATE TABLE IF NOT EXISTS warp_key_history (
      key text NOT NULL,
      at timestamptz NOT NULL,
      succeeded integer NOT NULL DEFAULT 0,
      deleted integer NOT NULL DEFAULT 0,
      requeued integer NOT NULL DEFAULT 0,
      PRIMARY KEY (key, at)
    )`
  yield* sql`CREATE INDEX IF NOT EXISTS warp_key_history_at ON warp_key_history (at)`
})
