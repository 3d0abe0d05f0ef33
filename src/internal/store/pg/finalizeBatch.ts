/**
 * Finalizing writes batched across the lanes of a process: the attempts of several lanes that end
 * while one finalizing statement is out go together in the next one, one `warp_jobs` update and one
 * audit insert (each entry naming its counter, see `./counters.ts`) for all of them. Alone (a quiet worker),
 * an attempt's write goes at once as the single statement of `./finalize.ts`; nothing waits for a
 * batch to fill. Writes that carry a slot's release (`Finalize.release`) run on the slot's connection
 * and are never batched; nor are requeues of weighted jobs (their new fair-share tag is computed by the
 * single statement).
 *
 * Each attempt keeps its own result: the rows a batch wrote are told apart by id, and an attempt
 * whose row the batch did not match (the claim was lost) gets `false`, as alone. When a batch fails,
 * its writes are retried one by one, so that one bad write (a payload PostgreSQL refuses) fails only
 * its own attempt; when the server is out of reach, every write of the batch fails at once, and each
 * caller retries its own. With instant pickup on (`notify`), a write that frees a slot of a key with due
 * jobs waiting sends a `Freed` notification (see `./finalize.ts`); a batch of keyless writes sends none.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import { counterOf, logOf, stateOf } from "../../job/Outcome.js"
import { fairOf, type Finalize, retagsOn } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import * as Wakeup from "../Wakeup.js"
import { flushBatch, type Waiting } from "./batching.js"
import { finalize, freedKey, freedNotify } from "./finalize.js"
import { runPrepared } from "./prepared.js"
import type { LimitsTable } from "./readsLimits.js"
import { arrayLiteral, fail, finalizeSet } from "./shared.js"

/** At most this many writes in one batched statement. */
export const FINALIZE_BATCH = 64

/** Statements a process runs at once for batched writes (more batches wait in the queue). */
const FLUSHERS = 2

interface Pending extends Waiting<boolean> {
  readonly f: Finalize
}

/** One statement that writes every finalize of `batch` (distinct job ids); resolves to the ids it wrote. */
export const finalizeMany = (
  sql: SqlClient.SqlClient,
  batch: ReadonlyArray<Finalize>,
  prepared = true,
  notify = false
): Effect.Effect<ReadonlySet<string>, StoreError> => {
  const now = new Date()
  // the keys whose slots the writes free (see `freedNotify`): a column only when one of them is keyed
  const freed = notify ? batch.map(freedKey) : []
  const keyed = freed.some((k) => k !== undefined)
  const states = batch.map((f) => stateOf(f.outcome, now))
  const logs = batch.map((f) => logOf(f.outcome))
  const col = <A>(get: (f: Finalize, i: number) => A) => batch.map(get)
  const at = (f: Finalize) => (f.outcome._tag === "Requeued" && f.outcome.at !== undefined ? f.outcome.at.toISOString() : null)
  return runPrepared(sql`
      WITH x AS (
        SELECT * FROM unnest(
          ${col((f) => f.job.id)}::text[], ${col((f) => f.workerId)}::text[], ${col((f) => f.job.attempt)}::int[],
          ${states}::text[], ${col((f) => JSON.stringify(f.metadata))}::jsonb[], ${arrayLiteral(col(at))}::timestamptz[],
          ${col((f) => f.outcome._tag === "Requeued" && f.outcome.keepsPlace === true)}::bool[], ${col((f) => f.handlerRan ?? true)}::bool[],
          ${col((f, i) => retagsOn(f.outcome, states[i]!))}::bool[],
          ${logs.map((l) => l.kind)}::text[], ${logs.map((l) => l.message)}::text[],
          ${col((f) => counterOf(f.outcome))}::text[]${
            keyed
              ? sql`, ${arrayLiteral(freed.map((k) => k ?? null))}::text[], ${arrayLiteral(freed.map((k) => (k === undefined ? null : Wakeup.freedPayload(k))))}::text[]`
              : sql``
          }
        ) AS x(id, worker, attempt, state, metadata, at, keeps, ran, retag, kind, message, counter${keyed ? sql`, fk, fp` : sql``})
      ), u AS (
        UPDATE warp_jobs j
        SET ${finalizeSet(sql, { state: sql`x.state`, metadata: sql`x.metadata`, at: sql`x.at`, keeps: sql`x.keeps`, ran: sql`x.ran` }, "j.")},
            fair_tag = CASE WHEN x.retag THEN NULL ELSE j.fair_tag END
        FROM x
        WHERE j.id = x.id AND j.state = 'Processing' AND j.locked_by = x.worker AND j.attempt = x.attempt
        RETURNING j.id, x.kind, x.message, x.counter${keyed ? sql`, CASE WHEN x.fk IS NOT NULL THEN ${freedNotify(sql, sql`x.fk`, sql`x.fp`)} END AS freed` : sql``}
      ), l AS (
        INSERT INTO warp_job_logs (job_id, kind, message, counter) SELECT id, kind, message, counter FROM u
      )
      SELECT id FROM u`, prepared).pipe(
    Effect.map((rows) => new Set(rows.map((r: any) => String(r.id)))),
    Effect.mapError(fail("finalize"))
  )
}

/** Writes one batch and settles each of its attempts (see `flushBatch`). */
const flush = (
  sql: SqlClient.SqlClient,
  readsLimits: Effect.Effect<LimitsTable>,
  batch: ReadonlyArray<Pending>,
  prepared: boolean,
  notify: boolean
): Effect.Effect<void> =>
  flushBatch(
    batch,
    (p) => finalize(sql, readsLimits, p.f, prepared, notify),
    () => finalizeMany(sql, batch.map((p) => p.f), prepared, notify),
    (p, written) => written.has(p.f.job.id)
  )

/**
 * A batching `JobStoreService.finalize` for the PostgreSQL store, alive for the scope: writes that
 * carry a slot's release on `sql`, and requeues of weighted jobs, go alone through `finalize`; the
 * others queue and leave in batches of up to {@link FINALIZE_BATCH} distinct jobs, {@link FLUSHERS}
 * statements at a time.
 */
export const makeBatchedFinalize = (
  sql: SqlClient.SqlClient,
  readsLimits: Effect.Effect<LimitsTable>,
  prepared = true,
  notify = false
): Effect.Effect<(f: Finalize) => Effect.Effect<boolean, StoreError>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const queue = yield* Effect.acquireRelease(Queue.unbounded<Pending>(), Queue.shutdown)
    // a job twice in one batch (a retry queued while its first write is still out) waits for the next
    let carried: Array<Pending> = []
    const take = Effect.suspend(() => (carried.length > 0 ? Queue.takeBetween(queue, 0, FINALIZE_BATCH) : Queue.takeBetween(queue, 1, FINALIZE_BATCH)))
    const takeBatch = Effect.map(take, (taken) => {
      const seen = new Set<string>()
      const batch: Array<Pending> = []
      const next: Array<Pending> = []
      for (const p of [...carried, ...taken]) {
        if (seen.has(p.f.job.id) || batch.length >= FINALIZE_BATCH) next.push(p)
        else {
          seen.add(p.f.job.id)
          batch.push(p)
        }
      }
      carried = next
      return batch
    })
    const flusher = Effect.forever(Effect.flatMap(takeBatch, (batch) => flush(sql, readsLimits, batch, prepared, notify)))
    for (let i = 0; i < FLUSHERS; i++) yield* Effect.forkScoped(flusher)
    const alone = (f: Finalize) => {
      if (f.release !== undefined && f.release.client === sql) return true
      return retagsOn(f.outcome, stateOf(f.outcome, new Date())) && fairOf(f.metadata) !== undefined
    }
    return (f: Finalize) =>
      alone(f)
        ? finalize(sql, readsLimits, f, prepared, notify)
        : Effect.flatMap(Deferred.make<boolean, StoreError>(), (done) => Effect.andThen(Queue.offer(queue, { f, done }), Deferred.await(done)))
  })
