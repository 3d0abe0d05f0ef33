/**
 * The read of the registry (`warp_workers`) of the PostgreSQL store.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { WorkerInfo } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/**
 * `JobStoreService.workers`: every worker that reported and has not stopped, oldest first, with how
 * long it has been silent, how many rows it holds and how many connections its process has open to
 * this database: the sessions of `pg_stat_activity` whose `application_name` is the one its report
 * was written with. Unknown (null) when the report carried no name, or when another process
 * (another host or pid) reported the same name — the sessions cannot be told apart then.
 */
export const workers = (sql: SqlClient.SqlClient): Effect.Effect<ReadonlyArray<WorkerInfo>, StoreError> =>
  sql`
      WITH sessions AS (
        SELECT application_name, count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() GROUP BY application_name
      )
      SELECT w.*, greatest(0, floor(extract(epoch FROM now() - w.seen_at) * 1000))::bigint AS silent_ms,
        (SELECT count(*)::int FROM warp_jobs WHERE state = 'Processing' AND locked_by = w.id) AS holding,
        CASE WHEN w.application_name IS NULL THEN NULL
             WHEN EXISTS (SELECT 1 FROM warp_workers o WHERE o.application_name = w.application_name AND (o.host, o.pid) <> (w.host, w.pid)) THEN NULL
             ELSE coalesce(s.n, 0) END AS connections
      FROM warp_workers w LEFT JOIN sessions s ON s.application_name = w.application_name
      ORDER BY w.started_at, w.id`.pipe(
    Effect.map((rows) =>
      (rows as Array<any>).map((r): WorkerInfo => {
        const slots: Array<{ key: string; held: number; jobs?: Array<{ id: string; limit: number; source: string }> }> =
          typeof r.slots === "string" ? JSON.parse(r.slots) : r.slots
        return {
          workerId: r.id,
          host: r.host,
          pid: Number(r.pid),
          lanes: Number(r.lanes),
          inFlight: Number(r.in_flight),
          heartbeatMs: Number(r.heartbeat_ms),
          ...(r.last_outage_ms === null ? {} : { lastOutage: { ms: Number(r.last_outage_ms), endedAt: new Date(r.last_outage_end) } }),
          startedAt: new Date(r.started_at),
          seenAt: new Date(r.seen_at),
          silentMs: Number(r.silent_ms),
          slots: slots.map(({ held, jobs, key }) => ({ key: String(key), held: Number(held), ...(jobs === undefined || jobs.length === 0
            ? {}
            : { jobs: jobs.map((j) => ({ id: String(j.id), limit: Number(j.limit), source: String(j.source) })) }) })),
          holding: Number(r.holding),
          connections: r.connections === null ? undefined : Number(r.connections)
        }
      })
    ),
    Effect.mapError(fail("workers"))
  )
