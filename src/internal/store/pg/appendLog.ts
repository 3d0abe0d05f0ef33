/**
 * An audit entry appended by the worker in the PostgreSQL store.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { LogKind } from "../../job/Outcome.js"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/** `JobStoreService.appendLog`: appends one entry to a job's audit trail (nothing if the job does not exist). */
export const appendLog = (sql: SqlClient.SqlClient, jobId: string, kind: LogKind, message: string): Effect.Effect<void, StoreError> =>
  sql`INSERT INTO warp_job_logs (job_id, kind, message) SELECT id, ${kind}, ${message} FROM warp_jobs WHERE id = ${jobId}`.pipe(
    Effect.asVoid,
    Effect.mapError(fail("appendLog"))
  )
