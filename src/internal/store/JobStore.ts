/**
 * The job store service. Two Layers implement it — PostgreSQL and in-memory — and one shared
 * contract test suite runs against both.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { Job, JobDetail, NewJob } from "../job/Job.js"
import type { JobState } from "../job/JobState.js"
import type { LogKind, Outcome } from "../job/Outcome.js"
import * as Describe from "../error/Describe.js"
import { PositiveInt } from "../policy/PolicyValues.js"
import type { SemaphoreProviderService } from "../semaphore/SemaphoreProvider.js"
import type { FusedRelease } from "../semaphore/SemaphoreProviderPg.js"
import type { KeyInsightService } from "./KeyInsight.js"
import type { StoreError } from "./StoreError.js"

/** The single finalizing write of one attempt. */
export interface Finalize {
  readonly job: Job
  readonly workerId: string
  readonly outcome: Outcome
  /** The metadata to persist (the stamp, on a first attempt). */
  readonly metadata: unknown
  /**
   * Whether the handler ran in this claim (default true). A claim whose handler never ran — the key
   * was full, a rate limit or an open breaker sent the job back, the worker released the claim — is
   * not an attempt: the write gives back the attempt number the claim took, so attempt numbers and
   * retry budgets count handler runs.
   */
  readonly handlerRan?: boolean | undefined
  /**
   * The held concurrency slot's release, when the store may run it inside this write (see
   * `SemaphoreProviderPg.FusedRelease`): then one statement finalizes the attempt and frees the slot.
   * A store that ignores it stays correct: the slot is then released by the attempt's scope.
   */
  readonly release?: FusedRelease | undefined
}

/**
 * Hints the worker gives the store for one fetch. A store may honour them (`JobStorePg` does); one
 * that ignores them stays correct, and the worker copes.
 */
export interface FetchHint {
  /**
   * Wait-mode concurrency keys the fetching fiber found full moments ago: leave due rows whose
   * concurrency key (stamped, or set at enqueue) is listed to other fibers, so this fiber does not
   * keep claiming jobs it can only requeue. Ignored: the worker backs off one poll interval before it
   * re-runs such a job.
   */
  readonly contended: ReadonlyArray<string>
  /**
   * The fetching fiber holds a slot of this Wait-mode key at this limit: claim only due rows whose
   * concurrency policy is exactly that, among the first `depth` due rows. Ignored: a row of another
   * policy is run after the slot is released.
   */
  readonly sameSlot?: { readonly key: string; readonly limit: number; readonly depth: number } | undefined
}

/** A page of jobs. */
export interface JobPage {
  readonly rows: ReadonlyArray<Job>
  readonly total: number
}

/** The job store. */
export interface JobStoreService {
  /**
   * Inserts rows (all or none), each with an `Enqueued`/`Scheduled` creation entry first in its audit
   * trail (`JobStorePg` derives that entry from the row: one row write per job). Inside the caller's
   * `SqlClient.withTransaction`, the PostgreSQL store's write joins that transaction.
   */
  readonly insert: (rows: ReadonlyArray<NewJob>) => Effect.Effect<void, StoreError>
  /**
   * Claims up to `limit` due rows (pending with ScheduleTime <= now, or Processing with an expired
   * lease) for `workerId`, marks them Processing and bumps `attempt`. A row is never handed to two
   * live claims. A row of a Fifo-mode key is claimable only if, among the key's Fifo rows in line
   * (Processing, or pending and either attempted before or due; ordered by createdAt, id), fewer
   * than its limit are Processing or pending ahead of it; one fetch claims at most one pending Fifo row
   * (of each key's first claimable row, the one due first; expired leases are recovered as usual) and
   * returns Fifo rows first (see {@link claimOrder}).
   */
  readonly fetch: (
    workerId: string,
    limit: number,
    lease: Duration.Duration,
    hint?: FetchHint
  ) => Effect.Effect<ReadonlyArray<Job>, StoreError>
  /**
   * The attempt's one finalizing write: state and ScheduleTime from the outcome, metadata, one audit
   * entry and the `stats:*` counters. Returns false (and writes nothing) if the claim was lost.
   */
  readonly finalize: (f: Finalize) => Effect.Effect<boolean, StoreError>
  /** Appends one entry to a job's audit trail (nothing if the job does not exist). */
  readonly appendLog: (jobId: string, kind: LogKind, message: string) => Effect.Effect<void, StoreError>
  /** Extends the lease of this worker's claimed rows. */
  readonly heartbeat: (workerId: string, ids: ReadonlyArray<string>, lease: Duration.Duration) => Effect.Effect<void, StoreError>
  /** One job with its audit trail. */
  readonly get: (id: string) => Effect.Effect<Option.Option<JobDetail>, StoreError>
  /** Jobs in a state (or all), newest first. */
  readonly list: (options: { readonly state?: JobState | undefined; readonly limit: number; readonly offset: number }) => Effect.Effect<JobPage, StoreError>
  /** The number of rows per state. */
  readonly countByState: Effect.Effect<Readonly<Record<JobState, number>>, StoreError>
  /** Every counter (`stats:succeeded`, `stats:requeued:<type>`, ...). */
  readonly counters: Effect.Effect<ReadonlyMap<string, number>, StoreError>
  /**
   * Locks that span every process sharing this store (PostgreSQL: advisory locks on its database;
   * memory: in-process, like the store itself). The worker serializes saga handlers per correlation
   * on them, so that serialization holds across processes without another service to provide.
   */
  readonly locks: SemaphoreProviderService
  /** Read-only views of concurrency keys for the dashboard (live keys, holders, waiting lines, windowed counts). */
  readonly insight: KeyInsightService
}

/** The job store service tag. Provide `JobStorePg.layer` or `JobStoreMemory.layer`. */
export class JobStore extends Context.Tag("warp/JobStore")<JobStore, JobStoreService>() {}

/**
 * Whether `id` could be a stored job id: a string PostgreSQL can hold (no NUL, no unpaired
 * surrogate). Reads answer any other id as not found, never with a `StoreError`.
 *
 * @since 0.1.0
 * @category validation
 */
export const isStorableId = (id: unknown): id is string => typeof id === "string" && Describe.unstorableText(id) === undefined

/**
 * Whether `limit` and `offset` describe a page: whole numbers >= 0 (and safe). `list` answers any
 * other window with no rows, never with a `StoreError`.
 *
 * @since 0.1.0
 * @category validation
 */
export const isWindow = (limit: unknown, offset: unknown): boolean =>
  Number.isSafeInteger(limit) && (limit as number) >= 0 && Number.isSafeInteger(offset) && (offset as number) >= 0

/** Every state, zeroed (for count maps). */
export const emptyCounts = (): Record<JobState, number> => ({
  Scheduled: 0,
  Enqueued: 0,
  Processing: 0,
  Succeeded: 0,
  Failed: 0,
  Deleted: 0
})

/** The part of a row's metadata that puts it in a Fifo line: mode `Fifo` and a key (string or number). */
const FifoRow = Schema.Struct({
  policies: Schema.Struct({
    concurrency: Schema.Struct({
      value: Schema.Struct({ mode: Schema.Literal("Fifo"), key: Schema.Union(Schema.String, Schema.Number), limit: Schema.Unknown })
    })
  })
})
const isFifoRow = Schema.is(FifoRow)
const isLimit = Schema.is(PositiveInt)

/**
 * A row's Fifo-mode concurrency policy (stamped, or carried at publish), if it has one. A row whose
 * limit is not a valid limit (hand-corrupted metadata) counts at limit 1, so that it is claimed in
 * turn and the worker fails it, instead of blocking its line or the fetch.
 */
export const fifoPolicyOf = (job: Job): { readonly key: string; readonly limit: number } | undefined => {
  if (!isFifoRow(job.metadata)) return undefined
  const { key, limit } = job.metadata.policies.concurrency.value
  return { key: String(key), limit: isLimit(limit) ? limit : 1 }
}

/**
 * Orders a fetch's claimed rows for the worker, which runs one fiber's batch in order: the Fifo-mode row
 * first (a fetch claims at most one, so that it starts at once: a Fifo row waiting in a batch behind
 * other work would let later jobs of its key overtake it), then the others by (ScheduleTime, id).
 */
export const claimOrder = (rows: ReadonlyArray<Job>): Array<Job> =>
  [...rows].sort(
    (a, b) =>
      Number(fifoPolicyOf(b) !== undefined) - Number(fifoPolicyOf(a) !== undefined) ||
      a.scheduleTime.getTime() - b.scheduleTime.getTime() ||
      (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  )

/** Submission order: (createdAt, id). */
export const bySubmission = (a: Job, b: Job): number =>
  a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/** The counter keys an outcome increments: the global one and the one per job type. */
export const counterKeys = (counter: string, type: string): ReadonlyArray<string> => [counter, `${counter}:${type}`]
