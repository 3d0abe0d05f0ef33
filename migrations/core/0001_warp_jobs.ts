import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** Jobs, their audit trail and the stats counters. */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE warp_jobs (
      id text PRIMARY KEY,
      type text NOT NULL,
      handler text,
      payload jsonb NOT NULL,
      state text NOT NULL CHECK (state IN ('Scheduled','Enqueued','Processing','Succeeded','Failed','Deleted')),
      schedule_time timestamptz NOT NULL,
      metadata jsonb NOT NULL,
      attempt integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      locked_by text,
      lease_until timestamptz
    )`
  yield* sql`CREATE INDEX warp_jobs_due ON warp_jobs (schedule_time) WHERE state IN ('Scheduled','Enqueued')`
  yield* sql`CREATE INDEX warp_jobs_lease ON warp_jobs (lease_until) WHERE state = 'Processing'`
  yield* sql`CREATE INDEX warp_jobs_state_id ON warp_jobs (state, id DESC)`
  yield* sql`
    CREATE TABLE warp_job_logs (
      id bigserial PRIMARY KEY,
      job_id text NOT NULL REFERENCES warp_jobs(id) ON DELETE CASCADE,
      at timestamptz NOT NULL DEFAULT clock_timestamp(),
      kind text NOT NULL,
      message text NOT NULL
    )`
  yield* sql`CREATE INDEX warp_job_logs_job ON warp_job_logs (job_id, id)`
  yield* sql`
    CREATE TABLE warp_counters (
      key text PRIMARY KEY,
      value bigint NOT NULL DEFAULT 0
    )`
})
