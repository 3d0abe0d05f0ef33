/**
 * The read of the cancels asked for a worker's running jobs in the PostgreSQL store.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { CancelRequest } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/** `JobStoreService.cancelRequests`: the cancels asked for among `ids`, jobs `workerId` holds (no statement for none). */
export const cancelRequests = (
  sql: SqlClient.SqlClient,
  workerId: string,
  ids: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<CancelRequest>, StoreError> =>
  ids.length === 0
    ? Effect.succeed([])
    : sql`
          SELECT id, cancel_requested FROM warp_jobs
          WHERE id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb))
            AND state = 'Processing' AND locked_by = ${workerId} AND cancel_requested IS NOT NULL`.pipe(
        Effect.map((rows) => (rows as Array<any>).map((r) => ({ id: String(r.id), cause: String(r.cancel_requested) }))),
        Effect.mapError(fail("cancelRequests"))
      )
