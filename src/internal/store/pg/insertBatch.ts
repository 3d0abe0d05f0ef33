/**
 * Single enqueues batched across the producers of a process: the one-row inserts that arrive while an
 * insert statement is out go together in the next one (the multi-row statement of `./insert.ts`, one
 * `warp_jobs` row per job as alone). Alone (a quiet producer), an insert goes at once as the single-row
 * statement; nothing waits for a batch to fill. Each statement commits on its own, and a producer's
 * enqueue returns once the statement holding its row has committed.
 *
 * Rows with a job key are batched too: the batch's keyed rows go through `./insertKeyed.ts` (rows of one
 * key resolve in the order their producers queued them), and each producer gets its own row's
 * `Submitted`.
 *
 * Never batched: an insert inside the caller's `SqlClient.withTransaction` (it must join that
 * transaction: commit publishes, rollback publishes nothing) and inserts of several rows (one call's
 * rows stay all or none in their own statement). A producer interrupted while its row waits in the queue
 * takes it out (nothing is written); once the row's statement is out, the row is written, as a single
 * statement already sent may be. When a batch fails, its rows are inserted one by one, so that a row
 * PostgreSQL refuses fails only its own enqueue; when the server is out of reach, every insert of the
 * batch fails at once.
 *
 * Tracing: a statement runs in a flusher fiber, under a span of its own (`warp.insert.batch`, with the
 * rows it carries) whose parent is the span of the first producer in it (its `warp.enqueue`) and which
 * links to the others' spans, so each producer's trace reaches the statement that wrote its row.
 *
 * @since 0.3.0
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type * as Tracer from "effect/Tracer"
import type { NewJob } from "../../job/Job.js"
import * as Telemetry from "../../observability/Telemetry.js"
import type { Submitted } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import { flushBatch, type Waiting } from "./batching.js"
import { insert } from "./insert.js"

/** At most this many rows in one batched insert statement. */
export const INSERT_BATCH = 256

/** Statements a process runs at once for batched inserts (more batches wait in the queue). */
const FLUSHERS = 2

interface Pending extends Waiting<Submitted> {
  readonly row: NewJob
  /** The producer's span when it enqueued (the statement's span descends from or links to it). */
  readonly span: Option.Option<Tracer.AnySpan>
  /** Set when its producer stopped waiting before the row was taken into a statement. */
  withdrawn: boolean
}

/**
 * Inserts one batch and settles each of its producers (see `flushBatch`), under the batch's span: a child
 * of the first producer's span, linked to the others'.
 */
const flush = (sql: SqlClient.SqlClient, batch: ReadonlyArray<Pending>, notify: boolean): Effect.Effect<void> => {
  const spans: Array<Tracer.AnySpan> = []
  for (const p of batch) if (Option.isSome(p.span)) spans.push(p.span.value)
  const [parent, ...others] = spans
  const position = new Map(batch.map((p, i) => [p, i] as const))
  return flushBatch(
    batch,
    (p) => Effect.map(insert(sql, [p.row], notify), (r) => r[0]!),
    () => insert(sql, batch.map((p) => p.row), notify),
    (p, results) => results[position.get(p)!]!
  ).pipe(
    Effect.withSpan(
      Telemetry.spans.insertBatch,
      {
        kind: "client",
        attributes: { [Telemetry.attributes.batchRows]: batch.length },
        links: others.map((span): Tracer.SpanLink => ({ span, attributes: {} })),
        ...(parent === undefined ? { root: true } : { parent })
      },
      { captureStackTrace: false }
    )
  )
}

/**
 * A batching `JobStoreService.insert` for the PostgreSQL store, alive for the scope: one-row inserts
 * outside a transaction queue and leave in statements of up to {@link INSERT_BATCH} rows,
 * {@link FLUSHERS} statements at a time; everything else goes straight to `insert`. `notify`: each
 * statement sends one notification for its rows (instant pickup).
 */
export const makeBatchedInsert = (
  sql: SqlClient.SqlClient,
  notify = false
): Effect.Effect<(rows: ReadonlyArray<NewJob>) => Effect.Effect<ReadonlyArray<Submitted>, StoreError>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const queue = yield* Effect.acquireRelease(Queue.unbounded<Pending>(), Queue.shutdown)
    const takeBatch = Effect.map(Queue.takeBetween(queue, 1, INSERT_BATCH), (taken) => {
      const batch: Array<Pending> = []
      for (const p of taken) if (!p.withdrawn) batch.push(p)
      return batch
    })
    const flusher = Effect.forever(Effect.flatMap(takeBatch, (batch) => (batch.length === 0 ? Effect.void : flush(sql, batch, notify))))
    for (let i = 0; i < FLUSHERS; i++) yield* Effect.forkScoped(flusher)
    const queued = (row: NewJob) =>
      Effect.flatMap(Effect.zip(Deferred.make<Submitted, StoreError>(), Effect.option(Effect.currentParentSpan)), ([done, span]) => {
        const p: Pending = { row, done, span, withdrawn: false }
        return Effect.andThen(
          Queue.offer(queue, p),
          Deferred.await(done).pipe(Effect.onInterrupt(() => Effect.sync(() => void (p.withdrawn = true))))
        )
      })
    return (rows) =>
      rows.length !== 1
        ? insert(sql, rows, notify)
        : Effect.flatMap(Effect.serviceOption(sql.transactionService), (inTransaction) =>
            inTransaction._tag === "Some" ? insert(sql, rows, notify) : Effect.map(queued(rows[0]!), (s) => [s])
          )
  })
