/**
 * The mark of a running job as a holder of a `CancelRunning` key's slot in the PostgreSQL store.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/** `JobStoreService.markHolder`: marks `id` (Processing, claimed by `workerId`) as holding a slot of `key`. */
export const markHolder = (sql: SqlClient.SqlClient, id: string, workerId: string, key: string): Effect.Effect<void, StoreError> =>
  sql`UPDATE warp_jobs SET holder_key = ${key} WHERE id = ${id} AND state = 'Processing' AND locked_by = ${workerId}`.pipe(
    Effect.asVoid,
    Effect.mapError(fail("markHolder"))
  )
