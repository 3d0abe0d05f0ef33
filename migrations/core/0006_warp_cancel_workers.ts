import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Cancelling a running job, and the worker registry.
 * - `warp_jobs.cancel_requested`: why the row's running attempt is to be cancelled (an operator, or a
 *   newer job of a `CancelRunning` key); the worker holding it interrupts the attempt and writes it as
 *   Deleted. Cleared when the row ends.
 * - `warp_jobs.holder_key`: the `CancelRunning` key whose slot the row's running attempt holds (only
 *   such keys are marked); cleared by the finalizing write.
 * - `warp_workers`: one row per live worker, upserted by its heartbeat (`seen_at` is the server's
 *   clock, so staleness is read without trusting the workers' clocks) and removed when it stops.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE warp_jobs ADD COLUMN IF NOT EXISTS cancel_requested text`
  yield* sql`ALTER TABLE warp_jobs ADD COLUMN IF NOT EXISTS holder_key text`
  yield* sql`
    CREATE TABLE IF NOT EXISTS warp_workers (
      id text PRIMARY KEY,
      host text NOT NULL,
      pid integer NOT NULL,
      lanes integer NOT NULL,
      in_flight integer NOT NULL DEFAULT 0,
      slots jsonb NOT NULL DEFAULT '[]',
      heartbeat_ms integer NOT NULL,
      started_at timestamptz NOT NULL DEFAULT now(),
      seen_at timestamptz NOT NULL DEFAULT now(),
      last_outage_ms integer,
      last_outage_end timestamptz
    )`
})
