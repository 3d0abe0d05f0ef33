/**
 * The key views of the PostgreSQL store. Each read is one statement that reaches rows only through
 * the partial indexes of migration 0006: live keyed rows by (key, state, ScheduleTime, id), ended
 * keyed rows by (key, updated_at) over the last day, and each such job's audit trail by job id. The
 * live view aggregates every live keyed row (not the table) to sort keys by pressure, then reads the
 * details of one page of keys.
 *
 * @since 0.3.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import { isWindow } from "./JobStore.js"
import { type KeyHolder, type KeyInsightService, type KeySummary, maxHolders, windows, type WindowCounts, type WindowName } from "./KeyInsight.js"
import { StoreError } from "./StoreError.js"

const fail = (operation: string) => (cause: unknown) => new StoreError({ operation, cause })

const toDate = (v: unknown): Date | null => (v === null || v === undefined ? null : new Date(v as any))

/** The views' statements on a `SqlClient`, and the views. */
export const makeWithStatements = (sql: SqlClient.SqlClient) => {
  // spelled as in the predicates of `warp_jobs_key_live` / `warp_jobs_key_done`, so the planner uses them
  const key = sql`(metadata #>> '{policies,concurrency,value,key}')`
  const liveKeyed = sql`state IN ('Scheduled','Enqueued','Processing') AND ${key} IS NOT NULL`
  const doneKeyed = sql`state IN ('Succeeded','Failed','Deleted') AND ${key} IS NOT NULL`
  const lim = sql`(metadata #>> '{policies,concurrency,value,limit}')`
  const rowLimit = sql`CASE WHEN ${lim} ~ '^[1-9][0-9]{0,9}$' THEN CASE WHEN ${lim}::bigint <= 2147483647 THEN ${lim}::int ELSE 1 END ELSE 1 END`
  const dueWaiting = sql`state <> 'Processing' AND schedule_time <= now()`
  const waitStart = sql`greatest(created_at, coalesce(origin_for, created_at))`
  const ago = (seconds: number) => sql`now() - ${sql.literal(String(seconds))} * interval '1 second'`
  const day = ago(86_400)

  /** Per key of `keys` (columns key, running, waiting, since, admin_slots, pressure): its details, as one json array. */
  const detailed = (keys: Statement.Fragment) => sql`
    SELECT coalesce(json_agg(json_build_object(
      'key', p.key, 'running', p.running, 'waiting', p.waiting,
      'since', floor(extract(epoch FROM p.since) * 1000)::bigint, 'admin', p.admin_slots, 'pressure', p.pressure,
      'min', d.min_limit, 'max', d.max_limit, 'holders', h.holders,
      'ended', to_json(e), 'requeued', to_json(r)) ORDER BY p.pressure DESC, p.key COLLATE "C"), '[]'::json) AS rows
    FROM (${keys}) p
    LEFT JOIN LATERAL (
      SELECT min(x.lim) AS min_limit, max(x.lim) AS max_limit
      FROM (SELECT ${rowLimit} AS lim FROM warp_jobs WHERE ${liveKeyed} AND ${key} = p.key) x
    ) d ON TRUE
    LEFT JOIN LATERAL (
      SELECT coalesce(json_agg(json_build_array(x.id, x.type, x.locked_by, floor(extract(epoch FROM x.updated_at) * 1000)::bigint)
                               ORDER BY x.updated_at, x.id), '[]'::json) AS holders
      FROM (
        SELECT id, type, locked_by, updated_at FROM warp_jobs
        WHERE ${liveKeyed} AND ${key} = p.key AND state = 'Processing'
        ORDER BY updated_at, id LIMIT ${maxHolders}
      ) x
    ) h ON TRUE
    LEFT JOIN LATERAL (
      SELECT ${sql.csv(
        windows.flatMap((w) => [
          sql`count(*) FILTER (WHERE state = 'Succeeded' AND updated_at >= ${ago(w.seconds)})::int AS ${sql.literal(`s${w.name}`)}`,
          sql`count(*) FILTER (WHERE state = 'Deleted' AND updated_at >= ${ago(w.seconds)})::int AS ${sql.literal(`d${w.name}`)}`
        ])
      )}
      FROM warp_jobs WHERE ${doneKeyed} AND ${key} = p.key AND updated_at >= ${day}
    ) e ON TRUE
    LEFT JOIN LATERAL (
      SELECT ${sql.csv(windows.map((w) => sql`coalesce(sum(c.${sql.literal(`r${w.name}`)}), 0)::int AS ${sql.literal(`r${w.name}`)}`))}
      FROM (
        SELECT id FROM warp_jobs WHERE ${liveKeyed} AND ${key} = p.key
        UNION ALL
        SELECT id FROM warp_jobs WHERE ${doneKeyed} AND ${key} = p.key AND updated_at >= ${day}
      ) j
      -- per job through warp_job_logs_job (job_id, id): never a scan of the audit table
      CROSS JOIN LATERAL (
        SELECT ${sql.csv(windows.map((w) => sql`count(*) FILTER (WHERE l.at >= ${ago(w.seconds)}) AS ${sql.literal(`r${w.name}`)}`))}
        FROM warp_job_logs l WHERE l.job_id = j.id AND l.kind = 'Requeued' AND l.at >= ${day}
      ) c
    ) r ON TRUE`

  const toSummary = (r: any): KeySummary => {
    const counts = {} as Record<WindowName, WindowCounts>
    for (const w of windows) {
      counts[w.name] = {
        requeued: Number(r.requeued?.[`r${w.name}`] ?? 0),
        succeeded: Number(r.ended?.[`s${w.name}`] ?? 0),
        deleted: Number(r.ended?.[`d${w.name}`] ?? 0)
      }
    }
    const holders: ReadonlyArray<KeyHolder> = (r.holders as Array<[string, string, string | null, number | string]>).map(([id, type, workerId, since]) => ({
      id,
      type,
      workerId,
      since: new Date(Number(since))
    }))
    return {
      key: String(r.key),
      running: Number(r.running),
      waiting: Number(r.waiting),
      waitingSince: r.since === null ? null : toDate(Number(r.since)),
      declared: r.min === null || r.min === undefined ? null : { min: Number(r.min), max: Number(r.max) },
      adminSlots: r.admin === null || r.admin === undefined ? null : Number(r.admin),
      pressure: Number(r.pressure ?? 0),
      holders,
      windows: counts
    }
  }
  const rowsOf = (v: unknown): Array<any> => (typeof v === "string" ? JSON.parse(v) : (v as Array<any>))

  /** The statements of the reads (the benchmark EXPLAINs them). */
  const statements = {
    liveKeys: ({ limit, offset, overrides }: Parameters<KeyInsightService["liveKeys"]>[0]) => {
      const window = isWindow(limit, offset)
      return sql`
          WITH o AS (
            SELECT x.key, x.slots FROM jsonb_to_recordset(${JSON.stringify(overrides.map((o) => ({ key: o.key, slots: o.slots })))}::jsonb) AS x(key text, slots int)
          ), live AS (
            SELECT ${key} AS key,
                   count(*) FILTER (WHERE state = 'Processing')::int AS running,
                   count(*) FILTER (WHERE ${dueWaiting})::int AS waiting,
                   min(${waitStart}) FILTER (WHERE ${dueWaiting}) AS since
            FROM warp_jobs WHERE ${liveKeyed}
            GROUP BY 1
          ), k AS (
            SELECT coalesce(l.key, o.key) AS key, coalesce(l.running, 0) AS running, coalesce(l.waiting, 0) AS waiting,
                   l.since, o.slots AS admin_slots,
                   coalesce(l.waiting * greatest(0, extract(epoch FROM now() - l.since))::float8, 0) AS pressure
            FROM live l FULL JOIN o ON o.key = l.key
          ), page AS (
            SELECT * FROM k ORDER BY pressure DESC, key COLLATE "C" LIMIT ${window ? limit : 0} OFFSET ${window ? offset : 0}
          )
          SELECT (SELECT count(*)::int FROM k) AS total, (${detailed(sql`SELECT * FROM page`)}) AS rows`
    },
    line: (k: string, { id, override }: Parameters<KeyInsightService["line"]>[1]) =>
      sql`
          WITH one AS (
            SELECT ${k}::text AS key,
                   count(*) FILTER (WHERE state = 'Processing')::int AS running,
                   count(*) FILTER (WHERE ${dueWaiting})::int AS waiting,
                   min(${waitStart}) FILTER (WHERE ${dueWaiting}) AS since,
                   ${override}::int AS admin_slots
            FROM warp_jobs WHERE ${liveKeyed} AND ${key} = ${k}
          ), k AS (
            SELECT one.*, coalesce(waiting * greatest(0, extract(epoch FROM now() - since))::float8, 0) AS pressure FROM one
          )
          SELECT (${detailed(sql`SELECT * FROM k`)}) AS rows,
                 (SELECT count(*)::int FROM warp_jobs w, (SELECT schedule_time, id FROM warp_jobs WHERE id = ${id}) me
                  WHERE w.state IN ('Scheduled','Enqueued') AND (w.metadata #>> '{policies,concurrency,value,key}') = ${k}
                    AND (w.schedule_time, w.id) < (me.schedule_time, me.id)) AS ahead`
  }

  /**
   * Runs a read with JIT off: the planner's estimates of the per-key lateral reads are far above their
   * cost, which switched JIT on and spent ~1.7 s of a ~2 s live view compiling (10^5 keys, 10^6 jobs).
   */
  const withoutJit = <A, E, R>(read: Effect.Effect<A, E, R>) => sql.withTransaction(Effect.zipRight(sql`SET LOCAL jit = off`, read))

  const service: KeyInsightService = {
    liveKeys: ({ limit, offset, overrides }) =>
      Effect.gen(function* () {
        const rows = yield* withoutJit(statements.liveKeys({ limit, offset, overrides }))
        const row = rows[0] as any
        return { rows: rowsOf(row.rows).map(toSummary), total: Number(row.total) }
      }).pipe(Effect.mapError(fail("liveKeys"))),

    line: (k, { id, override }) =>
      Effect.gen(function* () {
        const rows = yield* withoutJit(statements.line(k, { id, override }))
        const row = rows[0] as any
        return { summary: toSummary(rowsOf(row.rows)[0]), ahead: Number(row.ahead ?? 0) }
      }).pipe(Effect.mapError(fail("line")))
  }
  return { service, statements }
}

/** Builds the views on a `SqlClient`. */
export const make = (sql: SqlClient.SqlClient): KeyInsightService => makeWithStatements(sql).service
