/**
 * The read of one job with its audit trail in the PostgreSQL store.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { JobDetail, JobLog } from "../../job/Job.js"
import type { LogKind } from "../../job/Outcome.js"
import { JobExpired } from "../../job/Retention.js"
import { isStorableId } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import { fail, originEntry, rowToJob } from "./shared.js"

/**
 * `JobStoreService.get`: job `id` and its audit trail, read in one statement (none for an id no row
 * can have).
 */
export const get = (sql: SqlClient.SqlClient, id: string): Effect.Effect<Option.Option<JobDetail>, StoreError | JobExpired> =>
  Effect.gen(function* () {
    // an id no row can have (a NUL, an unpaired surrogate, not a string) is not found, not an error
    if (!isStorableId(id)) return Option.none()
    // row and trail in one statement: one snapshot, so the trail never lags or leads the row
    const rows = yield* sql`
          SELECT j.*, coalesce((
            SELECT json_agg(json_build_array(floor(extract(epoch FROM l.at) * 1000)::bigint, l.kind, l.message) ORDER BY l.id)
            FROM warp_job_logs l WHERE l.job_id = j.id), '[]'::json) AS trail
          FROM warp_jobs j WHERE j.id = ${id}`
    if (rows.length === 0) {
      // pruned by retention: its tombstone says so (read only when the row is missing)
      const tomb = yield* sql`SELECT id, type, state, finished_at, pruned_at FROM warp_job_tombstones WHERE id = ${id}`
      const t = tomb[0] as any
      if (t === undefined) return Option.none()
      return yield* Effect.fail(
        new JobExpired({ id, type: t.type, state: t.state, finishedAt: new Date(t.finished_at), prunedAt: new Date(t.pruned_at) })
      )
    }
    const row = rows[0] as any
    const trail: ReadonlyArray<readonly [number | string, LogKind, string]> = typeof row.trail === "string" ? JSON.parse(row.trail) : row.trail
    const created = originEntry(row)
    return Option.some({
      job: rowToJob(row),
      logs: (created === undefined ? [] : [created]).concat(
        trail.map(([at, kind, message]): JobLog => ({ jobId: id, at: new Date(Number(at)), kind, message }))
      )
    })
  }).pipe(Effect.catchTag("SqlError", (e) => Effect.fail(fail("get")(e))))
