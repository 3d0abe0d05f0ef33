/**
 * The cancel of a key's older holders by a newer job in the PostgreSQL store (`CancelRunning`).
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { Job } from "../../job/Job.js"
import { replacedCause } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/**
 * `JobStoreService.cancelHolders`: asks to cancel the marked holders of `key` older than `newer` and
 * not already being cancelled; their ids, sorted.
 */
export const cancelHolders = (
  sql: SqlClient.SqlClient,
  key: string,
  newer: Job
): Effect.Effect<ReadonlyArray<string>, StoreError> =>
  sql`
        UPDATE warp_jobs SET cancel_requested = ${replacedCause(key, newer.id)}
        WHERE state = 'Processing' AND holder_key = ${key} AND cancel_requested IS NULL AND id <> ${newer.id}
          -- the newer job's own row: created_at has microseconds, the Job's Date only milliseconds
          AND (created_at, id) < (SELECT created_at, id FROM warp_jobs WHERE id = ${newer.id})
        RETURNING id`.pipe(
    Effect.map((rows) => (rows as Array<any>).map((r) => String(r.id)).sort()),
    Effect.mapError(fail("cancelHolders"))
  )
