/**
 * `JobStoreService.nextDue` of the PostgreSQL store: in how many milliseconds the earliest pending row
 * that is not due yet comes due, by the server's clock — index probes: `warp_jobs_fair_time` once, and
 * `warp_jobs_due_unfair` (keyed by (priority DESC, schedule_time)) two per distinct priority of its
 * pending rows (a loose scan of the priorities, then the earliest row not due yet of each); Fifo-mode
 * rows are left out (no index gives their earliest time cheaply; the poll finds them once due).
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { StoreError } from "../StoreError.js"
import { fail, plainOf } from "./shared.js"

/** The statement of {@link nextDue} (one row, `ms`), also EXPLAINed by `scripts/priority-plan.ts`. */
export const nextDueStatement = (sql: SqlClient.SqlClient) =>
  sql<{ ms: number | string | null }>`
    WITH RECURSIVE p(v) AS (
      (SELECT priority FROM warp_jobs WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NULL AND ${plainOf(sql)}
       ORDER BY priority DESC LIMIT 1)
      UNION ALL
      SELECT (SELECT priority FROM warp_jobs WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NULL AND ${plainOf(sql)}
                AND priority < p.v ORDER BY priority DESC LIMIT 1)
      FROM p WHERE p.v IS NOT NULL
    )
    SELECT extract(epoch FROM least(
      (SELECT min((SELECT schedule_time FROM warp_jobs
                   WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NULL AND ${plainOf(sql)}
                     AND priority = p.v AND schedule_time > now()
                   ORDER BY schedule_time LIMIT 1)) FROM p WHERE p.v IS NOT NULL),
      (SELECT schedule_time FROM warp_jobs
       WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NOT NULL AND schedule_time > now()
       ORDER BY schedule_time LIMIT 1)
    ) - now()) * 1000 AS ms`

export const nextDue = (sql: SqlClient.SqlClient): Effect.Effect<Option.Option<number>, StoreError> =>
  nextDueStatement(sql).pipe(
    Effect.map((rows) => {
      const ms = rows[0]?.ms
      return ms === null || ms === undefined ? Option.none() : Option.some(Math.max(0, Number(ms)))
    }),
    Effect.mapError(fail("nextDue"))
  )
