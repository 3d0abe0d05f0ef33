/**
 * Retention in the PostgreSQL store: one prune batch, and the count of expired rows left (the backlog).
 *
 * One batch is one short transaction: it takes the retention guard (`pg_try_advisory_xact_lock` on a
 * two-int key of its own: a process that finds it taken does nothing, so one process prunes at a time
 * across every worker), then one statement removes up to `batchSize` expired rows — oldest first per
 * job type and state, through `warp_jobs_done` — with their audit trail (`ON DELETE CASCADE`), writes
 * their tombstones and folds the keyed ones that ended within the last day into `warp_key_history`; a
 * second statement removes up to `batchSize` tombstones older than `tombstoneMs` and per-key history
 * older than a day. Rows are locked `FOR UPDATE SKIP LOCKED`: only ended rows, never one a claim wants.
 *
 * Counters: a row whose counted audit entry has not been rolled up into `warp_counters` yet (its `xact`
 * at or above `warp_counters_rolled.upto`, see `./counters.ts`) is left for a later batch, so that no
 * counter drops when its rows go.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import type * as Statement from "effect/sql/Statement"
import * as Effect from "effect/Effect"
import { guardKey } from "../../semaphore/lockId.js"
import { FINE_MS, FOREVER_MS, HISTORY_MS, type PruneResult, type RetentionPlan, type StatePlans, terminal } from "../../job/Retention.js"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/** The retention guard's advisory key (two-int key space: never a slot's). */
export const guard = guardKey("warp:retention")

const plansJson = (plans: StatePlans) => terminal.map((state) => ({ state, age_ms: plans[state].maxAgeMs, max_count: plans[state].maxCount }))

/**
 * The expired rows (`id`), up to `limit`, as CTEs ending in `v`: the job types of ended rows (a loose
 * scan of `warp_jobs_done`), each type's cut-off per state (its override, else the defaults: the later
 * of now - maxAge and the finish time of the maxCount-th newest row), and each type's rows ended before
 * it, oldest first, whose counted entries are rolled up.
 */
const expired = (sql: SqlClient.SqlClient, plan: RetentionPlan, limit: number, lock: boolean) => {
  const overrides = [...plan.overrides].flatMap(([type, plans]) => plansJson(plans).map((p) => ({ type, ...p })))
  return sql`t AS (
      (SELECT type FROM warp_jobs WHERE state IN ('Succeeded','Failed','Deleted') ORDER BY type LIMIT 1)
      UNION ALL
      SELECT (SELECT j.type FROM warp_jobs j WHERE j.state IN ('Succeeded','Failed','Deleted') AND j.type > t.type ORDER BY j.type LIMIT 1)
      FROM t WHERE t.type IS NOT NULL
    ), d AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(plansJson(plan.defaults))}::jsonb) AS d(state text, age_ms float8, max_count int)
    ), o AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(overrides)}::jsonb) AS o(type text, state text, age_ms float8, max_count int)
    ), p AS (
      SELECT t.type, d.state,
             CASE WHEN o.type IS NULL THEN d.age_ms ELSE o.age_ms END AS age_ms,
             CASE WHEN o.type IS NULL THEN d.max_count ELSE o.max_count END AS max_count
      FROM t CROSS JOIN d LEFT JOIN o ON o.type = t.type AND o.state = d.state
      WHERE t.type IS NOT NULL
    ), c AS (
      SELECT p.type, p.state, greatest(
        CASE WHEN p.age_ms IS NULL THEN '-infinity'::timestamptz ELSE now() - p.age_ms * interval '1 millisecond' END,
        CASE WHEN p.max_count IS NULL THEN '-infinity'::timestamptz
             WHEN p.max_count = 0 THEN 'infinity'::timestamptz
             ELSE coalesce((
               SELECT k.updated_at FROM warp_jobs k
               WHERE k.type = p.type AND k.state = p.state AND k.state IN ('Succeeded','Failed','Deleted')
               ORDER BY k.updated_at DESC OFFSET p.max_count - 1 LIMIT 1), '-infinity'::timestamptz) END) AS cutoff
      FROM p
    ), v AS (
      SELECT x.id FROM c CROSS JOIN LATERAL (
        SELECT j.id FROM warp_jobs j
        WHERE j.type = c.type AND j.state = c.state AND j.state IN ('Succeeded','Failed','Deleted') AND j.updated_at < c.cutoff
          AND NOT EXISTS (
            SELECT 1 FROM warp_job_logs l
            WHERE l.job_id = j.id AND l.counter IS NOT NULL AND l.xact >= (SELECT upto FROM warp_counters_rolled))
        ORDER BY j.updated_at LIMIT ${limit}${lock ? sql` FOR UPDATE OF j SKIP LOCKED` : sql``}
      ) x LIMIT ${limit}
    )`
}

/**
 * The per-key history bucket of an event at `at`: the end of its second while it is within the
 * dashboard's shortest window (5 minutes), else the end of its minute (see `Retention.historyBucket`).
 */
const bucket = (sql: SqlClient.SqlClient) => (at: Statement.Fragment) =>
  sql`(CASE WHEN ${at} >= now() - ${FINE_MS} * interval '1 millisecond' THEN date_trunc('second', ${at}) + interval '1 second'
            ELSE date_trunc('minute', ${at}) + interval '1 minute' END)`

/** The statement that removes one batch of expired rows, tombstones them and folds their per-key figures. */
const removal = (sql: SqlClient.SqlClient, plan: RetentionPlan): Statement.Statement<any> => {
  const bucketOf = bucket(sql)
  const key = sql`(j.metadata #>> '{policies,concurrency,value,key}')`
  const day = sql`now() - ${HISTORY_MS} * interval '1 millisecond'`
  return sql`WITH RECURSIVE ${expired(sql, plan, plan.batchSize, true)}, gone AS (
      DELETE FROM warp_jobs j USING v WHERE j.id = v.id
      RETURNING j.id, j.type, j.state, j.updated_at, ${key} AS key
    ), tomb AS (
      INSERT INTO warp_job_tombstones (id, type, state, finished_at, pruned_at)
      SELECT id, type, state, updated_at, now() FROM gone WHERE ${plan.tombstoneMs > 0}
      ON CONFLICT (id) DO UPDATE SET type = EXCLUDED.type, state = EXCLUDED.state, finished_at = EXCLUDED.finished_at, pruned_at = EXCLUDED.pruned_at
    ), folded AS (
      SELECT key, ${bucketOf(sql`updated_at`)} AS at,
             count(*) FILTER (WHERE state = 'Succeeded') AS s, count(*) FILTER (WHERE state = 'Deleted') AS d, 0 AS r
      FROM gone WHERE key IS NOT NULL AND updated_at >= ${day} GROUP BY 1, 2
      UNION ALL
      SELECT g.key, ${bucketOf(sql`l.at`)}, 0, 0, count(*)
      FROM gone g JOIN warp_job_logs l ON l.job_id = g.id
      WHERE g.key IS NOT NULL AND l.kind = 'Requeued' AND l.at >= ${day} GROUP BY 1, 2
    ), hist AS (
      INSERT INTO warp_key_history (key, at, succeeded, deleted, requeued)
      SELECT key, at, sum(s), sum(d), sum(r) FROM folded GROUP BY key, at
      ON CONFLICT (key, at) DO UPDATE SET succeeded = warp_key_history.succeeded + EXCLUDED.succeeded,
        deleted = warp_key_history.deleted + EXCLUDED.deleted, requeued = warp_key_history.requeued + EXCLUDED.requeued
    )
    SELECT state, count(*)::int AS n FROM gone GROUP BY state`
}

/**
 * `JobStoreService.prune`: one batch (see the module), or nothing when another process holds the guard.
 */
export const prune = (sql: SqlClient.SqlClient, plan: RetentionPlan): Effect.Effect<PruneResult, StoreError> =>
  sql
    .withTransaction(
      Effect.gen(function* () {
        const got = yield* sql`SELECT pg_try_advisory_xact_lock(${guard[0]}, ${guard[1]}) AS ok`
        if ((got[0] as any)?.ok !== true) return { ran: false, pruned: { Succeeded: 0, Failed: 0, Deleted: 0 }, tombstones: 0, full: false }
        const rows = yield* removal(sql, plan)
        const pruned = { Succeeded: 0, Failed: 0, Deleted: 0 }
        for (const r of rows as Array<any>) pruned[r.state as keyof typeof pruned] = Number(r.n)
        const n = pruned.Succeeded + pruned.Failed + pruned.Deleted
        const old = plan.tombstoneMs >= FOREVER_MS ? sql`false` : sql`pruned_at < now() - ${plan.tombstoneMs} * interval '1 millisecond'`
        const [t] = yield* sql`
          WITH t AS (
            DELETE FROM warp_job_tombstones WHERE id IN (
              SELECT id FROM warp_job_tombstones WHERE ${old}
              ORDER BY pruned_at LIMIT ${plan.batchSize})
            RETURNING 1
          ), h AS (
            DELETE FROM warp_key_history WHERE (key, at) IN (
              SELECT key, at FROM warp_key_history WHERE at < now() - ${HISTORY_MS} * interval '1 millisecond'
              ORDER BY at LIMIT ${plan.batchSize})
            RETURNING 1
          )
          SELECT (SELECT count(*)::int FROM t) AS t, (SELECT count(*)::int FROM h) AS h`
        const tombstones = Number((t as any)?.t ?? 0)
        return { ran: true, pruned, tombstones, full: n >= plan.batchSize || tombstones >= plan.batchSize }
      })
    )
    .pipe(Effect.mapError(fail("prune")))

/** `JobStoreService.expiredBacklog`: the rows expired under `plan` and not pruned yet, counted up to `cap`. */
export const expiredBacklog = (sql: SqlClient.SqlClient, plan: RetentionPlan, cap: number): Effect.Effect<number, StoreError> =>
  sql`WITH RECURSIVE ${expired(sql, plan, cap, false)} SELECT count(*)::int AS n FROM v`.pipe(
    Effect.map((rows) => Number((rows[0] as any)?.n ?? 0)),
    Effect.mapError(fail("expiredBacklog"))
  )
