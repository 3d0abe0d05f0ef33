/**
 * What the statements of the PostgreSQL store share: the error mapping, the decoding of a `warp_jobs`
 * row, and the fragments of the writes that end a job (the columns they set, fair-share tags).
 */
import type * as SqlClient from "effect/sql/SqlClient"
import type * as Statement from "effect/sql/Statement"
import { Job, type JobLog } from "../../job/Job.js"
import { originText } from "../../job/Priority.js"
import { StoreError } from "../StoreError.js"

/**
 * `values` as the text of a PostgreSQL array (`{"a",NULL}`), for a parameter cast to an array type in
 * the statement: the client binds a string untyped and the server reads it as that type. For arrays
 * whose elements may all be null, which @effect/sql-pg cannot bind as a typed array.
 */
export const arrayLiteral = (values: ReadonlyArray<string | null>): string =>
  `{${values.map((v) => (v === null ? "NULL" : `"${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`)).join(",")}}`

/** Maps a failure of `operation` to a {@link StoreError}. */
export const fail = (operation: string) => (cause: unknown) => new StoreError({ operation, cause })

/**
 * Maps a `warp_jobs` row to a {@link Job}. The table's types and CHECK constraints already hold what
 * the schema would check, so the constructor's checks are skipped on this hot path.
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
      ...(typeof r.cancel_requested === "string" ? { cancelRequested: r.cancel_requested } : {}),
      ...(r.fair_tag === null || r.fair_tag === undefined ? {} : { fairTag: Number(r.fair_tag) }),
      priority: r.priority === null || r.priority === undefined ? 0 : Number(r.priority),
      ...(typeof r.job_key === "string" ? { jobKey: r.job_key } : {})
    },
    { disableChecks: true }
  )

/**
 * The creation entry of a row's audit trail, derived from the row (`origin`, `origin_for`,
 * `created_at`, `priority`: ` (priority N)` appended for a non-zero one); undefined for a row inserted
 * before migration 0004, whose entry is a log row.
 */
export const originEntry = (r: any): JobLog | undefined =>
  r.origin === "Scheduled" || r.origin === "Enqueued"
    ? {
        jobId: r.id,
        at: new Date(r.created_at),
        kind: r.origin,
        message: originText(
          r.origin === "Scheduled" ? `Scheduled for ${new Date(r.origin_for).toISOString().replace(/\.\d{3}Z$/, "Z")}` : "Enqueued",
          r.priority === null || r.priority === undefined ? 0 : Number(r.priority)
        )
      }
    : undefined

/**
 * The columns a finalizing write sets on the row it still owns, from the attempt's values as SQL
 * fragments (`state`, `metadata`, `at`: a requeue's time or null, `keeps`: the requeue keeps its place,
 * `ran`: the handler ran in this claim); `row` qualifies the row's own columns (`"j."` in an
 * `UPDATE … FROM`). Shared by the single finalizing statement and the batched one.
 */
export const finalizeSet = (
  sql: SqlClient.SqlClient,
  v: {
    readonly state: Statement.Fragment
    readonly metadata: Statement.Fragment
    readonly at: Statement.Fragment
    readonly keeps: Statement.Fragment
    readonly ran: Statement.Fragment
  },
  row: "" | "j." = ""
) => {
  const own = (column: string) => sql.literal(`${row}${column}`)
  return sql`state = ${v.state}, metadata = ${v.metadata},
              schedule_time = CASE WHEN ${v.state} IN ('Enqueued', 'Scheduled') AND NOT ${v.keeps}
                                   THEN greatest(now(), coalesce(${v.at}, now())) ELSE ${own("schedule_time")} END,
              locked_by = NULL, lease_until = NULL, updated_at = now(),
              attempt = CASE WHEN ${v.ran} THEN ${own("attempt")} ELSE ${own("attempt")} - 1 END,
              cancel_requested = CASE WHEN ${v.state} IN ('Enqueued', 'Scheduled') THEN ${own("cancel_requested")} END,
              holder_key = NULL`
}

/** A row's concurrency key as text, spelled as the partial indexes spell it. */
export const keyOf = (sql: SqlClient.SqlClient) => sql`(metadata #>> '{policies,concurrency,value,key}')`

/**
 * Not a Fifo-mode row with a key (the claim's plain rows, and the predicate of the partial index
 * `warp_jobs_due_unfair`), spelled as that index spells it.
 */
export const plainOf = (sql: SqlClient.SqlClient) =>
  sql`((metadata #>> '{policies,concurrency,value,mode}') IS DISTINCT FROM 'Fifo' OR ${keyOf(sql)} IS NULL)`

/**
 * The virtual time of fair-share tagging (see `JobStore.fairTagOf`): the smallest tag among due
 * pending fair rows (`warp_jobs_fair_due`), else the largest among Processing ones
 * (`warp_jobs_fair_running`), else 0 — two index probes.
 */
export const virtualTime = (sql: SqlClient.SqlClient) => sql`coalesce(
    (SELECT fair_tag FROM warp_jobs WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NOT NULL AND schedule_time <= now() ORDER BY fair_tag LIMIT 1),
    (SELECT fair_tag FROM warp_jobs WHERE state = 'Processing' AND fair_tag IS NOT NULL ORDER BY fair_tag DESC LIMIT 1),
    0)`

/** The last tag among the pending rows of fair-share flow `flow` (a text fragment), one probe of `warp_jobs_fair_flow`. */
export const lastTag = (sql: SqlClient.SqlClient, flow: Statement.Fragment) => sql`(
    SELECT fair_tag FROM warp_jobs WHERE state IN ('Scheduled','Enqueued') AND fair_tag IS NOT NULL AND ${keyOf(sql)} = ${flow}
    ORDER BY fair_tag DESC LIMIT 1)`

/** The tag of one row of flow `flow` and weight `weight` (text and float8 fragments): `max(V, last) + 1/w`. */
export const nextTag = (sql: SqlClient.SqlClient, flow: Statement.Fragment, weight: Statement.Fragment) =>
  sql`(SELECT greatest(v.v, coalesce(${lastTag(sql, flow)}, v.v)) + 1 / ${weight} FROM (SELECT ${virtualTime(sql)} AS v) v)`
