import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Shared state of the rate-limit and circuit-breaker families: starts counted per (key, window
 * start), and one breaker row per dependency group.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE warp_rate_limit_windows (
      key text NOT NULL,
      window_start timestamptz NOT NULL,
      window_end timestamptz NOT NULL,
      starts integer NOT NULL CHECK (starts >= 1),
      PRIMARY KEY (key, window_start)
    )`
  yield* sql`
    CREATE TABLE warp_circuit_breakers (
      group_name text PRIMARY KEY,
      consecutive_failures integer NOT NULL DEFAULT 0,
      opened_until timestamptz,
      probe_job text,
      probe_until timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
})
