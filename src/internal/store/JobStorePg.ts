/**
 * The PostgreSQL job store (@effect/sql-pg). Each operation is one SQL statement: claims use
 * `FOR UPDATE SKIP LOCKED` (and read the admin override of each claimed row's concurrency key), and an
 * attempt's finalizing write updates the row, appends the audit entry and bumps the counters in one
 * round trip — on the held slot's connection, unlocking the slot too, when the worker hands it the
 * slot's release of a `SemaphoreProviderPg` on the same `SqlClient`. Fifo-mode rows are claimed in submission order per
 * key (see `JobStoreService.fetch`). An insert of more than `insertChunk` rows is one statement per
 * chunk, all in one transaction (a savepoint inside the caller's). Every statement runs on the
 * `SqlClient` in context, so inside the caller's `withTransaction` it joins that transaction.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Job, type JobLog, type NewJob } from "../job/Job.js"
import type { LogKind } from "../job/Outcome.js"
import { JobState } from "../job/JobState.js"
import { counterOf, logOf, stateOf } from "../job/Outcome.js"
import {
  cancelText,
  claimOrder,
  counterKeys,
  emptyCounts,
  isStorableId,
  isWindow,
  type JobFilter,
  JobStore,
  type JobStoreService,
  operatorCause,
  operatorFrom,
  operatorTo,
  replacedCause,
  type WorkerInfo
} from "./JobStore.js"
import * as SemaphoreProviderPg from "../semaphore/SemaphoreProviderPg.js"
import * as KeyInsightPg from "./KeyInsightPg.js"
import * as Migrations from "./Migrations.js"
import { StoreError } from "./StoreError.js"

/**
 * Maps a `warp_jobs` row to a {@link Job}. The table's types and CHECK constraints already hold what
 * the schema would check, so the constructor's validation is skipped on this hot path.
 */
export const rowToJob = (r: any): Job =>
  new Job(
    {
      id: r.id,
      type: r.type,
      handler: r.handler ?? null,
      payload: r.payload,
      state: r.state,
      scheduleTime: new Date(r.schedule_time),
      metadata: r.metadata,
      attempt: Number(r.attempt),
      createdAt: new Date(r.created_at),
      updatedAt: new Date(r.updated_at),
      lockedBy: r.locked_by ?? null,
      leaseUntil: r.lease_until === null || r.lease_until === undefined ? null : new Date(r.lease_until),
      ...(typeof r.admin_key === "string" ? { adminLimit: { key: r.admin_key, slots: r.admin_slots === null ? null : Number(r.admin_slots) } } : {}),
      ...(typeof r.cancel_requested === "string" ? { cancelRequested: r.cancel_requested } : {})
    },
    true
  )

/**
 * The creation entry of a row's audit trail, derived from the row (`origin`, `origin_for`,
 * `created_at`); undefined for a row inserted before migration 0004, whose entry is a log row.
 */
export const originEntry = (r: any): JobLog | undefined =>
  r.origin === "Scheduled" || r.origin === "Enqueued"
    ? {
        jobId: r.id,
        at: new Date(r.created_at),
        kind: r.origin,
        message: r.origin === "Scheduled" ? `Scheduled for ${new Date(r.origin_for).toISOString().replace(/\.\d{3}Z$/, "Z")}` : "Enqueued"
      }
    : undefined

/** Splits `rows` into chunks of at most `size`. */
const chunks = <A>(rows: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < rows.length; i += size) out.push(rows.slice(i, i + size))
  return out
}

/**
 * Rows per insert statement. Every chunk is a handful of array parameters whatever its size, so the
 * protocol's parameter limit never bites. On bulks of 10^5 jobs, 5,000 rows a statement measured faster
 * than 2,000 (noisy, shared machine); a bulk of up to 5,000 is one statement, without a transaction.
 */
export const insertChunk = 5000

/**
 * Shards per counter: a finalizing write bumps the counters of one shard picked at random, so no
 * counter row is updated by every worker; a counter is the sum of its shards (migration 0005).
 */
export const COUNTER_SHARDS = 16

const fail = (operation: string) => (cause: unknown) => new StoreError({ operation, cause })

/** Builds the PostgreSQL store on the `SqlClient` in context. */
export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const locks = yield* SemaphoreProviderPg.make()

  /**
   * Adds 1 to each counter `keys` yields for each row of `rows`, on one random shard (concurrent
   * writes spread over the shards instead of queueing on one row).
   */
  const bumpCounters = (rows: Statement.Fragment, keys: Statement.Fragment) => sql`
    INSERT INTO warp_counters (key, shard, value)
    SELECT k, ${Math.floor(Math.random() * COUNTER_SHARDS)}, 1 FROM ${rows}, ${keys} AS k
    ON CONFLICT (key, shard) DO UPDATE SET value = warp_counters.value + 1`

  /**
   * Whether `warp_concurrency_limits` exists (the concurrency addon's migration ran): claims then read
   * the override of each claimed row's key — ignoring an expired one when the table has `expires_at`
   * (migration 0002). Checked at build; while absent or without `expires_at`, again at most every 10 s.
   */
  type LimitsTable = "absent" | "plain" | "expiring"
  const limitsTable = sql`SELECT to_regclass('warp_concurrency_limits') IS NOT NULL AS present,
      EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('warp_concurrency_limits')
              AND attname = 'expires_at' AND NOT attisdropped) AS expiring`.pipe(
    Effect.map((rows): LimitsTable => ((rows[0] as any)?.present !== true ? "absent" : (rows[0] as any)?.expiring === true ? "expiring" : "plain")),
    Effect.orElseSucceed((): LimitsTable => "absent")
  )
  let hasLimits = yield* limitsTable
  let limitsCheckedAt = Date.now()
  const readsLimits = Effect.suspend(() => {
    if (hasLimits === "expiring" || Date.now() - limitsCheckedAt < 10_000) return Effect.succeed(hasLimits)
    limitsCheckedAt = Date.now()
    return Effect.tap(limitsTable, (present) => Effect.sync(() => (hasLimits = present)))
  })

  /**
   * One statement for a chunk: one `warp_jobs` row per job and no audit row (the creation entry is
   * derived from `origin` / `origin_for` / `created_at`, see `get`). Columns alike across the chunk (a
   * batch of one contract: type, handler, state, ScheduleTime, usually metadata) are sent once as
   * scalars; the others as arrays that `unnest` turns into rows in one set operation.
   */
  const insertRows = (rows: ReadonlyArray<NewJob>) => {
    const first = rows[0]!
    if (rows.length === 1) {
      // a single enqueue: plain VALUES, no arrays to build and parse
      const at = first.scheduleTime.toISOString()
      return sql`
        INSERT INTO warp_jobs (id, type, handler, payload, state, schedule_time, metadata, origin, origin_for)
        VALUES (${first.id}, ${first.type}, ${first.handler}, ${JSON.stringify(first.payload)}::jsonb, ${first.state}, ${at}::timestamptz,
                ${JSON.stringify(first.metadata)}::jsonb, ${first.state}, ${first.state === "Scheduled" ? at : null}::timestamptz)`.pipe(Effect.asVoid)
    }
    const arrays: Array<Statement.Fragment> = [sql`${rows.map((r) => r.id)}::text[]`, sql`${rows.map((r) => JSON.stringify(r.payload))}::jsonb[]`]
    const names = ["id", "payload"]
    const column = <A>(name: string, type: string, get: (r: NewJob) => A, wire: (a: A) => unknown): Statement.Fragment => {
      const v = get(first)
      if (rows.every((r) => get(r) === v)) return sql`${wire(v)}::${sql.literal(type)}`
      arrays.push(sql`${rows.map((r) => wire(get(r)))}::${sql.literal(type)}[]`)
      names.push(name)
      return sql`x.${sql.literal(name)}`
    }
    const type = column("type", "text", (r) => r.type, (a) => a)
    const handler = column("handler", "text", (r) => r.handler, (a) => a)
    const state = column("state", "text", (r) => r.state, (a) => a)
    const scheduleTime = column("schedule_time", "timestamptz", (r) => r.scheduleTime.getTime(), (ms) => new Date(ms).toISOString())
    const metadata = column("metadata", "jsonb", (r) => (r.metadata === first.metadata ? first.metadata : JSON.stringify(r.metadata)), (m) =>
      typeof m === "string" ? m : JSON.stringify(m))
    return sql`
      INSERT INTO warp_jobs (id, type, handler, payload, state, schedule_time, metadata, origin, origin_for)
      SELECT x.id, ${type}, ${handler}, x.payload, ${state}, ${scheduleTime}, ${metadata}, ${state},
             CASE WHEN ${state} = 'Scheduled' THEN ${scheduleTime} END
      FROM unnest(${sql.csv(arrays)}) AS x(${sql.literal(names.join(", "))})`.pipe(Effect.asVoid)
  }

  /** The WHERE clause of a filter, or undefined when no row can match it. */
  const filterSql = (f: JobFilter): Statement.Fragment | undefined => {
    const clauses: Array<Statement.Fragment> = [sql`TRUE`]
    for (const text of [f.id, f.type, f.keyPrefix]) if (text !== undefined && !isStorableId(text)) return undefined
    for (const d of [f.createdAfter, f.createdBefore]) if (d !== undefined && Number.isNaN(d.getTime())) return undefined
    if (f.state !== undefined) {
      if (!JobState.literals.includes(f.state)) return undefined
      clauses.push(sql`state = ${f.state}`)
    }
    if (f.states !== undefined) {
      const states = f.states.filter((s) => JobState.literals.includes(s))
      if (states.length === 0) return undefined
      clauses.push(sql`state IN (SELECT jsonb_array_elements_text(${JSON.stringify(states)}::jsonb))`)
    }
    if (f.id !== undefined) clauses.push(sql`id = ${f.id}`)
    if (f.type !== undefined) clauses.push(sql`type = ${f.type}`)
    // a plain prefix: starts_with treats % and _ as characters (no LIKE pattern is built from input)
    if (f.keyPrefix !== undefined) clauses.push(sql`starts_with(metadata #>> '{policies,concurrency,value,key}', ${f.keyPrefix})`)
    if (f.createdAfter !== undefined) clauses.push(sql`created_at >= ${f.createdAfter.toISOString()}::timestamptz`)
    if (f.createdBefore !== undefined) clauses.push(sql`created_at < ${f.createdBefore.toISOString()}::timestamptz`)
    return sql.and(clauses)
  }

  const service: JobStoreService = {
    insert: (rows) =>
      rows.length === 0
        ? Effect.void
        : (rows.length <= insertChunk
            ? insertRows(rows)
            : sql.withTransaction(Effect.forEach(chunks(rows, insertChunk), insertRows, { discard: true }))
          ).pipe(Effect.mapError(fail("insert"))),

    fetch: (workerId, limit, lease, hint = { contended: [] }) =>
      Effect.flatMap(readsLimits, (limitsTable) => {
        const withLimits = limitsTable !== "absent"
        const due = sql`state IN ('Scheduled', 'Enqueued') AND schedule_time <= now()`
        const key = sql`(metadata #>> '{policies,concurrency,value,key}')`
        // the predicates of the partial indexes `warp_jobs_fifo` and `warp_jobs_due_plain`, spelled alike
        const liveFifo = sql`state IN ('Scheduled','Enqueued','Processing') AND (metadata #>> '{policies,concurrency,value,mode}') = 'Fifo'`
        const plain = sql`((metadata #>> '{policies,concurrency,value,mode}') IS DISTINCT FROM 'Fifo' OR ${key} IS NULL)`
        // a row's limit; one that is not a valid limit (hand-corrupted metadata) counts as 1, so that the
        // row is claimed in turn and the worker fails it (a bad cast would fail every fetch)
        const lim = sql`(metadata #>> '{policies,concurrency,value,limit}')`
        const rowLimit = sql`CASE WHEN ${lim} ~ '^[1-9][0-9]{0,9}$' THEN CASE WHEN ${lim}::bigint <= 2147483647 THEN ${lim}::int ELSE 1 END ELSE 1 END`
        const claim =
          hint.sameSlot !== undefined
            ? // the fiber holds a slot of this key: only rows of exactly that policy, near the head
              // (candidates come from an uncorrelated sub-select over the head, then are locked by
              // primary key: a plan that stays linear even when the table's statistics are stale)
              sql`
          SELECT id, state AS prev_state FROM warp_jobs
          WHERE id = ANY(ARRAY(
              SELECT h.id FROM (
                SELECT id, schedule_time, metadata FROM warp_jobs WHERE ${due} ORDER BY schedule_time LIMIT ${hint.sameSlot.depth}
              ) h
              WHERE (h.metadata #>> '{policies,concurrency,value,key}') = ${hint.sameSlot.key}
                AND (h.metadata #>> '{policies,concurrency,value,mode}') = 'Wait'
                AND (h.metadata #>> '{policies,concurrency,value,limit}') = ${String(hint.sameSlot.limit)}
              ORDER BY h.schedule_time
              LIMIT ${limit + 15}))
            AND state IN ('Scheduled', 'Enqueued')
          ORDER BY schedule_time
          LIMIT ${limit}
          FOR UPDATE SKIP LOCKED`
            : // index-ordered branches instead of one OR: expired leases, then the due rows of Fifo keys
              // whose turn it is and the other due rows, merged by ScheduleTime. Each walks its partial
              // index and stops at `limit`, where an OR scanned and sorted the table. Rows of keys the
              // fiber just found full are left to other fibers (Fifo rows wait for their turn anyway).
              //
              // Fifo: the distinct keys with live Fifo rows come from a loose scan of `warp_jobs_fifo` (one
              // probe per key, however deep its backlog); per key, the first `limit` + running rows in line
              // by (created_at, id) are read from the same index, and a due pending one is claimable when
              // the rows Processing plus the pending rows ahead of it are fewer than its limit. Claims of
              // one key are serialized by a transaction advisory lock on the key (two-int key space), taken
              // only for the keys of the oldest `limit` candidates; rows are then locked as usual. One fetch
              // claims at most one Fifo row — of the locked keys' first claimable rows, the one due first —
              // and the worker runs it first (see `claimOrder`).
              sql`
          WITH RECURSIVE expired AS (
            SELECT id, state AS prev_state FROM warp_jobs
            WHERE state = 'Processing' AND lease_until < now()
            ORDER BY lease_until
            LIMIT ${limit}
            FOR UPDATE SKIP LOCKED
          ), ready AS (
            SELECT id, state AS prev_state, schedule_time FROM warp_jobs
            WHERE ${due} AND ${plain}${
              hint.contended.length === 0
                ? sql``
                : sql` AND coalesce(${key} <> ALL(ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(hint.contended)}::jsonb))), TRUE)`
            }
            ORDER BY schedule_time
            LIMIT ${limit}
            FOR UPDATE SKIP LOCKED
          ), fifo_keys(k) AS (
            (SELECT ${key} FROM warp_jobs WHERE ${liveFifo} ORDER BY ${key} LIMIT 1)
            UNION ALL
            SELECT (SELECT ${key} FROM warp_jobs WHERE ${liveFifo} AND ${key} > f.k ORDER BY ${key} LIMIT 1)
            FROM fifo_keys f WHERE f.k IS NOT NULL
          ), fifo_heads AS (
            SELECT h.id, f.k, h.schedule_time, h.created_at FROM fifo_keys f
            CROSS JOIN LATERAL (
              SELECT count(*)::int AS n FROM warp_jobs WHERE ${liveFifo} AND ${key} = f.k AND state = 'Processing'
            ) r
            CROSS JOIN LATERAL (
              SELECT x.id, x.state, x.schedule_time, x.created_at, x.lim,
                     count(*) FILTER (WHERE x.state <> 'Processing')
                       OVER (ORDER BY x.created_at, x.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS ahead
              FROM (
                SELECT id, state, schedule_time, created_at, ${rowLimit} AS lim
                FROM warp_jobs
                WHERE ${liveFifo} AND ${key} = f.k AND (state = 'Processing' OR attempt > 0 OR schedule_time <= now())
                ORDER BY created_at, id
                LIMIT ${limit} + r.n
              ) x
            ) h
            WHERE f.k IS NOT NULL AND h.state <> 'Processing' AND h.schedule_time <= now() AND h.ahead + r.n < h.lim
          ), fifo_picked AS MATERIALIZED (
            SELECT c.k FROM (
              SELECT t.k, min(t.schedule_time) AS first FROM (
                SELECT k, schedule_time FROM fifo_heads ORDER BY schedule_time LIMIT ${limit}
              ) t GROUP BY t.k
            ) c
            WHERE pg_try_advisory_xact_lock(
              ('x' || substr(md5('warp:fifo:' || c.k), 1, 8))::bit(32)::int,
              ('x' || substr(md5('warp:fifo:' || c.k), 9, 8))::bit(32)::int)
          ), fifo AS (
            SELECT id, state AS prev_state, schedule_time FROM warp_jobs
            WHERE id = ANY(ARRAY(
                SELECT DISTINCT ON (k) id FROM fifo_heads WHERE k IN (SELECT k FROM fifo_picked) ORDER BY k, created_at, id))
              AND ${due}
            ORDER BY schedule_time
            LIMIT 1
            FOR UPDATE SKIP LOCKED
          )
          (SELECT id, prev_state FROM expired)
          UNION ALL
          (SELECT id, prev_state FROM ((SELECT * FROM fifo) UNION ALL (SELECT * FROM ready) ORDER BY schedule_time LIMIT ${limit}) m)
          LIMIT ${limit}`
        return sql`
        WITH c AS (${claim}
        ), u AS (
          UPDATE warp_jobs j
          SET state = 'Processing', attempt = j.attempt + 1, locked_by = ${workerId},
              lease_until = now() + ${Duration.toMillis(lease)} * interval '1 millisecond', updated_at = now()
          FROM c WHERE j.id = c.id
          RETURNING j.*, c.prev_state
        ), l AS (
          INSERT INTO warp_job_logs (job_id, kind, message)
          SELECT id,
                 CASE WHEN prev_state = 'Processing' THEN 'Recovered' ELSE 'Processing' END,
                 CASE WHEN prev_state = 'Processing' THEN 'Lease expired; attempt ' || attempt || ' claimed by ' || locked_by
                      ELSE 'Attempt ' || attempt || ' claimed by ' || locked_by END
          FROM u
        )
        SELECT u.*${
          withLimits
            ? sql`, a.key AS admin_key, (SELECT slots FROM warp_concurrency_limits WHERE key = a.key${
                limitsTable === "expiring" ? sql` AND (expires_at IS NULL OR expires_at > now())` : sql``
              }) AS admin_slots`
            : sql``
        }
        FROM u${withLimits ? sql` CROSS JOIN LATERAL (SELECT ${sql`(u.metadata #>> '{policies,concurrency,value,key}')`} AS key) a` : sql``}
        ORDER BY schedule_time, id`
      }).pipe(
        Effect.map((rows) => claimOrder(rows.map(rowToJob))),
        Effect.mapError(fail("fetch"))
      ),

    finalize: ({ handlerRan = true, job, metadata, outcome, release, workerId }) => {
      const state = stateOf(outcome, new Date())
      const log = logOf(outcome)
      const at = outcome._tag === "Requeued" && outcome.at !== undefined ? outcome.at.toISOString() : null
      const keys = JSON.stringify(counterKeys(counterOf(outcome), job.type))
      // the slot's release, fused into this statement when it is held on a connection of this client
      const fused = release !== undefined && release.client === sql ? release : undefined
      const statement = sql`
        WITH u AS (
          UPDATE warp_jobs
          SET state = ${state}, metadata = ${JSON.stringify(metadata)}::jsonb,
              schedule_time = CASE WHEN ${state} IN ('Enqueued', 'Scheduled')
                                   THEN greatest(now(), coalesce(${at}::timestamptz, now())) ELSE schedule_time END,
              locked_by = NULL, lease_until = NULL, updated_at = now(),
              attempt = CASE WHEN ${handlerRan} THEN attempt ELSE attempt - 1 END,
              cancel_requested = CASE WHEN ${state} IN ('Enqueued', 'Scheduled') THEN cancel_requested END,
              holder_key = NULL
          WHERE id = ${job.id} AND state = 'Processing' AND locked_by = ${workerId} AND attempt = ${job.attempt}
          RETURNING id
        ), l AS (
          INSERT INTO warp_job_logs (job_id, kind, message) SELECT id, ${log.kind}, ${log.message} FROM u
        ), c AS (
          ${bumpCounters(sql`u`, sql`jsonb_array_elements_text(${keys}::jsonb)`)}
        )${
          fused === undefined
            ? sql``
            : sql`, r AS (${fused.statement})`
        }
        SELECT count(*)::int AS n${fused === undefined ? sql`` : sql`, (SELECT released FROM r) AS released`} FROM u`
      const written = (rows: ReadonlyArray<unknown>) => Number((rows[0] as any)?.n ?? 0) === 1
      if (fused === undefined) return statement.pipe(Effect.map(written), Effect.mapError(fail("finalize")))
      const [text, params] = statement.compile()
      // the slot's connection could not run it (lost, or the statement failed there): the slot is lost
      // either way, and the write goes through the pool (it lands only if this attempt still owns the row)
      return fused.run(text, params).pipe(
        Effect.map(written),
        Effect.catchTag("SemaphoreError", () => statement.pipe(Effect.map(written))),
        Effect.mapError(fail("finalize"))
      )
    },

    appendLog: (jobId, kind, message) =>
      sql`INSERT INTO warp_job_logs (job_id, kind, message) SELECT id, ${kind}, ${message} FROM warp_jobs WHERE id = ${jobId}`.pipe(
        Effect.asVoid,
        Effect.mapError(fail("appendLog"))
      ),

    heartbeat: (workerId, ids, lease) =>
      ids.length === 0
        ? Effect.void
        : sql`
          UPDATE warp_jobs SET lease_until = now() + ${Duration.toMillis(lease)} * interval '1 millisecond'
          WHERE state = 'Processing' AND locked_by = ${workerId}
            AND id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb))`.pipe(
            Effect.asVoid,
            Effect.mapError(fail("heartbeat"))
          ),

    requestCancel: (id, reason) =>
      Effect.gen(function* () {
        if (!isStorableId(id) || !isStorableId(reason)) return "NotFound" as const
        // one statement: a waiting row is Deleted (audit entry, counters), a running one is marked for its worker
        const rows = yield* sql`
          WITH j AS (SELECT id, type, state FROM warp_jobs WHERE id = ${id} FOR UPDATE),
          d AS (
            UPDATE warp_jobs w SET state = 'Deleted', locked_by = NULL, lease_until = NULL, cancel_requested = NULL, updated_at = now()
            FROM j WHERE w.id = j.id AND j.state IN ('Enqueued', 'Scheduled') RETURNING w.id
          ), m AS (
            UPDATE warp_jobs w SET cancel_requested = ${operatorCause(reason)}
            FROM j WHERE w.id = j.id AND j.state = 'Processing' RETURNING w.id
          ), l AS (
            INSERT INTO warp_job_logs (job_id, kind, message) SELECT id, 'Cancelled', ${cancelText(operatorCause(reason))} FROM d
          ), c AS (
            ${bumpCounters(sql`d, j`, sql`unnest(ARRAY['stats:deleted', 'stats:deleted:' || j.type])`)}
          )
          SELECT j.state FROM j`
        if (rows.length === 0) return "NotFound" as const
        const state = (rows[0] as any).state as JobState
        return state === "Processing" ? ("Cancelling" as const) : state === "Enqueued" || state === "Scheduled" ? ("Cancelled" as const) : ("Finished" as const)
      }).pipe(Effect.mapError(fail("requestCancel"))),

    markHolder: (id, workerId, key) =>
      sql`UPDATE warp_jobs SET holder_key = ${key} WHERE id = ${id} AND state = 'Processing' AND locked_by = ${workerId}`.pipe(
        Effect.asVoid,
        Effect.mapError(fail("markHolder"))
      ),

    cancelHolders: (key, newer) =>
      sql`
        UPDATE warp_jobs SET cancel_requested = ${replacedCause(key, newer.id)}
        WHERE state = 'Processing' AND holder_key = ${key} AND cancel_requested IS NULL AND id <> ${newer.id}
          AND (created_at, id) < (${newer.createdAt.toISOString()}::timestamptz, ${newer.id})
        RETURNING id`.pipe(
        Effect.map((rows) => (rows as Array<any>).map((r) => String(r.id)).sort()),
        Effect.mapError(fail("cancelHolders"))
      ),

    cancelRequests: (workerId, ids) =>
      ids.length === 0
        ? Effect.succeed([])
        : sql`
          SELECT id, cancel_requested FROM warp_jobs
          WHERE id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb))
            AND state = 'Processing' AND locked_by = ${workerId} AND cancel_requested IS NOT NULL`.pipe(
            Effect.map((rows) => (rows as Array<any>).map((r) => ({ id: String(r.id), cause: String(r.cancel_requested) }))),
            Effect.mapError(fail("cancelRequests"))
          ),

    reportWorker: (r) =>
      sql`
        INSERT INTO warp_workers (id, host, pid, lanes, in_flight, slots, heartbeat_ms, last_outage_ms, last_outage_end)
        VALUES (${r.workerId}, ${r.host}, ${r.pid}, ${r.lanes}, ${r.inFlight}, ${JSON.stringify(r.slots)}::jsonb, ${Math.round(r.heartbeatMs)},
                ${r.lastOutage === undefined ? null : Math.round(r.lastOutage.ms)}, ${r.lastOutage === undefined ? null : r.lastOutage.endedAt.toISOString()})
        ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, lanes = EXCLUDED.lanes, in_flight = EXCLUDED.in_flight, slots = EXCLUDED.slots,
          heartbeat_ms = EXCLUDED.heartbeat_ms, seen_at = now(),
          last_outage_ms = coalesce(EXCLUDED.last_outage_ms, warp_workers.last_outage_ms),
          last_outage_end = coalesce(EXCLUDED.last_outage_end, warp_workers.last_outage_end)`.pipe(
        Effect.asVoid,
        Effect.mapError(fail("reportWorker"))
      ),

    removeWorker: (workerId) =>
      sql`DELETE FROM warp_workers WHERE id = ${workerId}`.pipe(Effect.asVoid, Effect.mapError(fail("removeWorker"))),

    workers: sql`
      SELECT w.*, floor(extract(epoch FROM now() - w.seen_at) * 1000)::bigint AS silent_ms,
        (SELECT count(*)::int FROM warp_jobs WHERE state = 'Processing' AND locked_by = w.id) AS holding
      FROM warp_workers w ORDER BY w.started_at, w.id`.pipe(
      Effect.map((rows) =>
        (rows as Array<any>).map((r): WorkerInfo => {
          const slots: Array<{ key: string; held: number }> = typeof r.slots === "string" ? JSON.parse(r.slots) : r.slots
          return {
            workerId: r.id,
            host: r.host,
            pid: Number(r.pid),
            lanes: Number(r.lanes),
            inFlight: Number(r.in_flight),
            heartbeatMs: Number(r.heartbeat_ms),
            ...(r.last_outage_ms === null ? {} : { lastOutage: { ms: Number(r.last_outage_ms), endedAt: new Date(r.last_outage_end) } }),
            startedAt: new Date(r.started_at),
            seenAt: new Date(r.seen_at),
            silentMs: Number(r.silent_ms),
            slots: slots.map(({ held, key }) => ({ key: String(key), held: Number(held) })),
            holding: Number(r.holding)
          }
        })
      ),
      Effect.mapError(fail("workers"))
    ),

    get: (id) =>
      Effect.gen(function* () {
        // an id no row can have (a NUL, an unpaired surrogate, not a string) is not found, not an error
        if (!isStorableId(id)) return Option.none()
        // row and trail in one statement: one snapshot, so the trail never lags or leads the row
        const rows = yield* sql`
          SELECT j.*, coalesce((
            SELECT json_agg(json_build_array(floor(extract(epoch FROM l.at) * 1000)::bigint, l.kind, l.message) ORDER BY l.id)
            FROM warp_job_logs l WHERE l.job_id = j.id), '[]'::json) AS trail
          FROM warp_jobs j WHERE j.id = ${id}`
        if (rows.length === 0) return Option.none()
        const row = rows[0] as any
        const trail: ReadonlyArray<readonly [number | string, LogKind, string]> = typeof row.trail === "string" ? JSON.parse(row.trail) : row.trail
        const created = originEntry(row)
        return Option.some({
          job: rowToJob(row),
          logs: (created === undefined ? [] : [created]).concat(
            trail.map(([at, kind, message]): JobLog => ({ jobId: id, at: new Date(Number(at)), kind, message }))
          )
        })
      }).pipe(Effect.mapError(fail("get"))),

    list: ({ limit, offset, ...filter }) =>
      Effect.gen(function* () {
        const where = filterSql(filter)
        // a filter no row can match (an unknown state, text PostgreSQL cannot hold, an invalid date)
        // matches none; a window that is not whole numbers >= 0 holds none
        if (where === undefined) return { rows: [], total: 0 }
        if (!isWindow(limit, offset)) {
          const total = yield* sql`SELECT count(*)::int AS n FROM warp_jobs WHERE ${where}`
          return { rows: [], total: Number((total[0] as any).n) }
        }
        const rows = yield* sql`SELECT * FROM warp_jobs WHERE ${where} ORDER BY id DESC LIMIT ${limit} OFFSET ${offset}`
        const total = yield* sql`SELECT count(*)::int AS n FROM warp_jobs WHERE ${where}`
        return { rows: rows.map(rowToJob), total: Number((total[0] as any).n) }
      }).pipe(Effect.mapError(fail("list"))),

    operate: (action, ids) => {
      const unique = [...new Set(ids)]
      const storable = unique.filter(isStorableId)
      if (storable.length === 0) return Effect.succeed({ changed: 0, skipped: unique.length })
      const to = operatorTo[action]
      // one statement: the rows in an allowed state change and get their audit entry together; a row
      // another transaction holds (a worker's claim in flight) is waited for, then re-checked
      return sql`
        WITH u AS (
          UPDATE warp_jobs
          SET state = ${to.state},
              schedule_time = CASE WHEN ${to.state} = 'Enqueued' THEN now() ELSE schedule_time END,
              locked_by = NULL, lease_until = NULL, updated_at = now(), holder_key = NULL,
              -- a retried or deleted job leaves any cancel asked for it behind; a requeued one keeps it
              cancel_requested = CASE WHEN ${action} = 'requeue' THEN cancel_requested END
          WHERE id IN (SELECT jsonb_array_elements_text(${JSON.stringify(storable)}::jsonb))
            AND state IN (SELECT jsonb_array_elements_text(${JSON.stringify(operatorFrom[action])}::jsonb))
          RETURNING id
        ), l AS (
          INSERT INTO warp_job_logs (job_id, kind, message) SELECT id, ${to.kind}, ${to.message} FROM u
        )
        SELECT count(*)::int AS n FROM u`.pipe(
        Effect.map((rows) => {
          const changed = Number((rows[0] as any)?.n ?? 0)
          return { changed, skipped: unique.length - changed }
        }),
        Effect.mapError(fail("operate"))
      )
    },

    countByState: sql`SELECT state, count(*)::int AS n FROM warp_jobs GROUP BY state`.pipe(
      Effect.map((rows) => {
        const out = emptyCounts()
        for (const r of rows as Array<any>) out[r.state as JobState] = Number(r.n)
        return out
      }),
      Effect.mapError(fail("countByState"))
    ),

    counters: sql`SELECT key, sum(value)::bigint AS value FROM warp_counters GROUP BY key`.pipe(
      Effect.map((rows) => new Map((rows as Array<any>).map((r) => [String(r.key), Number(r.value)]))),
      Effect.mapError(fail("counters"))
    ),

    locks,

    insight: KeyInsightPg.make(sql)
  }
  return service
})

/** The PostgreSQL store; runs the core migrations when built. Requires a `SqlClient` (e.g. `PgClient.layer`). */
export const layer: Layer.Layer<JobStore, StoreError, SqlClient.SqlClient> = Layer.scoped(
  JobStore,
  Migrations.core.pipe(Effect.mapError(fail("migrate")), Effect.zipRight(make))
)

/** The PostgreSQL store without running migrations (when the app migrates on its own). */
export const layerWithoutMigrations: Layer.Layer<JobStore, never, SqlClient.SqlClient> = Layer.scoped(JobStore, make)
