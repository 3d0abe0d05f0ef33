/**
 * A worker's report to the registry (`warp_workers`) of the PostgreSQL store.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { WorkerReport } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/**
 * `JobStoreService.reportWorker`: inserts or updates the worker's row (the store stamps `seen_at`; a
 * report without an outage keeps the last one recorded), with the `application_name` of the
 * connection it is written on (the workers listing counts the sessions that carry it).
 */
export const reportWorker = (sql: SqlClient.SqlClient, r: WorkerReport): Effect.Effect<void, StoreError> =>
  sql`
        INSERT INTO warp_workers (id, host, pid, lanes, in_flight, slots, heartbeat_ms, last_outage_ms, last_outage_end, application_name)
        VALUES (${r.workerId}, ${r.host}, ${r.pid}, ${r.lanes}, ${r.inFlight}, ${JSON.stringify(r.slots)}::jsonb, ${Math.round(r.heartbeatMs)},
                ${r.lastOutage === undefined ? null : Math.round(r.lastOutage.ms)}, ${r.lastOutage === undefined ? null : r.lastOutage.endedAt.toISOString()},
                nullif(current_setting('application_name'), ''))
        ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, lanes = EXCLUDED.lanes, in_flight = EXCLUDED.in_flight, slots = EXCLUDED.slots,
          heartbeat_ms = EXCLUDED.heartbeat_ms, seen_at = now(), application_name = EXCLUDED.application_name,
          last_outage_ms = coalesce(EXCLUDED.last_outage_ms, warp_workers.last_outage_ms),
          last_outage_end = coalesce(EXCLUDED.last_outage_end, warp_workers.last_outage_end)`.pipe(
    Effect.asVoid,
    Effect.mapError(fail("reportWorker"))
  )
