/**
 * The insert of the PostgreSQL store: one `warp_jobs` row per job. An insert of more than
 * {@link insertChunk} rows is one statement per chunk, all in one transaction (a savepoint inside the
 * caller's). With instant pickup on, the statement (the last chunk's) also sends ONE `NOTIFY` for all
 * its rows (see `../Wakeup.ts`): how many are due now and when the earliest Scheduled one comes due;
 * inside the caller's transaction it is delivered at commit, and not at all on rollback.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import type * as Statement from "effect/sql/Statement"
import * as Effect from "effect/Effect"
import type { NewJob } from "../../job/Job.js"
import { fairOf, type Submitted } from "../JobStore.js"
import { insertKeyed } from "./insertKeyed.js"
import type { StoreError } from "../StoreError.js"
import * as Wakeup from "../Wakeup.js"
import { fail, lastTag, nextTag, virtualTime } from "./shared.js"

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
 * One statement for a chunk: one `warp_jobs` row per job and no audit row (the creation entry is
 * derived from `origin` / `origin_for` / `created_at`, see `get`). Columns alike across the chunk (a
 * batch of one contract: type, handler, state, ScheduleTime, usually metadata) are sent once as
 * scalars; the others as arrays that `unnest` turns into rows in one set operation.
 */
const insertRows = (sql: SqlClient.SqlClient, rows: ReadonlyArray<NewJob>, payload?: string) => {
  const first = rows[0]!
  // the statement's notification rides on it: the insert as a data-modifying CTE (run whether read or
  // not), then one `pg_notify` (`ctes`: the statement's own WITH list, which the insert joins)
  const notifying = (insert: Statement.Statement<unknown>, ctes?: Statement.Fragment): Statement.Statement<unknown> =>
    payload === undefined
      ? ctes === undefined ? insert : sql`WITH ${ctes} ${insert}`
      : sql`WITH ${ctes === undefined ? sql`` : sql`${ctes}, `}i AS (${insert}) SELECT pg_notify(${Wakeup.channel}, ${payload})`
  // fair-share rows (a weighted concurrency policy) get their tag in this statement (see `fairTagOf`)
  const fairs = rows.map((r) => fairOf(r.metadata))
  const anyFair = fairs.some((f) => f !== undefined)
  if (rows.length === 1) {
    // a single enqueue: plain VALUES, no arrays to build and parse
    const at = first.scheduleTime.toISOString()
    const fair = fairs[0]
    return notifying(sql`
        INSERT INTO warp_jobs (id, type, handler, payload, state, schedule_time, metadata, origin, origin_for, priority${fair === undefined ? sql`` : sql`, fair_tag`})
        VALUES (${first.id}, ${first.type}, ${first.handler}, ${JSON.stringify(first.payload)}::jsonb, ${first.state}, ${at}::timestamptz,
                ${JSON.stringify(first.metadata)}::jsonb, ${first.state}, ${first.state === "Scheduled" ? at : null}::timestamptz, ${first.priority ?? 0}::int${
                  fair === undefined ? sql`` : sql`, ${nextTag(sql, sql`${fair.flow}::text`, sql`${fair.weight}::float8`)}`
                })`).pipe(Effect.asVoid)
  }
  // the payloads as one JSON array (one native stringify, parsed once by the server) rather than a
  // jsonb[] parameter, whose array literal the driver builds by escaping every element's text
  const payloads = sql`jsonb_array_elements(${JSON.stringify(rows.map((r) => r.payload ?? null))}::jsonb)`
  const arrays: Array<Statement.Fragment> = [sql`${rows.map((r) => r.id)}::text[]`]
  const names = ["id"]
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
  const priority = column("priority", "int", (r) => r.priority ?? 0, (a) => String(a))
  // the arrays and the payloads zipped into rows (each array unnested in step with the payloads)
  const source = () => sql`ROWS FROM (${sql.csv([...arrays.map((a) => sql`unnest(${a})`), payloads])})`
  if (!anyFair) {
    return notifying(sql`
      INSERT INTO warp_jobs (id, type, handler, payload, state, schedule_time, metadata, origin, origin_for, priority)
      SELECT x.id, ${type}, ${handler}, x.payload, ${state}, ${scheduleTime}, ${metadata}, ${state},
             CASE WHEN ${state} = 'Scheduled' THEN ${scheduleTime} END, ${priority}
      FROM ${source()} AS x(${sql.literal(names.join(", "))}, payload)`).pipe(Effect.asVoid)
  }
  // tags: V once, the last tag of each distinct flow once (index probes), then each flow's rows of the
  // chunk step by 1/w in chunk order: max(V, last) + the running sum of 1/w over the flow's rows so far
  const fairOfRow = new Map(rows.map((r, i) => [r, fairs[i]] as const))
  const flow = column("fair_flow", "text", (r) => fairOfRow.get(r)?.flow ?? null, (a) => a)
  // as text (cast to float8 by the statement): an array of whole and fractional numbers binds as neither int4[] nor float8[]
  const weight = column("fair_w", "float8", (r) => fairOfRow.get(r)?.weight ?? null, (a) => (a === null ? null : String(a)))
  return notifying(sql`
      INSERT INTO warp_jobs (id, type, handler, payload, state, schedule_time, metadata, origin, origin_for, priority, fair_tag)
      SELECT x.id, ${type}, ${handler}, x.payload, ${state}, ${scheduleTime}, ${metadata}, ${state},
             CASE WHEN ${state} = 'Scheduled' THEN ${scheduleTime} END, ${priority},
             CASE WHEN ${weight} IS NOT NULL
                  THEN greatest(v.v, coalesce(f.last, v.v)) + sum(1 / ${weight}) OVER (PARTITION BY ${flow} ORDER BY x.ord) END
      FROM x CROSS JOIN v LEFT JOIN f ON f.flow = ${flow}`, sql`x AS (
        SELECT * FROM ${source()} WITH ORDINALITY AS x(${sql.literal(names.join(", "))}, payload, ord)
      ), v AS (
        SELECT ${virtualTime(sql)} AS v
      ), f AS (
        SELECT d.flow, ${lastTag(sql, sql`d.flow`)} AS last FROM (SELECT DISTINCT ${flow} AS flow FROM x) d WHERE d.flow IS NOT NULL
      )`).pipe(Effect.asVoid)
}

/** The notification payload of an insert of `rows` (see `Wakeup.insertPayload`): the rows due now and their highest priority, the earliest later one. */
export const payloadOf = (rows: ReadonlyArray<NewJob>, now: number): string | undefined => {
  const { due, earliest, priority } = Wakeup.insertSummary(rows, now)
  return Wakeup.insertPayload(due, earliest, priority)
}

/** Each row `Created` under its own id (a call without job keys). */
const created = (rows: ReadonlyArray<NewJob>): Array<Submitted> => rows.map((r) => ({ _tag: "Created", id: r.id }))

/**
 * `JobStoreService.insert`: the rows in one statement, or in one per chunk inside a transaction;
 * `notify`: the statement (the last chunk's) sends the rows' one notification. Rows with a job key go
 * through `./insertKeyed.ts`, in a transaction with the others.
 */
export const insert = (sql: SqlClient.SqlClient, rows: ReadonlyArray<NewJob>, notify = false): Effect.Effect<ReadonlyArray<Submitted>, StoreError> => {
  if (rows.length === 0) return Effect.succeed([])
  const payload = notify ? payloadOf(rows, Date.now()) : undefined
  if (rows.some((r) => r.jobKey !== undefined)) return insertWithKeys(sql, rows, payload)
  if (rows.length <= insertChunk) return insertRows(sql, rows, payload).pipe(Effect.as(created(rows)), Effect.mapError(fail("insert")))
  const parts = chunks(rows, insertChunk)
  return sql.withTransaction(
    Effect.forEach(parts, (chunk, i) => insertRows(sql, chunk, i === parts.length - 1 ? payload : undefined), { discard: true })
  ).pipe(Effect.as(created(rows)), Effect.mapError(fail("insert")))
}

/** A call with job keys: its keyless rows as any insert's, then its keyed ones, in one transaction (but for one key alone). */
const insertWithKeys = (sql: SqlClient.SqlClient, rows: ReadonlyArray<NewJob>, payload: string | undefined): Effect.Effect<ReadonlyArray<Submitted>, StoreError> => {
  const results = created(rows)
  const plain = rows.filter((r) => r.jobKey === undefined)
  const keyed = rows.filter((r) => r.jobKey !== undefined)
  const indexes = rows.flatMap((r, i) => (r.jobKey === undefined ? [] : [i]))
  const keyedResults: Array<Submitted> = created(keyed)
  const write = Effect.gen(function* () {
    for (const chunk of chunks(plain, insertChunk)) yield* insertRows(sql, chunk)
    yield* insertKeyed(sql, keyed, keyedResults, payload, insertChunk)
  })
  // one key and nothing else (a single keyed enqueue): its one statement needs no transaction of its
  // own — a second one runs only when the first released a stale holder and wrote nothing else
  const oneKey = plain.length === 0 && keyed.every((r) => r.type === keyed[0]!.type && r.jobKey!.key === keyed[0]!.jobKey!.key)
  return (oneKey ? write : sql.withTransaction(write)).pipe(
    Effect.map(() => {
      indexes.forEach((index, k) => (results[index] = keyedResults[k]!))
      return results
    }),
    Effect.mapError(fail("insert"))
  )
}
