/**
 * The key views of the PostgreSQL store. Each read is one statement that reaches rows only through
 * the partial indexes of migration 0006: live keyed rows by (key, state, ScheduleTime, id), ended
 * keyed rows by (key, updated_at) over the last day, and each such job's audit trail by job id; plus
 * the figures of keyed rows retention pruned within the last day (`warp_key_history`, by key and second).
 *
 * The live view ranks keys by pressure from one aggregate over every live keyed row (not the table),
 * then reads one page of keys — their counts, holders and history — by key, live. Where the ranking
 * is cheap (under {@link RANK_REUSE_FROM_MS}) it runs with every request. Where it is not (10^5 live
 * keys), a request uses the last ranking while it is younger than a few times its own cost (at least
 * 2 s, at most 30 s) and refreshes it in the background once it is older: no request waits for the
 * aggregate but the first, and the page says when its order was computed (`KeyPage.rankedAt`).
 *
 * @since 0.3.0
 */
import type * as SqlClient from "effect/sql/SqlClient"
import type * as Statement from "effect/sql/Statement"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { isWindow } from "./JobStore.js"
import {
  type KeyHolder,
  type KeyInsightService,
  type KeyOverride,
  type KeySummary,
  maxHolders,
  windows,
  type WindowCounts,
  type WindowName
} from "./KeyInsight.js"
import { StoreError } from "./StoreError.js"

const fail = (operation: string) => (cause: unknown) => new StoreError({ operation, cause })

const toDate = (v: unknown): Date | null => (v === null || v === undefined ? null : new Date(v as any))

/** A ranking that took less than this (ms) is computed again for every request. */
export const RANK_REUSE_FROM_MS = 150

/** How long a ranking that took `costMs` is used before it is refreshed (ms); `from`: the cost from which it is reused at all. */
export const rankReuseMs = (costMs: number, from = RANK_REUSE_FROM_MS): number => (costMs < from ? 0 : Math.min(30_000, Math.max(2_000, 5 * costMs)))

/** One key of a ranking: its place is its pressure then its key. */
interface Ranked {
  readonly key: string
  readonly pressure: number
}

/** Keys in the live view's order: pressure, highest first, then key in byte order (as `COLLATE "C"`). */
const byPressure = (a: Ranked, b: Ranked) => b.pressure - a.pressure || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)

/**
 * The views' statements on a `SqlClient`, and the views. `reuseRankingFromMs`: the ranking cost from
 * which a ranking is reused (tests set 0 to see reuse on a small table).
 */
export const makeWithStatements = (sql: SqlClient.SqlClient, { reuseRankingFromMs = RANK_REUSE_FROM_MS }: { readonly reuseRankingFromMs?: number } = {}) => {
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
  // running jobs whose row does not carry their key yet (resolved from the handler or contract in a
  // first attempt), as their workers report them (`WorkerReport.slots`; the registry is small)
  const reported = sql`
    SELECT s.value ->> 'key' AS key, j.id, j.type, j.locked_by, j.updated_at
    FROM warp_workers w
    CROSS JOIN LATERAL jsonb_array_elements(w.slots) s
    CROSS JOIN LATERAL jsonb_array_elements(coalesce(s.value -> 'jobs', '[]'::jsonb)) AS r(job)
    JOIN warp_jobs j ON j.id = r.job ->> 'id' AND j.state = 'Processing' AND j.locked_by = w.id
    WHERE ${sql`(j.metadata #>> '{policies,concurrency,value,key}')`} IS NULL`

  /** Per key of `keys` (columns key, running, waiting, since, admin_slots, pressure): its details, as one json array. */
  const detailed = (keys: Statement.Fragment) => sql`
    SELECT coalesce(json_agg(json_build_object(
      'key', p.key, 'running', p.running, 'waiting', p.waiting,
      'since', floor(extract(epoch FROM p.since) * 1000)::bigint, 'admin', p.admin_slots, 'pressure', p.pressure,
      'min', d.min_limit, 'max', d.max_limit, 'holders', h.holders,
      'ended', to_json(e), 'requeued', to_json(r), 'pruned', to_json(hh)) ORDER BY p.pressure DESC, p.key COLLATE "C"), '[]'::json) AS rows
    FROM (${keys}) p
    LEFT JOIN LATERAL (
      SELECT min(x.lim) AS min_limit, max(x.lim) AS max_limit
      FROM (SELECT ${rowLimit} AS lim FROM warp_jobs WHERE ${liveKeyed} AND ${key} = p.key) x
    ) d ON TRUE
    LEFT JOIN LATERAL (
      SELECT coalesce(json_agg(json_build_array(x.id, x.type, x.locked_by, floor(extract(epoch FROM x.updated_at) * 1000)::bigint)
                               ORDER BY x.updated_at, x.id), '[]'::json) AS holders
      FROM (
        (SELECT id, type, locked_by, updated_at FROM warp_jobs
         WHERE ${liveKeyed} AND ${key} = p.key AND state = 'Processing'
         ORDER BY updated_at, id LIMIT ${maxHolders})
        UNION ALL
        (SELECT id, type, locked_by, updated_at FROM (${reported}) rp WHERE rp.key = p.key)
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
    ) r ON TRUE
    -- pruned keyed jobs of the last day, folded per (key, second) by retention (warp_key_history)
    LEFT JOIN LATERAL (
      SELECT ${sql.csv(
        windows.flatMap((w) => [
          sql`coalesce(sum(succeeded) FILTER (WHERE at >= ${ago(w.seconds)}), 0)::int AS ${sql.literal(`s${w.name}`)}`,
          sql`coalesce(sum(deleted) FILTER (WHERE at >= ${ago(w.seconds)}), 0)::int AS ${sql.literal(`d${w.name}`)}`,
          sql`coalesce(sum(requeued) FILTER (WHERE at >= ${ago(w.seconds)}), 0)::int AS ${sql.literal(`r${w.name}`)}`
        ])
      )}
      FROM warp_key_history WHERE key = p.key AND at >= ${day}
    ) hh ON TRUE`

  const toSummary = (r: any): KeySummary => {
    const counts = {} as Record<WindowName, WindowCounts>
    for (const w of windows) {
      // the rows' figures plus those of the pruned rows (retention's per-key history)
      counts[w.name] = {
        requeued: Number(r.requeued?.[`r${w.name}`] ?? 0) + Number(r.pruned?.[`r${w.name}`] ?? 0),
        succeeded: Number(r.ended?.[`s${w.name}`] ?? 0) + Number(r.pruned?.[`s${w.name}`] ?? 0),
        deleted: Number(r.ended?.[`d${w.name}`] ?? 0) + Number(r.pruned?.[`d${w.name}`] ?? 0)
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
    /** Every live key with its pressure (unordered: the caller sorts). */
    ranking: () => sql`
          SELECT key, max(pressure) AS pressure FROM (
            SELECT ${key} AS key,
                   coalesce(count(*) FILTER (WHERE ${dueWaiting}) * greatest(0, extract(epoch FROM now() - min(${waitStart}) FILTER (WHERE ${dueWaiting})))::float8, 0) AS pressure
            FROM warp_jobs WHERE ${liveKeyed}
            GROUP BY 1
            UNION ALL
            SELECT key, 0 FROM (${reported}) rp
          ) k GROUP BY key`,
    /** The details of `keys` (in the ranking's order, given by `pressures`), counted live. */
    keysPage: (keys: ReadonlyArray<string>, pressures: ReadonlyArray<number>, overrides: ReadonlyArray<KeyOverride>) => sql`
          WITH o AS (
            SELECT x.key, x.slots FROM jsonb_to_recordset(${JSON.stringify(overrides.map((o) => ({ key: o.key, slots: o.slots })))}::jsonb) AS x(key text, slots int)
          ), page AS (
            SELECT p.key, p.pressure, c.running + (SELECT count(*)::int FROM (${reported}) rp WHERE rp.key = p.key) AS running,
                   c.waiting, c.since, o.slots AS admin_slots
            FROM jsonb_to_recordset(${JSON.stringify(keys.map((k, i) => ({ key: k, pressure: pressures[i] })))}::jsonb) AS p(key text, pressure float8)
            LEFT JOIN o ON o.key = p.key
            CROSS JOIN LATERAL (
              SELECT count(*) FILTER (WHERE state = 'Processing')::int AS running,
                     count(*) FILTER (WHERE ${dueWaiting})::int AS waiting,
                     min(${waitStart}) FILTER (WHERE ${dueWaiting}) AS since
              FROM warp_jobs WHERE ${liveKeyed} AND ${key} = p.key
            ) c
          )
          SELECT (${detailed(sql`SELECT * FROM page`)}) AS rows`,
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
            SELECT one.key, one.running + (SELECT count(*)::int FROM (${reported}) rp WHERE rp.key = one.key) AS running,
                   one.waiting, one.since, one.admin_slots,
                   coalesce(waiting * greatest(0, extract(epoch FROM now() - since))::float8, 0) AS pressure FROM one
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
  const withoutJit = <A, E, R>(read: Effect.Effect<A, E, R>) => sql.withTransaction(Effect.andThen(sql`SET LOCAL jit = off`, read))

  // the last ranking, and whether one is being computed
  interface Ranking {
    readonly at: number
    readonly costMs: number
    readonly keys: ReadonlyArray<Ranked>
    /** The ranking with the admin overrides of keys with no live row (pressure 0), for the last overrides asked. */
    merged?: { readonly overrides: string; readonly all: ReadonlyArray<Ranked> }
  }
  let last: Ranking | undefined
  let refreshing = false
  const rank = Effect.gen(function* () {
    const started = yield* Clock.currentTimeMillis
    const rows = yield* withoutJit(statements.ranking())
    const keys = rows.map((r: any): Ranked => ({ key: String(r.key), pressure: Number(r.pressure) })).sort(byPressure)
    const costMs = (yield* Clock.currentTimeMillis) - started
    const ranking: Ranking = { at: started, costMs, keys }
    last = ranking
    return ranking
  })
  /** The ranking a request uses: the last one while it is young enough (refreshed behind it when not), else a new one. */
  const currentRanking = Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const kept = last
    const reuseMs = kept === undefined ? 0 : rankReuseMs(kept.costMs, reuseRankingFromMs)
    if (kept !== undefined && reuseMs > 0) {
      if (now - kept.at >= reuseMs && !refreshing) {
        refreshing = true
        yield* Effect.forkDetach(rank.pipe(Effect.ignore, Effect.ensuring(Effect.sync(() => void (refreshing = false)))))
      }
      return { ranking: kept, reused: true }
    }
    return { ranking: yield* rank, reused: false }
  })

  const service: KeyInsightService = {
    liveKeys: ({ limit, offset, overrides }) =>
      Effect.gen(function* () {
        const { ranking, reused } = yield* currentRanking
        // admin overrides of keys with no live row rank with pressure 0 (merged once per ranking and overrides)
        const signature = overrides.map((o) => o.key).join("\u0000")
        if (ranking.merged?.overrides !== signature) {
          const ranked = new Set(ranking.keys.map((k) => k.key))
          const extra = [...new Set(overrides.map((o) => o.key))].filter((k) => !ranked.has(k)).map((k): Ranked => ({ key: k, pressure: 0 }))
          ranking.merged = { overrides: signature, all: extra.length === 0 ? ranking.keys : [...ranking.keys, ...extra].sort(byPressure) }
        }
        const all = ranking.merged.all
        const page = isWindow(limit, offset) ? all.slice(offset, offset + limit) : []
        const place = new Map(page.map((r, i) => [r.key, i]))
        const rows =
          page.length === 0
            ? []
            : rowsOf(((yield* withoutJit(statements.keysPage(page.map((r) => r.key), page.map((r) => r.pressure), overrides)))[0] as any).rows)
                .map(toSummary)
                .sort((a, b) => place.get(a.key)! - place.get(b.key)!)
        return { rows, total: all.length, ...(reused ? { rankedAt: new Date(ranking.at) } : {}) }
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
