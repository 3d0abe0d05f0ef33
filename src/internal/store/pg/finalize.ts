/**
 * The finalizing write of an attempt in the PostgreSQL store: the row update and its audit entry (which
 * names the counter it counts, see `./counters.ts`) in one round trip — on the held slot's connection,
 * unlocking the slot too, when the worker hands it the slot's release of a `SemaphoreProviderPg` on the
 * same `SqlClient`.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { counterOf, logOf, stateOf } from "../../job/Outcome.js"
import { fairOf, type Finalize, retagsOn } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import { runPrepared } from "./prepared.js"
import { fail, finalizeSet, nextTag } from "./shared.js"

/**
 * `JobStoreService.finalize`: writes the attempt's outcome if this attempt still owns the row (false
 * when the claim was lost), fusing the slot's `release` into the statement when it is held on `sql`.
 */
export const finalize = (
  sql: SqlClient.SqlClient,
  { handlerRan = true, job, metadata, outcome, release, workerId }: Finalize,
  prepared = true
): Effect.Effect<boolean, StoreError> => {
  const state = stateOf(outcome, new Date())
  const log = logOf(outcome)
  const at = outcome._tag === "Requeued" && outcome.at !== undefined ? outcome.at.toISOString() : null
  const keepsPlace = outcome._tag === "Requeued" && outcome.keepsPlace === true
  const counter = counterOf(outcome)
  // a requeue goes to the back of its fair-share flow (a new tag, from the metadata written now), unless
  // it keeps its place or its tag (the tag stays); a row that is no longer weighted loses its tag
  const retag = retagsOn(outcome, state)
  const fair = retag ? fairOf(metadata) : undefined
  const fairTag = !retag ? sql`` : fair === undefined ? sql`, fair_tag = NULL` : sql`, fair_tag = ${nextTag(sql, sql`${fair.flow}::text`, sql`${fair.weight}::float8`)}`
  // the slot's release, fused into this statement when it is held on a connection of this client
  const fused = release !== undefined && release.client === sql ? release : undefined
  const statement = sql`
        WITH u AS (
          UPDATE warp_jobs
          SET ${finalizeSet(sql, {
            state: sql`${state}`,
            metadata: sql`${JSON.stringify(metadata)}::jsonb`,
            at: sql`${at}::timestamptz`,
            keeps: sql`${keepsPlace}`,
            ran: sql`${handlerRan}`
          })}${fairTag}
          WHERE id = ${job.id} AND state = 'Processing' AND locked_by = ${workerId} AND attempt = ${job.attempt}
          RETURNING id
        ), l AS (
          INSERT INTO warp_job_logs (job_id, kind, message, counter) SELECT id, ${log.kind}, ${log.message}, ${counter} FROM u
        )${
          fused === undefined
            ? sql``
            : sql`, ${fused.statement}`
        }
        SELECT count(*)::int AS n${fused === undefined ? sql`` : sql`, (SELECT released FROM r) AS released`} FROM u`
  const written = (rows: ReadonlyArray<unknown>) => Number((rows[0] as any)?.n ?? 0) === 1
  if (fused === undefined) return runPrepared(sql, statement, prepared).pipe(Effect.map(written), Effect.mapError(fail("finalize")))
  const [text, params] = statement.compile()
  // the slot's connection could not run it (lost, or the statement failed there): the slot is lost
  // either way, and the write goes through the pool (it lands only if this attempt still owns the row)
  return fused.run(text, params).pipe(
    Effect.map(written),
    Effect.catchTag("SemaphoreError", () => statement.pipe(Effect.map(written))),
    Effect.mapError(fail("finalize"))
  )
}
