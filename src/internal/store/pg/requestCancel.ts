/**
 * An operator's cancel in the PostgreSQL store: one statement that deletes a waiting job (audit entry,
 * counters) or marks a running one for its worker.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { JobState } from "../../job/JobState.js"
import { type CancelResult, cancelText, isStorableId, operatorCause } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/** `JobStoreService.requestCancel`: cancels job `id` for `reason` and says how (see `CancelResult`). */
export const requestCancel = (
  sql: SqlClient.SqlClient,
  id: string,
  reason: string
): Effect.Effect<CancelResult, StoreError> =>
  Effect.gen(function* () {
    if (!isStorableId(id) || !isStorableId(reason)) return "NotFound" as const
    // one statement: a waiting row is Deleted (audit entry, counters), a running one is marked for its worker
    const rows = yield* sql`
          WITH j AS (SELECT id, type, state FROM warp_jobs WHERE id = ${id} FOR UPDATE),
          d AS (
            UPDATE warp_jobs w SET state = 'Deleted', locked_by = NULL, lease_until = NULL, cancel_requested = NULL, updated_at = now()
            FROM j WHERE w.id = j.id AND j.state IN ('Enqueued', 'Scheduled') RETURNING w.id
          ), m AS (
            UPDATE warp_jobs w SET cancel_requested = ${operatorCause(reason)}
            FROM j WHERE w.id = j.id AND j.state = 'Processing' RETURNING w.id
          ), l AS (
            INSERT INTO warp_job_logs (job_id, kind, message, counter) SELECT id, 'Cancelled', ${cancelText(operatorCause(reason))}, 'stats:deleted' FROM d
          )
          SELECT j.state FROM j`
    if (rows.length === 0) return "NotFound" as const
    const state = (rows[0] as any).state as JobState
    return state === "Processing" ? ("Cancelling" as const) : state === "Enqueued" || state === "Scheduled" ? ("Cancelled" as const) : ("Finished" as const)
  }).pipe(Effect.mapError(fail("requestCancel")))
