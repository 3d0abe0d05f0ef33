/**
 * An operator's bulk write (retry, requeue, delete) in the PostgreSQL store. With instant pickup on,
 * a retry or requeue that changed rows sends one notification of them (they are due now).
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { isStorableId, type OperateResult, type OperatorAction, operatorFrom, operatorTo } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import * as Wakeup from "../Wakeup.js"
import { fail, nextTag } from "./shared.js"

/**
 * `JobStoreService.operate`: applies `action` to the rows of `ids` in a state it applies to, with
 * their audit entries, in one statement; the others are counted as skipped.
 */
export const operate = (
  sql: SqlClient.SqlClient,
  action: OperatorAction,
  ids: ReadonlyArray<string>,
  notify = false
): Effect.Effect<OperateResult, StoreError> => {
  const unique = [...new Set(ids)]
  const storable = unique.filter(isStorableId)
  if (storable.length === 0) return Effect.succeed({ changed: 0, skipped: unique.length })
  const to = operatorTo[action]
  // one statement: the rows in an allowed state change and get their audit entry together; a row
  // another transaction holds (a worker's claim in flight) is waited for, then re-checked
  return sql`
        WITH u AS (
          UPDATE warp_jobs o
          SET state = ${to.state},
              schedule_time = CASE WHEN ${to.state} = 'Enqueued' THEN now() ELSE schedule_time END,
              locked_by = NULL, lease_until = NULL, updated_at = now(), holder_key = NULL,
              -- a retried or deleted job leaves any cancel asked for it behind; a requeued one keeps it
              cancel_requested = CASE WHEN ${action} = 'requeue' THEN cancel_requested END${
                to.state === "Enqueued"
                  ? // a weighted job sent back to the queue goes to the back of its key, as a policy's requeue
                    sql`,
              fair_tag = CASE WHEN fair_tag IS NOT NULL AND jsonb_typeof(metadata #> '{policies,concurrency,value,weight}') = 'number'
                                   AND (metadata #>> '{policies,concurrency,value,weight}')::float8 > 0
                              THEN ${nextTag(sql, sql`(o.metadata #>> '{policies,concurrency,value,key}')`, sql`(o.metadata #>> '{policies,concurrency,value,weight}')::float8`)} END`
                  : sql``
              }
          WHERE id IN (SELECT jsonb_array_elements_text(${JSON.stringify(storable)}::jsonb))
            AND state IN (SELECT jsonb_array_elements_text(${JSON.stringify(operatorFrom[action])}::jsonb))
          RETURNING id
        ), l AS (
          INSERT INTO warp_job_logs (job_id, kind, message) SELECT id, ${to.kind}, ${to.message} FROM u
        )
        SELECT count(*)::int AS n${
          // instant pickup: rows sent back to the queue are due now (one notification, see `../Wakeup.ts`)
          notify && to.state === "Enqueued"
            ? sql`, (SELECT pg_notify(${Wakeup.channel}, 'd' || count(*)) FROM u HAVING count(*) > 0)::text AS notified`
            : sql``
        } FROM u`.pipe(
    Effect.map((rows) => {
      const changed = Number((rows[0] as any)?.n ?? 0)
      return { changed, skipped: unique.length - changed }
    }),
    Effect.mapError(fail("operate"))
  )
}
