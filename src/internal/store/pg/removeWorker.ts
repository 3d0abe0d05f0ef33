/**
 * A stopping worker's removal from the registry (`warp_workers`) of the PostgreSQL store.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/** `JobStoreService.removeWorker`: deletes the worker's row. */
export const removeWorker = (sql: SqlClient.SqlClient, workerId: string): Effect.Effect<void, StoreError> =>
  sql`DELETE FROM warp_workers WHERE id = ${workerId}`.pipe(Effect.asVoid, Effect.mapError(fail("removeWorker")))
