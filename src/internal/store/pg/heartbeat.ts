/**
 * The lease extension of a worker's claimed rows in the PostgreSQL store.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/** `JobStoreService.heartbeat`: extends the lease of the rows of `ids` that `workerId` holds (no statement for none). */
export const heartbeat = (
  sql: SqlClient.SqlClient,
  workerId: string,
  ids: ReadonlyArray<string>,
  lease: Duration.Duration
): Effect.Effect<void, StoreError> =>
  ids.length === 0
    ? Effect.void
    : sql`
          UPDATE warp_jobs SET lease_until = now() + ${Duration.toMillis(lease)} * interval '1 millisecond'
          WHERE state = 'Processing' AND locked_by = ${workerId}
            AND id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb))`.pipe(
        Effect.asVoid,
        Effect.mapError(fail("heartbeat"))
      )
