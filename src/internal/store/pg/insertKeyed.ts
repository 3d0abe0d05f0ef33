/**
 * The insert of rows with a job key in the PostgreSQL store (migration 0015). The rows of a call with
 * one key (per type) are folded into one effective row (`JobKeys.groupKeyed`); each chunk of effective
 * rows is ONE `INSERT … ON CONFLICT (type, job_key_live) DO UPDATE` statement, so that under concurrent
 * producers in any process one row takes a free key and every other insert of the key learns its id
 * (the unique index arbitrates; a conflicting insert waits for the holder's transaction). The same
 * statement writes the holder's audit entries (`Replaced` / `Joined`, counted) and returns each group's
 * holder.
 *
 * The lazy release: a holder that no longer holds its key (`job_key_hold`: a `Pending` one claimed or
 * ended, a `Processing` one ended, a `Throttle` one past `job_key_until`) still has `job_key_live` set,
 * since nothing but an insert of the key writes it. The conflicting insert then only clears it (the
 * statement cannot insert a second row for that key) and reports the group released; its rows go again
 * in a second statement, in the same transaction, which inserts them (or meets the holder another
 * producer wrote meanwhile). A call with several keys, or keyless rows too, runs in a transaction (a
 * savepoint inside the caller's); a call of one key needs none: a statement that released its holder
 * wrote nothing else.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { SqlError } from "effect/sql/SqlError"
import type { NewJob } from "../../job/Job.js"
import { fairOf, joinedByKeyText, replacedByKeyText, type Submitted, throttleJoinPrefix, throttleJoinSuffix, deduplicatedCounter, replacedCounter } from "../JobStore.js"
import { groupKeyed, type KeyedGroup, outcomesOf } from "../JobKeys.js"
import * as Wakeup from "../Wakeup.js"
import { arrayLiteral, nextTag } from "./shared.js"

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/** Whether the existing row `w` still holds its key (see `JobStore.holdsKey`), spelled for the conflict's update. */
const holds = `CASE WHEN w.job_key_hold = 'Throttle' THEN w.job_key_until > now()
                    ELSE w.state IN ('Scheduled','Enqueued') OR (w.job_key_hold = 'Processing' AND w.state = 'Processing') END`

/** The holder may be replaced: it holds and is pending. */
const replaceable = `(${holds}) AND w.state IN ('Scheduled','Enqueued')`

interface Resolved {
  readonly id: string
  readonly created: boolean
  readonly pending: boolean
  readonly released: boolean
}

/** One statement for `groups` (one effective row each); each group's holder, in order. */
const statement = (
  sql: SqlClient.SqlClient,
  groups: ReadonlyArray<KeyedGroup>,
  payload: string | undefined
): Effect.Effect<Array<Resolved>, SqlError> => {
  const rows = groups.map((g) => g.row)
  const text = (f: (r: (typeof rows)[number], g: KeyedGroup) => string | null) => sql`${arrayLiteral(groups.map((g) => f(g.row, g)))}`
  const fairs = rows.map((r) => fairOf(r.metadata))
  const anyFair = fairs.some((f) => f !== undefined)
  const fairFlow = sql`${arrayLiteral(fairs.map((f) => f?.flow ?? null))}`
  const fairW = sql`${arrayLiteral(fairs.map((f) => (f === undefined ? null : String(f.weight))))}`
  const x = sql`x AS (
      SELECT * FROM ROWS FROM (
        unnest(${text((r) => r.id)}::text[]), unnest(${text((r) => r.type)}::text[]), unnest(${text((r) => r.handler)}::text[]),
        unnest(${text((r) => r.state)}::text[]), unnest(${text((r) => r.scheduleTime.toISOString())}::timestamptz[]),
        unnest(${text((r) => String(r.priority ?? 0))}::int[]),
        unnest(${text((r) => r.jobKey.key)}::text[]), unnest(${text((_, g) => g.mode)}::text[]), unnest(${text((r) => r.jobKey.hold)}::text[]),
        unnest(${text((r) => (r.jobKey.hold === "Throttle" ? String(r.jobKey.windowMs ?? 0) : null))}::float8[]),
        unnest(${text((_, g) => g.replaces.map((b) => (b ? "r" : "k")).join(""))}::text[]),
        unnest(${text((r) => replacedByKeyText(r.jobKey.key))}::text[]), unnest(${text((r) => joinedByKeyText(r.jobKey.key))}::text[]),
        unnest(${text((r) => throttleJoinSuffix(r.jobKey.key))}::text[]),
        ${anyFair ? sql`unnest(${fairFlow}::text[]), unnest(${fairW}::float8[]),` : sql``}
        jsonb_array_elements(${JSON.stringify(rows.map((r) => r.metadata))}::jsonb),
        jsonb_array_elements(${JSON.stringify(rows.map((r) => r.payload ?? null))}::jsonb)
      ) WITH ORDINALITY AS x(id, type, handler, state, schedule_time, priority, job_key, mode, hold, window_ms, replaces, rep_text, join_text, throttle_suffix,
                             ${anyFair ? sql.literal("fair_flow, fair_w, ") : sql``}metadata, payload, ord)
    )`
  const i = sql`i AS (
      INSERT INTO warp_jobs AS w (id, type, handler, payload, state, schedule_time, priority, metadata, origin, origin_for,${anyFair ? sql` fair_tag,` : sql``}
                                  job_key, job_key_live, job_key_mode, job_key_hold, job_key_until)
      SELECT x.id, x.type, x.handler, x.payload, x.state, x.schedule_time, x.priority, x.metadata, x.state, CASE WHEN x.state = 'Scheduled' THEN x.schedule_time END,${
        anyFair ? sql` CASE WHEN x.fair_w IS NOT NULL THEN ${nextTag(sql, sql`x.fair_flow`, sql`x.fair_w`)} END,` : sql``
      }
             x.job_key, x.job_key, x.mode, x.hold, CASE WHEN x.hold = 'Throttle' THEN now() + x.window_ms * interval '1 millisecond' END
      FROM x ORDER BY x.ord
      ON CONFLICT (type, job_key_live) WHERE job_key_live IS NOT NULL DO UPDATE SET
        job_key_live = CASE WHEN ${sql.literal(holds)} THEN w.job_key_live END,
        payload = CASE WHEN ${sql.literal(replaceable)} AND EXCLUDED.job_key_mode <> 'keep' THEN EXCLUDED.payload ELSE w.payload END,
        state = CASE WHEN ${sql.literal(replaceable)} AND EXCLUDED.job_key_mode = 'replace' THEN EXCLUDED.state ELSE w.state END,
        schedule_time = CASE WHEN ${sql.literal(replaceable)} AND EXCLUDED.job_key_mode = 'replace' THEN EXCLUDED.schedule_time ELSE w.schedule_time END,
        priority = CASE WHEN ${sql.literal(replaceable)} AND EXCLUDED.job_key_mode = 'replace' THEN EXCLUDED.priority ELSE w.priority END,
        updated_at = CASE WHEN ${sql.literal(replaceable)} AND EXCLUDED.job_key_mode <> 'keep' THEN now() ELSE w.updated_at END
      RETURNING w.id, w.type, w.job_key, w.job_key_live, w.job_key_hold, w.job_key_until, w.created_at, w.state
    )`
  // the holder's trail: one entry per row of the group that did not create it (`replaces`: r / k per row)
  const r = sql`r AS (
      SELECT i.*, x.ord, x.replaces, x.rep_text, x.join_text, x.throttle_suffix, i.id = x.id AS created
      FROM i JOIN x ON x.type = i.type AND x.job_key = i.job_key
    ), l AS (
      INSERT INTO warp_job_logs (job_id, kind, message, counter)
      SELECT r.id, CASE WHEN e.rep THEN 'Replaced' ELSE 'Joined' END,
             CASE WHEN e.rep THEN r.rep_text
                  WHEN r.job_key_hold = 'Throttle'
                  THEN ${throttleJoinPrefix} || trim_scale(extract(epoch FROM r.job_key_until - r.created_at))::text || r.throttle_suffix
                  ELSE r.join_text END,
             CASE WHEN e.rep THEN ${replacedCounter} ELSE ${deduplicatedCounter} END
      FROM r CROSS JOIN LATERAL generate_series(CASE WHEN r.created THEN 2 ELSE 1 END, length(r.replaces)) AS n
             CROSS JOIN LATERAL (SELECT substr(r.replaces, n, 1) = 'r' AND r.state IN ('Scheduled','Enqueued') AS rep) e
      WHERE r.job_key_live IS NOT NULL
      ORDER BY r.ord, n
    )`
  const notify = payload === undefined ? sql`` : sql`, (SELECT pg_notify(${Wakeup.channel}, ${payload})) AS notified`
  return sql`WITH ${x}, ${i}, ${r} SELECT r.id, r.ord, r.created, r.state IN ('Scheduled','Enqueued') AS pending, r.job_key_live IS NULL AS released${notify}
      FROM r ORDER BY r.ord`.pipe(
    Effect.map((out) => {
      const resolved = new Array<Resolved>(groups.length)
      for (const o of out as Array<any>) {
        resolved[Number(o.ord) - 1] = { id: String(o.id), created: o.created === true, pending: o.pending === true, released: o.released === true }
      }
      return resolved
    })
  )
}

/**
 * The keyed rows of one call (`rows` with a `jobKey`, at most a chunk's worth of keys), inside the
 * caller's transaction: writes `results` at the rows' positions.
 */
export const insertKeyed = (
  sql: SqlClient.SqlClient,
  rows: ReadonlyArray<NewJob>,
  results: Array<Submitted>,
  payload: string | undefined,
  chunk: number
): Effect.Effect<void, SqlError> =>
  Effect.gen(function* () {
    // in (type, key) order: producers that insert overlapping keys lock them in one order (no deadlock
    // between two multi-key inserts), whatever order their callers gave
    const groups = groupKeyed(rows).sort((a, b) => compare(a.row.type, b.row.type) || compare(a.row.jobKey.key, b.row.jobKey.key))
    for (let start = 0; start < groups.length; start += chunk) {
      let pending = groups.slice(start, start + chunk)
      // a group whose stale holder the statement released goes again (another producer may take the key meanwhile)
      for (let round = 0; pending.length > 0; round++) {
        if (round > 8) return yield* Effect.die(new Error("job key insert: a key was released 8 times in a row"))
        const resolved = yield* statement(sql, pending, start + chunk >= groups.length ? payload : undefined)
        const again: Array<KeyedGroup> = []
        pending.forEach((g, k) => {
          const res = resolved[k]!
          if (res.released) return void again.push(g)
          const outcomes = outcomesOf(g, res.id, res.created, res.pending)
          g.indexes.forEach((index, n) => (results[index] = outcomes[n]!))
        })
        pending = again
      }
    }
  })
