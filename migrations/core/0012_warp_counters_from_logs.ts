import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Counters from the audit trail: the entry a write appends names the counter it counts (`counter`,
 * NULL for an entry that counts none) and the transaction that wrote it (`xact`, `txid_current()`,
 * set by default on every new entry). A counter is the sum of its rolled-up rows in `warp_counters`
 * plus the counted entries not rolled up yet (`xact` at or above `warp_counters_rolled.upto`), so no
 * finalizing write updates a counter row any more. The default is set after the column is added, so
 * the existing entries (counted in `warp_counters` already) keep a NULL `xact` and are not rewritten.
 * The view `warp_counted_entries (key, xact)` spells what an entry counts for (its counter and the
 * per-type one, `{counter}:{type}`: one row each); `warp_counter_totals (key, value)` reads every counter
 * from it that way, and the roll-up folds from it.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE warp_job_logs ADD COLUMN IF NOT EXISTS counter text`
  yield* sql`ALTER TABLE warp_job_logs ADD COLUMN IF NOT EXISTS xact bigint`
  yield* sql`ALTER TABLE warp_job_logs ALTER COLUMN xact SET DEFAULT txid_current()`
  yield* sql`CREATE INDEX IF NOT EXISTS warp_job_logs_counted ON warp_job_logs (xact) WHERE counter IS NOT NULL`
  yield* sql`CREATE TABLE IF NOT EXISTS warp_counters_rolled (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    upto bigint NOT NULL)`
  yield* sql`INSERT INTO warp_counters_rolled (upto) VALUES (0) ON CONFLICT DO NOTHING`
  // the job's type by a sub-select per entry, not a join: the mark is not known when a read is planned,
  // and a join planned for a third of the entries hashes the whole of warp_jobs
  yield* sql`CREATE OR REPLACE VIEW warp_counted_entries AS
    SELECT k.key, l.xact FROM warp_job_logs l
    CROSS JOIN LATERAL (VALUES (l.counter), (l.counter || ':' || (SELECT j.type FROM warp_jobs j WHERE j.id = l.job_id))) AS k(key)
    WHERE l.counter IS NOT NULL`
  yield* sql`CREATE OR REPLACE VIEW warp_counter_totals AS
    SELECT key, sum(value)::bigint AS value FROM (
      SELECT key, value FROM warp_counters
      UNION ALL
      SELECT key, 1 FROM warp_counted_entries WHERE xact >= (SELECT upto FROM warp_counters_rolled)
    ) t GROUP BY key`
})
