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
import type * as Scope from "effect/Scope"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"
import type { Job, JobDetail, NewJob, NewJobKey } from "../job/Job.js"
import type { JobState } from "../job/JobState.js"
import type { LogKind, Outcome } from "../job/Outcome.js"
import type { JobExpired, PruneResult, RetentionPlan } from "../job/Retention.js"
import * as Describe from "../error/Describe.js"
import { PositiveInt } from "../policy/PolicyValues.js"
import type { SemaphoreProviderService } from "../semaphore/SemaphoreProvider.js"
import type { FusedRelease } from "../semaphore/SemaphoreProvider.js"
import type { KeyInsightService } from "./KeyInsight.js"
import type { StoreError } from "./StoreError.js"
import type { Wakeup } from "./Wakeup.js"

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
   * Whether the attempt's slot stays held after this write (a job run under a reused slot, see the
   * worker's `slotReuse`): the write frees no slot, so a store that tells idle workers of freed slots
   * (instant pickup) tells nothing of it. Default false: a write of a keyed attempt whose handler ran
   * ends its hold of the key's slot.
   */
  readonly holdsSlot?: boolean | undefined
  /**
   * The held concurrency slot's release, when the store may run it inside this write (see
   * `SemaphoreProvider.FusedRelease`): then one statement finalizes the attempt and frees the slot.
   * A store that ignores it stays correct: the slot is then released by the attempt's scope.
   */
  readonly release?: FusedRelease | undefined
  /**
   * The writing lane's next claim, which a store may run inside this write when the write runs on the
   * held slot's connection (`release`): one statement then finalizes the attempt, frees its slot and
   * claims the lane's next rows. A store that ignores it stays correct: the lane claims on its own.
   */
  readonly claim?: CarriedClaim | undefined
}

/**
 * A claim carried by a finalizing write (see {@link Finalize.claim}): the arguments of
 * {@link JobStoreService.fetch}, and where its rows go.
 */
export interface CarriedClaim {
  readonly limit: number
  readonly lease: Duration.Duration
  readonly hint: FetchHint
  /**
   * Receives the rows the write claimed, in the order a worker runs them, as soon as its statement has
   * answered — only when the store ran the claim (none claimed: an empty list).
   */
  readonly claimed: (jobs: ReadonlyArray<Job>) => void
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

/**
 * What {@link JobStoreService.requestCancel} did:
 * - `Cancelled`: the job was waiting (Enqueued or Scheduled); it is Deleted now, with its audit entry;
 * - `Cancelling`: the job is running; the worker holding it interrupts the attempt (its slot is freed by
 *   the attempt's scope) and writes it as Deleted with the audit entry, within its cancel check interval;
 * - `Finished`: the job had already ended (Succeeded, Failed or Deleted); nothing was written;
 * - `NotFound`: no job has this id.
 */
export type CancelResult = "Cancelled" | "Cancelling" | "Finished" | "NotFound"

/**
 * What an enqueue did (see `Publisher.submit`): `Created` a job; `Replaced` the payload (and, mode
 * `replace`, the time) of the pending job that held its job key; `Joined` the job that held the key
 * (mode `keep`, a throttle window, or a holder that cannot be replaced any more). `id`: the job that now
 * holds the key (the new one when `Created`).
 *
 * @since 1.1.0
 * @category models
 */
export type Submitted =
  | { readonly _tag: "Created"; readonly id: string }
  | { readonly _tag: "Replaced"; readonly id: string }
  | { readonly _tag: "Joined"; readonly id: string }

/** The holder's audit text of an enqueue with job key `key` that replaced its payload. */
export const replacedByKeyText = (key: string): string => `Replaced by an enqueue with job key '${key}'`

/** The holder's audit text of an enqueue with job key `key` that joined it. */
export const joinedByKeyText = (key: string): string => `Joined by an enqueue with job key '${key}'`

/** The start of {@link joinedThrottleText}, before the window's seconds. */
export const throttleJoinPrefix = "Joined by an enqueue within its throttle window of "

/** The end of {@link joinedThrottleText}, after the window's seconds. */
export const throttleJoinSuffix = (key: string): string => ` s (job key '${key}')`

/** The holder's audit text of an enqueue that joined it within its throttle window of `windowMs`. */
export const joinedThrottleText = (windowMs: number, key: string): string => `${throttleJoinPrefix}${windowMs / 1000}${throttleJoinSuffix(key)}`

/** The counter of an enqueue that joined a job holding its key. */
export const deduplicatedCounter = "stats:deduplicated"

/** The counter of an enqueue that replaced the payload of a job holding its key. */
export const replacedCounter = "stats:replaced"

/**
 * Whether a row holding job key (hold `hold`, throttle window end `until`) still holds it at `now`:
 * `Pending` while Scheduled or Enqueued, `Processing` while Processing too, `Throttle` until its window
 * ends. A holder that no longer holds is released by the next insert of its key (the lazy release).
 */
export const holdsKey = (state: JobState, hold: NewJobKey["hold"], until: number | undefined, now: number): boolean =>
  hold === "Throttle"
    ? until !== undefined && until > now
    : state === "Scheduled" || state === "Enqueued" || (hold === "Processing" && state === "Processing")

/** Why an operator's cancel ends a job: "by an operator", with the operator's reason when given. */
export const operatorCause = (reason: string): string => `by an operator${reason === "" ? "" : `: ${reason}`}`

/** Why a `CancelRunning` key's newer job ends a running holder. */
export const replacedCause = (key: string, newer: string): string => `replaced by newer job ${newer} of '${key}'`

/**
 * The audit text of a cancelled job: `Cancelled — {cause}`, and ` (running attempt N interrupted)` when
 * its handler was running.
 */
export const cancelText = (cause: string, running?: { readonly attempt: number }): string =>
  `Cancelled — ${cause}${running === undefined ? "" : ` (running attempt ${running.attempt} interrupted)`}`

/** A cancel asked for a job a worker holds. */
export interface CancelRequest {
  readonly id: string
  /** Why (see {@link operatorCause}, {@link replacedCause}). */
  readonly cause: string
}

/** What a worker reports of itself with each heartbeat (see {@link JobStoreService.reportWorker}). */
export interface WorkerReport {
  readonly workerId: string
  readonly host: string
  readonly pid: number
  /** Fibers running attempts. */
  readonly lanes: number
  /** Jobs claimed and not yet finalized. */
  readonly inFlight: number
  /**
   * Concurrency keys of the handlers it is running now, with how many of each; `jobs`: the running
   * jobs whose row does not carry the key yet (resolved from the handler or contract in their first
   * attempt, stamped by its finalizing write), so that the dashboard can show them holding it.
   */
  readonly slots: ReadonlyArray<{ readonly key: string; readonly held: number; readonly jobs?: ReadonlyArray<ReportedJob> | undefined }>
  /** How often the worker reports (its heartbeat interval). */
  readonly heartbeatMs: number
  /** The worker's last outage of the store, once it is over. */
  readonly lastOutage?: { readonly ms: number; readonly endedAt: Date } | undefined
}

/**
 * A running job whose row does not carry its key yet, as its worker reports it: the limit in force and
 * where the key was declared (`handler`, `contract` or `global`).
 */
export interface ReportedJob {
  readonly id: string
  readonly limit: number
  readonly source: string
}

/** A worker as the registry sees it. */
export interface WorkerInfo extends WorkerReport {
  readonly startedAt: Date
  readonly seenAt: Date
  /** Milliseconds since the worker last reported, by the store's clock. */
  readonly silentMs: number
  /** Jobs it holds now (Processing rows locked by it). */
  readonly holding: number
  /**
   * PostgreSQL connections its process has open to the store's database, counted by the
   * `application_name` of the connection its report was written on (`Database.layer` sets
   * `warp-effect {pid}@{hostname}`); the connections of a held PostgreSQL-provider slot count too.
   * Undefined when the store cannot tell: the memory store, a connection without a name, or a name
   * another process reports as well.
   */
  readonly connections: number | undefined
}

/**
 * One finding of the slot-leak audit (`SlotAudit`), as the store keeps it:
 * - `LeakedSlot`: slot `slot` of `key` is held by an idle session with no Processing job of the key to
 *   account for it;
 * - `StuckHolder`: job `jobId` of `key` is Processing with its lease expired while a slot lock of the key
 *   is held (`slot` is undefined: the lock cannot be tied to the job).
 * `detail` says the rest in words (session, idle time, lease); `foundAt` is the audit run's time.
 */
export interface SlotAuditFinding {
  readonly kind: "LeakedSlot" | "StuckHolder"
  readonly key: string
  readonly slot: number | undefined
  readonly jobId: string | undefined
  readonly detail: string
  readonly foundAt: Date
}

/**
 * Which jobs a list shows: every given field narrows it (all of them hold). Text fields are matched
 * as text (`keyPrefix` is a plain prefix: `%` and `_` are characters, not wildcards).
 */
export interface JobFilter {
  /** Exactly this id. */
  readonly id?: string | undefined
  /** The concurrency key (stamped, or carried at enqueue) starts with this text. */
  readonly keyPrefix?: string | undefined
  /** Exactly this job type. */
  readonly type?: string | undefined
  /** Exactly this job key (see `JobParameters.withJobKey`), held or not. */
  readonly jobKey?: string | undefined
  /** In this state. */
  readonly state?: JobState | undefined
  /** In one of these states (with `state`: in both). */
  readonly states?: ReadonlyArray<JobState> | undefined
  /** Created at or after this time. */
  readonly createdAfter?: Date | undefined
  /** Created before this time. */
  readonly createdBefore?: Date | undefined
  /**
   * A priority at least this.
   *
   * @since 1.1.0
   */
  readonly minPriority?: number | undefined
}

/**
 * An operator's write on jobs from the dashboard:
 * - `retry`: a Failed or Deleted job goes back to Enqueued, due now (audit kind `Retried`);
 * - `delete`: a pending (Scheduled, Enqueued) or Failed job becomes Deleted (audit kind `Deleted`);
 * - `requeue`: a Scheduled or Enqueued job becomes Enqueued, due now (audit kind `Requeued`).
 * A Processing row is never touched.
 */
export type OperatorAction = "retry" | "delete" | "requeue"

/** The states each {@link OperatorAction} applies to. */
export const operatorFrom: Readonly<Record<OperatorAction, ReadonlyArray<JobState>>> = {
  retry: ["Failed", "Deleted"],
  delete: ["Scheduled", "Enqueued", "Failed"],
  requeue: ["Scheduled", "Enqueued"]
}

/** The state each {@link OperatorAction} writes, and its audit entry. */
export const operatorTo: Readonly<Record<OperatorAction, { readonly state: JobState; readonly kind: LogKind; readonly message: string }>> = {
  retry: { state: "Enqueued", kind: "Retried", message: "Retried by an operator" },
  delete: { state: "Deleted", kind: "Deleted", message: "Deleted by an operator" },
  requeue: { state: "Enqueued", kind: "Requeued", message: "Requeued by an operator" }
}

/** What an operator's write did: rows changed, and given ids left alone (unknown, or not in a state the action applies to). */
export interface OperateResult {
  readonly changed: number
  readonly skipped: number
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
   *
   * Job keys (`NewJob.jobKey`): a row whose key (per type) is held by a live row (see {@link holdsKey})
   * is not inserted: it replaces the holder's payload (and time, mode `replace`) when the holder is
   * pending and its mode is not `keep`, else it joins it; the holder's trail gets the entry
   * ({@link replacedByKeyText}, {@link joinedByKeyText}, {@link joinedThrottleText}) counted as
   * {@link replacedCounter} / {@link deduplicatedCounter}. Rows of one call with the same key resolve in
   * order. Returns what happened to each row, in order.
   */
  readonly insert: (rows: ReadonlyArray<NewJob>) => Effect.Effect<ReadonlyArray<Submitted>, StoreError>
  /**
   * Claims up to `limit` due rows (pending with ScheduleTime <= now, or Processing with an expired
   * lease) for `workerId`, marks them Processing and bumps `attempt`. A row is never handed to two
   * live claims. A row of a Fifo-mode key is claimable only if, among the key's Fifo rows in line
   * (Processing, or pending and either attempted before or due; ordered by createdAt, id), fewer
   * than its limit are Processing or pending ahead of it; one fetch claims at most one pending Fifo row
   * (of each key's first claimable row, the one due first; expired leases are recovered as usual) and
   * returns Fifo rows first (see {@link claimOrder}).
   *
   * Fair share: a row whose concurrency policy carries a weight (see {@link fairOf}) gets a tag at insert
   * (see {@link fairTagOf}) and a new one at the back of its flow when it is requeued (not when the
   * requeue keeps its place or its tag, see {@link retagsOn}). Due fair rows are claimed in tag order, merged with the other rows as
   * {@link fairMerge} says: the other rows keep (priority, ScheduleTime) order. Inside a flow, a turn (a
   * tag) goes to the flow's best due row by (priority descending, tag) and the rows passed over take
   * the claimed rows' tags (see {@link fairTurns}, {@link fairSwaps}): a flow's set of tags is unchanged.
   *
   * Priority: due rows are claimed by (priority descending, ScheduleTime, id) — the plain rows through
   * the admission in that order, the Fifo row (at most one) by its own priority (it never reorders its
   * key's line), the fair rows as {@link fairMerge} says. A claim of `limit` rows leaves no due keyless
   * plain row unclaimed while it claims a row of a lower priority, as long as fewer than `limit` +
   * {@link ADMISSION_DEPTH} plain rows rank ahead of it (expired leases are recovered first, whatever
   * their priority).
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
  /**
   * Asks to cancel a job (see {@link CancelResult}). A waiting job is Deleted at once; a running one
   * is marked, and the worker holding it learns of it from {@link cancelRequests} (or from the row,
   * when it claims it again) and ends the attempt as Deleted. Audit text: {@link cancelText} of
   * {@link operatorCause}.
   */
  readonly requestCancel: (id: string, reason: string) => Effect.Effect<CancelResult, StoreError>
  /**
   * Marks `id` (Processing, claimed by `workerId`) as holding a slot of `key`, for
   * {@link cancelHolders}. Only `CancelRunning` keys are marked; the finalizing write clears it.
   */
  readonly markHolder: (id: string, workerId: string, key: string) => Effect.Effect<void, StoreError>
  /**
   * Asks to cancel the marked holders of `key` that are older than `newer` (created before it, or at
   * the same time with a smaller id) and not already being cancelled, with {@link replacedCause}; says
   * which. Their workers interrupt them as for {@link requestCancel}.
   */
  readonly cancelHolders: (key: string, newer: Job) => Effect.Effect<ReadonlyArray<string>, StoreError>
  /** The cancels asked for among `ids`, jobs this worker holds. */
  readonly cancelRequests: (workerId: string, ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<CancelRequest>, StoreError>
  /** Records a worker's report in the registry (insert or update; the store stamps the time). */
  readonly reportWorker: (report: WorkerReport) => Effect.Effect<void, StoreError>
  /** Removes a stopping worker from the registry. */
  readonly removeWorker: (workerId: string) => Effect.Effect<void, StoreError>
  /** The registry: every worker that reported and has not stopped, oldest first. */
  readonly workers: Effect.Effect<ReadonlyArray<WorkerInfo>, StoreError>
  /**
   * Replaces the stored findings of the slot-leak audit with those of its latest run (an empty list:
   * the run found nothing), in one atomic write. Any process running the audit writes here; the
   * dashboard reads {@link slotAuditFindings}.
   */
  readonly recordSlotAudit: (findings: ReadonlyArray<SlotAuditFinding>) => Effect.Effect<void, StoreError>
  /** The findings of the latest slot-audit run recorded, in the order recorded (none: no run recorded, or it found nothing). */
  readonly slotAuditFindings: Effect.Effect<ReadonlyArray<SlotAuditFinding>, StoreError>
  /**
   * One job with its audit trail. None: no job has this id. Fails with `JobExpired` when the job
   * existed and retention removed it (while its tombstone is kept, see `RetentionOptions.tombstones`).
   */
  readonly get: (id: string) => Effect.Effect<Option.Option<JobDetail>, StoreError | JobExpired>
  /**
   * Retention: removes one batch (up to `plan.batchSize`) of finished rows expired under `plan`, oldest
   * first per job type and state, with their audit trails; leaves a tombstone of each (while
   * `plan.tombstoneMs` > 0) and folds the keyed ones that ended within the last day into the per-key
   * figures (`insight`), so that they do not drop; removes up to a batch of tombstones older than
   * `plan.tombstoneMs` and of per-key history older than a day. Never removes a row whose counted audit
   * entry is not folded into the counters yet (the PostgreSQL store's roll-up), so `counters` never
   * drops. One process at a time across the store (`ran: false`: another was pruning; nothing done).
   */
  readonly prune: (plan: RetentionPlan) => Effect.Effect<PruneResult, StoreError>
  /** The finished rows expired under `plan` and not removed yet, counted up to `cap`. */
  readonly expiredBacklog: (plan: RetentionPlan, cap: number) => Effect.Effect<number, StoreError>
  /** Jobs matching the filter (no filter: all), newest first; `total` counts every match. */
  readonly list: (options: JobFilter & { readonly limit: number; readonly offset: number }) => Effect.Effect<JobPage, StoreError>
  /**
   * An operator's write on the given jobs (see {@link OperatorAction}): each row in a state the action
   * applies to changes, with its audit entry, in one atomic write; the others (unknown ids, rows in
   * any other state, Processing rows above all) are left alone and counted as skipped. Duplicate ids
   * count once.
   */
  readonly operate: (action: OperatorAction, ids: ReadonlyArray<string>) => Effect.Effect<OperateResult, StoreError>
  /** The number of rows per state. */
  readonly countByState: Effect.Effect<Readonly<Record<JobState, number>>, StoreError>
  /**
   * Optional: takes the reader of the admin overrides that the claim's admission should count a key's
   * or group's slots by (see {@link admit}); the in-memory limits hand it to the in-memory store. A store
   * that reads them on its own (the PostgreSQL store reads `warp_concurrency_limits` and
   * `warp_concurrency_group_limits` in its claim) or that has no admission leaves it out.
   *
   * @since 1.1.0
   */
  readonly admissionOverrides?: ((overrides: AdmissionOverrides) => void) | undefined
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
  /**
   * Subscribes, for the scope, to the hints of due work for idle workers (instant pickup, see `Wakeup`):
   * new due rows, a Scheduled row's time, a freed slot of a key with due jobs waiting, a (re)connected
   * listener — those sent from the subscription on, as a stream. Absent: the store sends none, and
   * workers learn of due work by polling.
   */
  readonly wakeups?: Effect.Effect<Stream.Stream<Wakeup>, never, Scope.Scope> | undefined
  /**
   * In how many milliseconds (by the store's clock) the earliest pending row that is not due yet comes
   * due; none when no such row. Workers set a timer for it after an empty claim. Absent: the poll finds
   * Scheduled rows once due. (The PostgreSQL store leaves out Fifo-mode rows: their poll finds them.)
   */
  readonly nextDue?: Effect.Effect<Option.Option<number>, StoreError> | undefined
}

/** The job store service tag. Provide `JobStorePg.layer` or `JobStoreMemory.layer`. */
export class JobStore extends Context.Service<JobStore, JobStoreService>()("warp/JobStore") {}

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

/**
 * Whether a job matches a filter (the in-memory spelling of `list`'s WHERE; the PostgreSQL store
 * spells it in SQL).
 */
export const matchesFilter = (j: Job, f: JobFilter): boolean => {
  if (f.id !== undefined && j.id !== f.id) return false
  if (f.type !== undefined && j.type !== f.type) return false
  if (f.jobKey !== undefined && j.jobKey !== f.jobKey) return false
  if (f.state !== undefined && j.state !== f.state) return false
  if (f.states !== undefined && !f.states.includes(j.state)) return false
  if (f.createdAfter !== undefined && j.createdAt.getTime() < f.createdAfter.getTime()) return false
  if (f.createdBefore !== undefined && j.createdAt.getTime() >= f.createdBefore.getTime()) return false
  if (f.minPriority !== undefined && !(j.priority >= f.minPriority)) return false
  if (f.keyPrefix !== undefined) {
    const key = concurrencyKeyOf(j.metadata)
    if (key === undefined || !key.startsWith(f.keyPrefix)) return false
  }
  return true
}

const KeyedRow = Schema.Struct({
  policies: Schema.Struct({ concurrency: Schema.Struct({ value: Schema.Struct({ key: Schema.Union([Schema.String, Schema.Number]) }) }) })
})
const isKeyedRow = Schema.is(KeyedRow)

/** A row's concurrency key as text (what PostgreSQL's `metadata #>> '{policies,concurrency,value,key}'` reads), if any. */
export const concurrencyKeyOf = (metadata: unknown): string | undefined =>
  isKeyedRow(metadata) ? String(metadata.policies.concurrency.value.key) : undefined

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
      value: Schema.Struct({ mode: Schema.Literal("Fifo"), key: Schema.Union([Schema.String, Schema.Number]), limit: Schema.Unknown })
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

/** The part of a row's metadata that makes it a fair-share row: a key, a weight, and a mode other than Fifo. */
const FairRow = Schema.Struct({
  policies: Schema.Struct({
    concurrency: Schema.Struct({
      value: Schema.Struct({ mode: Schema.String, key: Schema.Union([Schema.String, Schema.Number]), weight: Schema.Number })
    })
  })
})
const isFairRow = Schema.is(FairRow)

/**
 * A row's fair-share flow (its concurrency key as text) and weight, when its concurrency policy
 * (stamped, or carried at publish) carries a valid weight and is not Fifo-mode; undefined otherwise
 * (the row keeps ScheduleTime order). Both stores read the flow of a row through this.
 */
export const fairOf = (metadata: unknown): { readonly flow: string; readonly weight: number } | undefined => {
  if (!isFairRow(metadata)) return undefined
  const { key, mode, weight } = metadata.policies.concurrency.value
  return mode !== "Fifo" && Number.isFinite(weight) && weight > 0 ? { flow: String(key), weight } : undefined
}

/**
 * The virtual time of fair-share tagging: the smallest tag among due pending fair rows, else the
 * largest tag among Processing fair rows, else 0. A new fair row of flow `f` and weight `w` gets
 * `max(V, last tag pending in f) + 1/w` (successive rows of one flow in one insert step by `1/w`).
 *
 * Limit: a row scheduled in the future gets its tag at insert, from the V of then; while it waits it
 * does not hold V back (only due rows count), and once due it ranks by that old tag — ahead of rows
 * tagged since, by up to the service its flow was owed when it was inserted.
 */
export const fairTagOf = (virtual: number, last: number | undefined, weight: number): number => Math.max(virtual, last ?? -Infinity) + 1 / weight

/**
 * Whether a finalizing write of `outcome` (into `state`) gives a weighted row a new tag at the back of
 * its flow: a requeue does, unless it keeps its place or its tag (see `Outcome.Requeued`).
 */
export const retagsOn = (outcome: Outcome, state: JobState): boolean =>
  (state === "Enqueued" || state === "Scheduled") &&
  !(outcome._tag === "Requeued" && (outcome.keepsPlace === true || outcome.keepsTag === true))

const byTimeThenId = (a: Job, b: Job) => a.scheduleTime.getTime() - b.scheduleTime.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
const byTagThenId = (a: Job, b: Job) => a.fairTag! - b.fairTag! || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/**
 * The claim's order of due rows: priority (higher first), then ScheduleTime, then id.
 *
 * @since 1.1.0
 */
export const byClaim = (a: Job, b: Job): number => b.priority - a.priority || byTimeThenId(a, b)

/**
 * Orders a fetch's claimed rows for the worker, which runs one fiber's batch in order: the Fifo-mode row
 * first (a fetch claims at most one, so that it starts at once: a Fifo row waiting in a batch behind
 * other work would let later jobs of its key overtake it), then the others by (priority descending,
 * ScheduleTime, id) — the positions the fair-share rows take in that order are then refilled with the
 * fair-share rows by (priority descending, tag), so each keeps a position of its own priority (the same
 * merge as the claim's, see `JobStoreService.fetch`).
 */
export const claimOrder = (rows: ReadonlyArray<Job>): Array<Job> => {
  const out = [...rows].sort(
    (a, b) => Number(fifoPolicyOf(b) !== undefined) - Number(fifoPolicyOf(a) !== undefined) || byClaim(a, b)
  )
  const fair = out.filter((j) => j.fairTag !== undefined)
  if (fair.length < 2) return out
  const tagged = [...fair].sort((a, b) => b.priority - a.priority || byTagThenId(a, b))
  let i = 0
  return out.map((j) => (j.fairTag !== undefined ? tagged[i++]! : j))
}

/** A fair-share row's flow as the claim groups it: its concurrency key as text (a row without one: a flow of its own). */
const flowOfRow = (j: Job): string => concurrencyKeyOf(j.metadata) ?? `#${j.id}`

/**
 * The fair-share rows one claim considers, in turn order: the first `limit` due fair rows by (tag, id)
 * are the turns (`slot`); a flow's j-th turn (by tag) goes to the flow's j-th due row by (priority
 * descending, tag, id) (`job`), at the turn's tag. When every due row of a flow has one priority, the
 * turns keep their own rows. (The PostgreSQL claim's `fair` CTE; there, rows it cannot lock are not
 * considered.)
 */
export const fairTurns = (fair: ReadonlyArray<Job>, limit: number): Array<{ readonly job: Job; readonly slot: Job }> => {
  const slots = [...fair].sort(byTagThenId).slice(0, limit)
  const flows = new Map<string, Array<Job>>()
  for (const j of fair) {
    const f = flowOfRow(j)
    const rows = flows.get(f)
    if (rows === undefined) flows.set(f, [j])
    else rows.push(j)
  }
  const best = new Map<string, Array<Job>>()
  for (const [f, rows] of flows) best.set(f, rows.sort((a, b) => b.priority - a.priority || byTagThenId(a, b)))
  const seen = new Map<string, number>()
  return slots.map((slot) => {
    const f = flowOfRow(slot)
    const j = seen.get(f) ?? 0
    seen.set(f, j + 1)
    return { job: best.get(f)![j]!, slot }
  })
}

/**
 * The tag swaps of a claim that took the fair rows `claimed` of `turns`: each claimed row takes its
 * turn's tag (the tag consumed), and, per flow, the rows left behind that held a consumed tag take the
 * claimed rows' own tags, both in tag order. So a flow's set of pending tags after the claim is exactly
 * what it would have been had the claim taken the rows holding the consumed tags. Empty when every
 * turn kept its own row. id -> new tag.
 */
export const fairSwaps = (
  turns: ReadonlyArray<{ readonly job: Job; readonly slot: Job }>,
  claimed: ReadonlySet<string>
): Map<string, number> => {
  const out = new Map<string, number>()
  const taken = turns.filter((t) => claimed.has(t.job.id))
  const consumed = new Set(taken.map((t) => t.slot.id))
  const left = new Map<string, Array<Job>>()
  const incoming = new Map<string, Array<Job>>()
  for (const t of taken) {
    if (t.job.id !== t.slot.id) out.set(t.job.id, t.slot.fairTag!)
    const f = flowOfRow(t.slot)
    if (!claimed.has(t.slot.id)) left.set(f, [...(left.get(f) ?? []), t.slot])
    if (!consumed.has(t.job.id)) incoming.set(f, [...(incoming.get(f) ?? []), t.job])
  }
  for (const [f, rows] of left) {
    const from = incoming.get(f)!.sort(byTagThenId)
    rows.sort(byTagThenId).forEach((j, i) => out.set(j.id, from[i]!.fairTag!))
  }
  return out
}

/**
 * Merges the due candidates of one claim: the plain rows (by priority descending, ScheduleTime, id) and
 * the fair-share turns (see {@link fairTurns}: the first `limit` due fair rows by tag, each flow's turns
 * taken by its best rows by priority), the k-th turn merged at (its row's priority, the k-th smallest
 * ScheduleTime of the due fair rows). So plain rows keep (priority, ScheduleTime) order, and the fair
 * class competes with them by priority, then by the age of its oldest due rows: at equal priority a
 * plain row is claimed once it is older than every due fair row left (a fair row served early by its
 * tag leaves the class's older times in place, so while a deep fair backlog older than a plain row
 * drains at its flow's share, the plain row waits for it). Inside the fair class tag order decides which
 * turns a claim considers (each flow's share), each flow's priority which of its rows take its turns,
 * and priority orders the turns (and the class against the other rows); ties by turn order, so a flow's
 * claimed rows are its best ones and consume its smallest tags. `tags`: the new tags of the claim (see
 * {@link fairSwaps}). (The in-memory spelling of the PostgreSQL claim's merge.)
 */
export const fairMerge = (
  plain: ReadonlyArray<Job>,
  fair: ReadonlyArray<Job>,
  limit: number
): { readonly rows: Array<Job>; readonly tags: Map<string, number> } => {
  const turns = fairTurns(fair, limit)
  const times = fair.map((j) => j.scheduleTime.getTime()).sort((a, b) => a - b).slice(0, turns.length)
  const merged: Array<{ readonly job: Job; readonly at: number; readonly fair: boolean }> = [
    ...[...plain].sort(byClaim).slice(0, limit).map((job) => ({ job, at: job.scheduleTime.getTime(), fair: false })),
    ...turns.map((t, i) => ({ job: t.job, at: times[i]!, fair: true }))
  ]
  // ties: plain first (as the SQL's merge orders by (priority, merge time, branch, turn)); the sort is stable
  merged.sort((a, b) => b.job.priority - a.job.priority || a.at - b.at || Number(a.fair) - Number(b.fair))
  const rows = merged.slice(0, limit).map((m) => m.job)
  return { rows, tags: fairSwaps(turns, new Set(rows.filter((j) => j.fairTag !== undefined).map((j) => j.id))) }
}

/**
 * How many due plain rows past a claim's own limit its admission looks through (see {@link admit}): rows
 * of a full key or group at the head of the queue hide the rows behind them from a claim up to this depth.
 */
export const ADMISSION_DEPTH = 32

/**
 * The admin overrides in force at `now` (epoch millis), read at once: a key's slots, a group's cap;
 * undefined: none (see {@link JobStoreService.admissionOverrides}).
 *
 * @since 1.1.0
 */
export interface AdmissionOverrides {
  readonly key: (key: string, now: number) => number | undefined
  readonly group: (group: string, now: number) => number | undefined
}

/** What a row's concurrency policy (stamped, or carried at publish) says to the claim's admission. */
interface Admission {
  readonly key: string | undefined
  readonly mode: unknown
  readonly limit: number
  readonly group: string | undefined
  readonly groupLimit: number
  /** `requeue: false`: never claimed while its key is full. */
  readonly hold: boolean
}

const admissionOf = (job: Job): Admission => {
  const v = (job.metadata as any)?.policies?.concurrency?.value
  const key = typeof v?.key === "string" || typeof v?.key === "number" ? String(v.key) : undefined
  const group = typeof v?.total?.group === "string" || typeof v?.total?.group === "number" ? String(v.total.group) : undefined
  return {
    key,
    mode: v?.mode,
    limit: isLimit(v?.limit) ? v.limit : 1,
    group,
    groupLimit: isLimit(v?.total?.limit) ? v.total.limit : 1,
    hold: v?.requeue === false
  }
}

/**
 * The admission of a claim's plain rows (due, pending, not fair-share, not Fifo; `pending` in
 * claim order, {@link byClaim}: priority descending, then ScheduleTime) given the live holders (`live`: the rows Processing with an unexpired lease): the
 * rows the claim may take, in order — the in-memory spelling of the PostgreSQL claim's (see
 * `pg/fetch.ts`, `admissionCtes`). Among the first `limit` + {@link ADMISSION_DEPTH} rows, a Wait row is
 * key-admissible while its key's holders are fewer than its limit and no row of its key is ahead of it
 * (other modes always: they act on a full key); a row with a total cap that is not Skip / CancelNewest is
 * group-admissible while its group's holders are fewer than its cap and no key-admissible row of its
 * group is ahead of it. One claim takes at most one constrained row (a Wait row with a key, or a row
 * with a total cap that is not Skip / CancelNewest): a lane runs its rows one after another. The admissible rows; when there is none, the first group-admissible row of a full
 * key unless it is declared `requeue: false` (the gate requeues it: the spec's mechanism). A row of a
 * full group is never taken. A key's slots and a group's cap: the admin override in force (`overrides`),
 * else the row's own.
 */
export const admit = (
  pending: ReadonlyArray<Job>,
  live: ReadonlyArray<Job>,
  limit: number,
  overrides?: { readonly read: AdmissionOverrides; readonly now: number }
): Array<Job> => {
  const keyHolders = new Map<string, number>()
  const groupHolders = new Map<string, number>()
  for (const job of live) {
    const a = admissionOf(job)
    if (a.key !== undefined) keyHolders.set(a.key, (keyHolders.get(a.key) ?? 0) + 1)
    if (a.group !== undefined) groupHolders.set(a.group, (groupHolders.get(a.group) ?? 0) + 1)
  }
  const keyRank = new Map<string, number>()
  const groupRank = new Map<string, number>()
  const admitted: Array<Job> = []
  let fallback: Job | undefined
  let tookConstrained = false
  for (const job of pending.slice(0, limit + ADMISSION_DEPTH)) {
    const a = admissionOf(job)
    let keyOk = true
    if (a.key !== undefined) {
      const rank = (keyRank.get(a.key) ?? 0) + 1
      keyRank.set(a.key, rank)
      keyOk = a.mode !== "Wait" || (rank === 1 && (keyHolders.get(a.key) ?? 0) < (overrides?.read.key(a.key, overrides.now) ?? a.limit))
    }
    let groupOk = true
    if (a.group !== undefined) {
      const slot = `${keyOk}:${a.group}`
      const rank = (groupRank.get(slot) ?? 0) + 1
      groupRank.set(slot, rank)
      groupOk =
        a.mode === "Skip" || a.mode === "CancelNewest" ||
        ((!keyOk || rank === 1) && (groupHolders.get(a.group) ?? 0) < (overrides?.read.group(a.group, overrides.now) ?? a.groupLimit))
    }
    const constrained = (a.key !== undefined && a.mode === "Wait") || (a.group !== undefined && a.mode !== "Skip" && a.mode !== "CancelNewest")
    if (keyOk && groupOk) {
      // one constrained row per claim (a lane runs its rows one after another)
      if (!constrained || !tookConstrained) admitted.push(job)
      tookConstrained ||= constrained
    } else if (groupOk && !a.hold && fallback === undefined) fallback = job
  }
  return admitted.length > 0 || fallback === undefined ? admitted : [fallback]
}

/** Submission order: (createdAt, id). */
export const bySubmission = (a: Job, b: Job): number =>
  a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/** The counter keys an outcome increments: the global one and the one per job type. */
export const counterKeys = (counter: string, type: string): ReadonlyArray<string> => [counter, `${counter}:${type}`]
