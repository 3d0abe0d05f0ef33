/**
 * The claim of the PostgreSQL store: one statement that picks due rows with `FOR UPDATE SKIP LOCKED`,
 * marks them Processing, appends their audit entries and reads the admin override of each claimed
 * row's concurrency key. Fifo-mode rows are claimed in submission order per key, fair-share rows in
 * tag order (see `JobStoreService.fetch`).
 */
import type * as SqlClient from "effect/sql/SqlClient"
import type * as Statement from "effect/sql/Statement"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { Job } from "../../job/Job.js"
import { ADMISSION_DEPTH, claimOrder, type FetchHint } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import { expiring, type LimitsTable } from "./readsLimits.js"
import { runPrepared } from "./prepared.js"
import { fail, keyOf, plainOf, rowToJob } from "./shared.js"

/** `n` rounded up to a power of two (at least 1): the literal row counts' buckets. */
const bucket = (n: number): number => 2 ** Math.ceil(Math.log2(Math.max(1, n)))

/**
 * The row count of one of the claim's index walks that lock nothing (the admission's candidates, the
 * same-slot candidates, the weighted rows' times) as a literal of the statement's text, not a parameter:
 * with a parameter the planner costs a generic plan as if the walk read a tenth of the index, so on a
 * backlog of ~10^4 rows or more PostgreSQL never takes the generic plan and plans every claim afresh (2-3
 * ms of planning against ~1 ms of execution, measured on 20,000 pending rows). The counts that bound
 * what a claim locks stay parameters (exact); the literals are rounded up by {@link bucket}, so a worker's
 * claims of 1 to 8 rows make 4 statement texts, not 8 (each text is planned afresh its first five times
 * on a connection).
 */
const count = (sql: SqlClient.SqlClient, n: number): Statement.Fragment => {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`a claim's row count must be a whole number >= 0, got ${n}`)
  return sql.literal(String(n))
}

/**
 * The rows of `ids` (an array of ids, in the order to lock them) as `w`, each with its position `c.ord`,
 * that are still pending and due (`w.fair_tag` as `fair` says): a claim locks its candidates through this,
 * in `c.ord` order. The candidates were chosen by the statement's own snapshot; the recheck here is what a
 * row another claim took or a requeue moved meanwhile must pass (a row's Fifo mode and fair-share tag do
 * not change while it is pending). Written so that no plan but the primary key's fits: by id, not
 * `ORDER BY` a column (a planner without statistics — a table just filled, before its first ANALYZE —
 * walked the whole `warp_jobs_due_unfair` to find a handful of ids in its order: 20-33 ms for a claim of
 * 8 over 20,000 rows, against ~1 ms by primary key), with a recheck that implies no partial index's
 * predicate, and in a CASE that no index can serve (as `state IN (…)`, the planner ANDed a scan of
 * `warp_jobs_state_id` over every pending row to the primary key's bitmap: 1-2 ms a claim).
 */
const pendingByKey = (sql: SqlClient.SqlClient, ids: Statement.Fragment, fair: "plain" | "any"): Statement.Fragment =>
  sql`warp_jobs w JOIN unnest(${ids}) WITH ORDINALITY AS c(id, ord) ON c.id = w.id
          WHERE w.id = ANY(${ids})
            AND CASE WHEN w.state IN ('Scheduled', 'Enqueued')${fair === "plain" ? sql` AND w.fair_tag IS NULL` : sql``} THEN w.schedule_time <= now() ELSE FALSE END`

/**
 * A limit read from a row's metadata (a text fragment) as an int; one that is not a valid limit
 * (hand-corrupted metadata) counts as 1, so that the row is claimed in turn and the worker fails it (a
 * bad cast would fail every fetch).
 */
const asLimit = (sql: SqlClient.SqlClient, text: Statement.Fragment) =>
  sql`CASE WHEN ${text} ~ '^[1-9][0-9]{0,9}$' THEN CASE WHEN ${text}::bigint <= 2147483647 THEN ${text}::int ELSE 1 END ELSE 1 END`

/**
 * The admission of the claim's plain rows (due, not fair-share, not Fifo), as common table expressions
 * (`adm_*`), and `free` and `held`, the arrays of the rows the claim may take, in order. A FILTER and
 * ORDER only: the slots stay with the semaphore provider, and a row the claim misjudges (two claims racing for the last
 * slot, an override changed meanwhile) meets the gate as before.
 *
 * The first `limit` + {@link ADMISSION_DEPTH} due plain rows by (priority descending, ScheduleTime) are
 * read (walking `warp_jobs_due_unfair` in its order, past the pending rows not due yet),
 * and for their keys and groups the live holders are counted from the rows themselves: the rows
 * Processing with an unexpired lease (`excluding` the row the carrying statement finalizes, whose slot
 * that statement frees), read once per claim from `warp_jobs_lease` (as many as the rows claimed and
 * not finalized: the workers' lanes and batches). A key's slots: its admin override (unexpired) > the row's stamped limit > 1; a
 * group's: its admin override (unexpired) > the row's declared total. One claim takes at most one
 * constrained row (a Wait row with a key, or a row with a total cap that is not Skip / CancelNewest): a
 * lane runs its rows one after another, and a second one would only sit in its batch, counted as a holder
 * while it does not hold a slot, where other lanes could run it (a lane's keyed jobs come one per
 * finalizing statement anyway, see `Lane`'s carried claim); `ready` locks up to `limit` unconstrained
 * admissible rows and the first constrained one it can lock. In (priority descending, ScheduleTime)
 * order, a row is
 * - key-admissible unless it is a Wait row and its key's holders fill the key's slots or a row of its
 *   key is ahead of it (Skip and CancelRunning rows are claimed as before: their mode acts on a full key);
 * - group-admissible unless it declares a total cap, is not Skip / CancelNewest (dropped when full: their
 *   purpose) and its group's holders fill the cap, or (a key-admissible row) as many key-admissible rows
 *   of its group as the cap are ahead of it, or (not key-admissible) a key-admissible row of its group
 *   is. The claim still takes one constrained row; the group's next rows are there for claims racing it
 *   (`SKIP LOCKED`: lanes finishing together, each finalizing statement claiming while the others' rows
 *   are live, would all lock the group's first row, and all but one come back empty). Two racing claims
 *   may then both take a row for the last free slot of the group: the gate requeues the one that finds
 *   the group's slots taken, as for any row the claim misjudges.
 * `free`: the unconstrained admissible rows; `held`: the constrained admissible rows, and only when no
 * row is admissible, the first group-admissible Wait row of a full key (its gate requeues it, the
 * spec's mechanism, and the lane then skips its key) — unless that row is declared `requeue: false`:
 * such rows wait, unclaimed, for their key to have room. A row of a full group is never taken. (Two
 * arrays, so that constrained rows the claim will not take never fill its `limit` ahead of
 * unconstrained rows of a lower rank: the claim takes its rows in (priority, ScheduleTime) order, as
 * the memory store's `admit`.)
 */
export const admissionCtes = (
  sql: SqlClient.SqlClient,
  limitsTable: LimitsTable,
  limit: number,
  notContended: Statement.Fragment,
  excluding: string | undefined
): { readonly ctes: Statement.Fragment; readonly free: Statement.Fragment; readonly held: Statement.Fragment } => {
  const due = sql`state IN ('Scheduled', 'Enqueued') AND schedule_time <= now()`
  const key = keyOf(sql)
  const group = sql`(metadata #>> '{policies,concurrency,value,total,group}')`
  const plain = plainOf(sql)
  const live = sql`state = 'Processing' AND lease_until >= now()${excluding === undefined ? sql`` : sql` AND id <> ${excluding}`}`
  const keyOverride =
    limitsTable === "absent"
      ? sql`SELECT NULL::text AS k, NULL::int AS slots WHERE FALSE`
      : sql`SELECT key AS k, slots FROM warp_concurrency_limits${expiring(limitsTable) ? sql` WHERE expires_at IS NULL OR expires_at > now()` : sql``}`
  const groupOverride =
    limitsTable === "grouped"
      ? sql`SELECT group_name AS g, slots FROM warp_concurrency_group_limits WHERE expires_at IS NULL OR expires_at > now()`
      : sql`SELECT NULL::text AS g, NULL::int AS slots WHERE FALSE`
  const dropped = sql`('Skip', 'CancelNewest')`
  return {
    ctes: sql`adm_c AS MATERIALIZED (
          SELECT id, priority, schedule_time, v ->> 'key' AS k, v ->> 'mode' AS md, v #>> '{total,group}' AS g,
                 ${asLimit(sql, sql`(v ->> 'limit')`)} AS lim,
                 ${asLimit(sql, sql`(v #>> '{total,limit}')`)} AS glim,
                 coalesce(v ->> 'requeue' = 'false', FALSE) AS hold
          FROM (
            SELECT id, priority, schedule_time, metadata #> '{policies,concurrency,value}' AS v
            FROM warp_jobs
            WHERE ${due} AND ${plain} AND fair_tag IS NULL${notContended}
            ORDER BY priority DESC, schedule_time
            LIMIT ${count(sql, bucket(limit) + ADMISSION_DEPTH)}
          ) c0
        ), adm_live AS MATERIALIZED (
          SELECT ${key} AS k, ${group} AS g FROM warp_jobs
          WHERE ${live} AND EXISTS (SELECT 1 FROM adm_c WHERE k IS NOT NULL OR g IS NOT NULL)
        ), adm_k AS MATERIALIZED (
          SELECT ak.k, o.slots, (SELECT count(*)::int FROM adm_live l WHERE l.k = ak.k) AS n
          FROM (SELECT DISTINCT k FROM adm_c WHERE k IS NOT NULL AND md = 'Wait') ak
          LEFT JOIN (${keyOverride}) o ON o.k = ak.k
        ), adm_g AS MATERIALIZED (
          SELECT ag.g, o.slots, (SELECT count(*)::int FROM adm_live l WHERE l.g = ag.g) AS n
          FROM (SELECT DISTINCT g FROM adm_c WHERE g IS NOT NULL AND md NOT IN ${dropped}) ag
          LEFT JOIN (${groupOverride}) o ON o.g = ag.g
        ), adm_kr AS (
          SELECT c.id, c.priority, c.schedule_time, c.g, c.md, c.glim, c.hold,
                 ((c.k IS NOT NULL AND c.md = 'Wait') OR (c.g IS NOT NULL AND c.md NOT IN ${dropped})) AS constrained,
                 (c.k IS NULL OR c.md IS DISTINCT FROM 'Wait'
                  OR (row_number() OVER (PARTITION BY c.k ORDER BY c.priority DESC, c.schedule_time, c.id) = 1 AND kk.n < coalesce(kk.slots, c.lim))) AS key_ok
          FROM adm_c c LEFT JOIN adm_k kk ON kk.k = c.k
        ), adm AS MATERIALIZED (
          SELECT r.id, r.priority, r.schedule_time, r.key_ok, r.hold, r.constrained,
                 (r.g IS NULL OR r.md IN ${dropped}
                  OR (gg.n < coalesce(gg.slots, r.glim) AND (NOT r.key_ok OR row_number() OVER (PARTITION BY r.g, r.key_ok ORDER BY r.priority DESC, r.schedule_time, r.id) <= coalesce(gg.slots, r.glim)))) AS group_ok
          FROM adm_kr r LEFT JOIN adm_g gg ON gg.g = r.g
        )`,
    free: sql`ARRAY(SELECT id FROM adm WHERE key_ok AND group_ok AND NOT constrained ORDER BY priority DESC, schedule_time, id)`,
    held: sql`ARRAY(
            (SELECT id FROM adm WHERE key_ok AND group_ok AND constrained ORDER BY priority DESC, schedule_time, id)
            UNION ALL
            (SELECT id FROM adm WHERE NOT key_ok AND group_ok AND NOT hold AND NOT EXISTS (SELECT 1 FROM adm WHERE key_ok AND group_ok)
             ORDER BY priority DESC, schedule_time, id LIMIT 1))`
  }
}

/** A claim as common table expressions (see {@link claimCtes}). */
export interface ClaimCtes {
  /** `fc` (the rows picked), `fu` (their update), `fl` (their audit entries), for a `WITH` list. */
  readonly ctes: Statement.Fragment
  /**
   * The claimed rows, with `admin_key` / `admin_slots`: the admin override of each one's key as the
   * claim read it (NULL when the claim does not read overrides); a relation for `FROM`.
   */
  readonly rows: Statement.Fragment
}

/**
 * The claim of up to `limit` due rows for `workerId` with a lease of `lease`, honouring `hint`, as
 * common table expressions that another statement may carry (the finalizing statement of an attempt
 * on a held slot's connection does, see `./finalize.ts`); `excluding`: a row the carrying statement
 * writes itself, never claimed by it (one statement cannot update a row twice). The claim's trail
 * entry is stamped with the statement's `now()`, the instant its lease counts from (the log's default,
 * `clock_timestamp()`, falls later by the statement's planning and run time): a `Recovered` entry is
 * therefore never less than a lease after the claim it recovers.
 */
export const claimCtes = (
  sql: SqlClient.SqlClient,
  limitsTable: LimitsTable,
  workerId: string,
  limit: number,
  lease: Duration.Duration,
  hint: FetchHint,
  excluding?: string
): ClaimCtes => {
  const withLimits = limitsTable !== "absent"
  const due = sql`state IN ('Scheduled', 'Enqueued') AND schedule_time <= now()`
  const key = keyOf(sql)
  // the predicates of the partial indexes `warp_jobs_fifo` and `warp_jobs_due_unfair`, spelled alike
  const liveFifo = sql`state IN ('Scheduled','Enqueued','Processing') AND (metadata #>> '{policies,concurrency,value,mode}') = 'Fifo'`
  const plain = plainOf(sql)
  // a row's limit; one that is not a valid limit (hand-corrupted metadata) counts as 1, so that the
  // row is claimed in turn and the worker fails it (a bad cast would fail every fetch)
  const lim = sql`(metadata #>> '{policies,concurrency,value,limit}')`
  const notContended =
    hint.contended.length === 0
      ? sql``
      : sql` AND coalesce(${key} <> ALL(ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(hint.contended)}::jsonb))), TRUE)`
  const rowLimit = asLimit(sql, lim)
  const admission = admissionCtes(sql, limitsTable, limit, notContended, excluding)
  const claim =
    hint.sameSlot !== undefined
      ? // the fiber holds a slot of this key: only rows of exactly that policy, near the head, and never
        // fair-share rows (chaining them under the slot would serve their key out of its turn)
        // (candidates come from an uncorrelated sub-select over the head of `warp_jobs_due_unfair`,
        // then are locked by primary key: a plan that stays linear even when the table's statistics
        // are stale)
        sql`
        SELECT w.id, w.state AS prev_state, NULL::float8 AS tag, TRUE AS claimed
        FROM ${pendingByKey(sql, sql`ARRAY(
            SELECT h.id FROM (
              SELECT id, priority, schedule_time, metadata FROM warp_jobs WHERE ${due} AND ${plain} AND fair_tag IS NULL ORDER BY priority DESC, schedule_time LIMIT ${count(sql, hint.sameSlot.depth)}
            ) h
            WHERE (h.metadata #>> '{policies,concurrency,value,key}') = ${hint.sameSlot.key}
              AND (h.metadata #>> '{policies,concurrency,value,mode}') = 'Wait'
              AND (h.metadata #>> '{policies,concurrency,value,limit}') = ${String(hint.sameSlot.limit)}
            ORDER BY h.priority DESC, h.schedule_time
            LIMIT ${count(sql, bucket(limit) + 15)})`, "plain")}
        ORDER BY c.ord
        LIMIT ${limit}
        FOR UPDATE OF w SKIP LOCKED`
      : // index-ordered branches instead of one OR: expired leases, then the due rows of Fifo keys
        // whose turn it is and the other due rows, merged by (priority descending, ScheduleTime, branch).
        // Each walks its partial index and stops at `limit`, where an OR scanned and sorted the table. Rows of keys the
        // fiber just found full are left to other fibers (Fifo rows wait for their turn anyway).
        //
        // Admission (see `admissionCtes`): `ready` takes the plain rows whose key and group have a free
        // slot by the rows' own count, first; a row of a full key only when none is admissible.
        //
        // Fair share (rows with a `fair_tag`, see `JobStore.fairTagOf`): `fair` takes the due fair rows in
        // tag order (`warp_jobs_fair_due`), `fair_at` the smallest ScheduleTimes of the due fair rows
        // (`warp_jobs_fair_time`), and the k-th fair row by tag is merged at (its own priority, the k-th
        // of those times). So at equal priority the fair rows, as a class, compete with the other rows
        // (which keep (priority, ScheduleTime) order, `ready` walking `warp_jobs_due_unfair`) by the ScheduleTimes of the class's oldest due rows, and inside
        // the class the order is by tag: another row is claimed once it is older than every due fair row
        // left; on ties of time the other rows go first (see `JobStore.fairMerge`).
        //
        // Priority inside a flow (see `JobStore.fairTurns` / `fairSwaps`): `fair_slot` locks the first
        // `limit` due fair rows by tag (the turns); `fair_up` probes `warp_jobs_fair_priority` once per
        // flow among them for the flow's due rows of a higher priority than its lowest turn row (none when
        // the flow has one priority: an empty probe), locking them (`SKIP LOCKED`: a row another claim
        // holds is not considered); `fair` gives a flow's j-th turn to its j-th best locked row by
        // (priority descending, tag, id). After the merge (ties broken by turn, so a flow's claimed rows
        // are its best and consume its smallest tags), `fair_swap` gives the rows left behind that held a
        // consumed tag the claimed rows' own tags, in order; the claimed rows get the consumed tags (`fu`),
        // the rows left behind theirs (`fs`).
        //
        // Fifo: the distinct keys with live Fifo rows come from a loose scan of `warp_jobs_fifo` (one
        // probe per key, however deep its backlog); per key, the first `limit` + running rows in line
        // by (created_at, id) are read from the same index, and a due pending one is claimable when
        // the rows Processing plus the pending rows ahead of it are fewer than its limit. Claims of
        // one key are serialized by a transaction advisory lock on the key (two-int key space), taken
        // only for the keys of the oldest `limit` candidates; rows are then locked as usual. One fetch
        // claims at most one Fifo row — of the locked keys' first claimable rows, the one of the highest
        // priority due first (priority never reorders a key's line) —
        // and the worker runs it first (see `claimOrder`).
        sql`
        WITH RECURSIVE expired AS (
          SELECT id, state AS prev_state FROM warp_jobs
          WHERE state = 'Processing' AND lease_until < now()${excluding === undefined ? sql`` : sql` AND id <> ${excluding}`}
          ORDER BY lease_until
          LIMIT ${limit}
          FOR UPDATE SKIP LOCKED
        ), ${admission.ctes}, ready_free AS (
          SELECT w.id, w.state AS prev_state, w.priority, w.schedule_time FROM ${pendingByKey(sql, admission.free, "plain")}
          ORDER BY c.ord
          LIMIT ${limit}
          FOR UPDATE OF w SKIP LOCKED
        ), ready_held AS (
          SELECT w.id, w.state AS prev_state, w.priority, w.schedule_time FROM ${pendingByKey(sql, admission.held, "plain")}
          ORDER BY c.ord
          LIMIT 1
          FOR UPDATE OF w SKIP LOCKED
        ), ready AS (
          SELECT * FROM ready_free UNION ALL SELECT * FROM ready_held
        ), fair_slot AS (
          SELECT id, state AS prev_state, priority, fair_tag, coalesce(${key}, '#' || id) AS flow FROM warp_jobs
          WHERE ${due} AND fair_tag IS NOT NULL${notContended}
          ORDER BY fair_tag, id
          LIMIT ${limit}
          FOR UPDATE SKIP LOCKED
        ), fair_s AS MATERIALIZED (
          SELECT s.*, row_number() OVER (ORDER BY s.fair_tag, s.id) AS rn,
                 row_number() OVER (PARTITION BY s.flow ORDER BY s.fair_tag, s.id) AS j
          FROM fair_slot s
        ), fair_up AS (
          SELECT u.id, u.prev_state, u.priority, u.fair_tag, f.flow FROM (
            SELECT flow, count(*)::int AS m, min(priority) AS low, array_agg(id) AS ids FROM fair_s GROUP BY flow
          ) f
          CROSS JOIN LATERAL (
            SELECT id, state AS prev_state, priority, fair_tag FROM warp_jobs
            WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NOT NULL AND ${key} = f.flow AND priority > f.low
              AND schedule_time <= now() AND id <> ALL(f.ids)
            ORDER BY priority DESC, fair_tag, id
            LIMIT f.m
            FOR UPDATE SKIP LOCKED
          ) u
        ), fair AS MATERIALIZED (
          SELECT t.id, t.prev_state, t.priority, t.fair_tag AS own_tag, s.fair_tag AS tag, s.rn, s.flow
          FROM fair_s s
          JOIN (
            SELECT x.*, row_number() OVER (PARTITION BY x.flow ORDER BY x.priority DESC, x.fair_tag, x.id) AS j FROM (
              SELECT id, prev_state, priority, fair_tag, flow FROM fair_s
              UNION ALL SELECT id, prev_state, priority, fair_tag, flow FROM fair_up
            ) x
          ) t ON t.flow = s.flow AND t.j = s.j
        ), fair_at AS (
          SELECT t.schedule_time, row_number() OVER (ORDER BY t.schedule_time) AS rn FROM (
            SELECT schedule_time FROM warp_jobs
            WHERE ${due} AND fair_tag IS NOT NULL${notContended}
            ORDER BY schedule_time
            LIMIT ${count(sql, bucket(limit))}
          ) t
        ), fair_merged AS (
          SELECT f.id, f.prev_state, f.priority, a.schedule_time, f.rn, f.tag
          FROM fair f JOIN fair_at a USING (rn)
        ), fifo_keys(k) AS (
          (SELECT ${key} FROM warp_jobs WHERE ${liveFifo} ORDER BY ${key} LIMIT 1)
          UNION ALL
          SELECT (SELECT ${key} FROM warp_jobs WHERE ${liveFifo} AND ${key} > f.k ORDER BY ${key} LIMIT 1)
          FROM fifo_keys f WHERE f.k IS NOT NULL
        ), fifo_heads AS (
          SELECT h.id, f.k, h.priority, h.schedule_time, h.created_at FROM fifo_keys f
          CROSS JOIN LATERAL (
            SELECT count(*)::int AS n FROM warp_jobs WHERE ${liveFifo} AND ${key} = f.k AND state = 'Processing'
          ) r
          CROSS JOIN LATERAL (
            SELECT x.id, x.state, x.priority, x.schedule_time, x.created_at, x.lim,
                   count(*) FILTER (WHERE x.state <> 'Processing')
                     OVER (ORDER BY x.created_at, x.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS ahead
            FROM (
              SELECT id, state, priority, schedule_time, created_at, ${rowLimit} AS lim
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
              SELECT k, schedule_time FROM fifo_heads ORDER BY priority DESC, schedule_time LIMIT ${limit}
            ) t GROUP BY t.k
          ) c
          WHERE pg_try_advisory_xact_lock(
            ('x' || substr(md5('warp:fifo:' || c.k), 1, 8))::bit(32)::int,
            ('x' || substr(md5('warp:fifo:' || c.k), 9, 8))::bit(32)::int)
        ), fifo AS (
          SELECT w.id, w.state AS prev_state, w.priority, w.schedule_time FROM ${pendingByKey(sql, sql`ARRAY(
              SELECT DISTINCT ON (k) id FROM fifo_heads WHERE k IN (SELECT k FROM fifo_picked) ORDER BY k, created_at, id)`, "any")}
          ORDER BY w.priority DESC, w.schedule_time
          LIMIT 1
          FOR UPDATE OF w SKIP LOCKED
        ), picked AS MATERIALIZED (
          (SELECT id, prev_state, NULL::float8 AS tag FROM expired)
          UNION ALL
          (SELECT id, prev_state, tag FROM (
              (SELECT id, prev_state, priority, schedule_time, 0 AS b, 0::bigint AS rn, NULL::float8 AS tag FROM fifo)
              UNION ALL (SELECT id, prev_state, priority, schedule_time, 0 AS b, 0::bigint AS rn, NULL::float8 AS tag FROM ready)
              UNION ALL (SELECT id, prev_state, priority, schedule_time, 1 AS b, rn, tag FROM fair_merged)
              ORDER BY priority DESC, schedule_time, b, rn LIMIT ${limit}) m)
          LIMIT ${limit}
        ), fair_taken AS MATERIALIZED (
          SELECT f.id, f.own_tag, f.flow, s.id AS slot_id FROM fair f JOIN fair_s s USING (rn) WHERE f.id IN (SELECT id FROM picked)
        ), fair_swap AS (
          SELECT l.id, i.own_tag AS tag FROM (
            SELECT s.id, s.flow, row_number() OVER (PARTITION BY s.flow ORDER BY s.fair_tag, s.id) AS k FROM fair_s s
            WHERE s.id IN (SELECT slot_id FROM fair_taken) AND s.id NOT IN (SELECT id FROM fair_taken)
          ) l JOIN (
            SELECT t.flow, t.own_tag, row_number() OVER (PARTITION BY t.flow ORDER BY t.own_tag, t.id) AS k FROM fair_taken t
            WHERE t.id NOT IN (SELECT slot_id FROM fair_taken)
          ) i ON i.flow = l.flow AND i.k = l.k
        )
        SELECT id, prev_state, tag, TRUE AS claimed FROM picked
        UNION ALL
        SELECT id, NULL, tag, FALSE FROM fair_swap`
  return {
    ctes: sql`fc AS (${claim}
      ), fu AS (
        UPDATE warp_jobs j
        SET state = 'Processing', attempt = j.attempt + 1, locked_by = ${workerId},
            lease_until = now() + ${Duration.toMillis(lease)} * interval '1 millisecond', updated_at = now(),
            fair_tag = coalesce(fc.tag, j.fair_tag)
        FROM fc WHERE j.id = fc.id AND fc.claimed
        RETURNING j.*, fc.prev_state
      ), fs AS (
        UPDATE warp_jobs j SET fair_tag = fc.tag FROM fc WHERE j.id = fc.id AND NOT fc.claimed
      ), fl AS (
        INSERT INTO warp_job_logs (job_id, at, kind, message)
        SELECT id, now(),
               CASE WHEN prev_state = 'Processing' THEN 'Recovered' ELSE 'Processing' END,
               CASE WHEN prev_state = 'Processing' THEN 'Lease expired; attempt ' || attempt || ' claimed by ' || locked_by
                    ELSE 'Attempt ' || attempt || ' claimed by ' || locked_by END
        FROM fu
      )`,
    rows: sql`(SELECT fu.*${
        withLimits
          ? sql`, a.key AS admin_key, (SELECT slots FROM warp_concurrency_limits WHERE key = a.key${
              expiring(limitsTable) ? sql` AND (expires_at IS NULL OR expires_at > now())` : sql``
            }) AS admin_slots`
          : sql`, NULL::text AS admin_key, NULL::int AS admin_slots`
      }
      FROM fu${withLimits ? sql` CROSS JOIN LATERAL (SELECT ${sql`(fu.metadata #>> '{policies,concurrency,value,key}')`} AS key) a` : sql``})`
  }
}

/** Claimed rows as jobs, in the order a worker runs them. */
export const claimedJobs = (rows: ReadonlyArray<unknown>): Array<Job> => claimOrder(rows.map(rowToJob))

/**
 * `JobStoreService.fetch`: claims up to `limit` due rows for `workerId` with a lease of `lease`,
 * honouring the worker's `hint`; `readsLimits` tells whether the claim reads the admin overrides.
 */
export const fetch = (
  sql: SqlClient.SqlClient,
  readsLimits: Effect.Effect<LimitsTable>,
  workerId: string,
  limit: number,
  lease: Duration.Duration,
  hint: FetchHint = { contended: [] },
  prepared = true
): Effect.Effect<ReadonlyArray<Job>, StoreError> =>
  Effect.flatMap(readsLimits, (limitsTable) => {
    const { ctes, rows } = claimCtes(sql, limitsTable, workerId, limit, lease, hint)
    return runPrepared(sql`WITH ${ctes} SELECT * FROM ${rows} k ORDER BY priority DESC, schedule_time, id`, prepared)
  }).pipe(
    Effect.map(claimedJobs),
    Effect.mapError(fail("fetch"))
  )
