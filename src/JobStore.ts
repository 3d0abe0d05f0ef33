/**
 * The job store seam: where jobs, their trails and counters live. Provide `JobStorePg.layer` or
 * `JobStoreMemory.layer`.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/store/JobStore.js"
import * as error from "./internal/store/StoreError.js"

/**
 * Which jobs `list` shows: id, concurrency-key prefix, type, state(s), creation window.
 *
 * @since 0.3.0
 * @category models
 */
export type JobFilter = internal.JobFilter

/**
 * An operator's write on jobs (`retry`, `delete`, `requeue`), as the dashboard's actions use it.
 *
 * @since 0.3.0
 * @category models
 */
export type OperatorAction = internal.OperatorAction

/**
 * What `operate` did: rows changed and ids skipped.
 *
 * @since 0.3.0
 * @category models
 */
export type OperateResult = internal.OperateResult

/**
 * A page of jobs.
 *
 * @since 0.1.0
 * @category models
 */
export type JobPage = internal.JobPage

/**
 * The store's operations.
 *
 * @since 0.1.0
 * @category models
 */
export type JobStoreService = internal.JobStoreService

/**
 * The job store service tag.
 *
 * @since 0.1.0
 * @category services
 */
export const JobStore = internal.JobStore

/**
 * The job store service tag.
 *
 * @since 0.1.0
 * @category services
 */
export type JobStore = internal.JobStore

/**
 * The job store could not be read or written (connection lost, constraint, ...).
 *
 * @since 0.1.0
 * @category errors
 */
export const StoreError = error.StoreError

/**
 * The job store could not be read or written.
 *
 * @since 0.1.0
 * @category errors
 */
export type StoreError = error.StoreError

/**
 * What `requestCancel` did: `Cancelled` (a waiting job, now Deleted), `Cancelling` (a running job, which
 * its worker interrupts), `Finished` (already ended) or `NotFound`.
 *
 * @since 0.3.0
 * @category models
 */
export type CancelResult = internal.CancelResult

/**
 * A cancel asked for a job a worker holds.
 *
 * @since 0.3.0
 * @category models
 */
export type CancelRequest = internal.CancelRequest

/**
 * A worker as the registry sees it (the workers page), with `connections`, the PostgreSQL connections of its
 * process (undefined when the store cannot tell).
 *
 * @since 0.3.0
 * @category models
 */
export type WorkerInfo = internal.WorkerInfo

/**
 * One finding of the slot-leak audit as the store keeps it (`recordSlotAudit`, `slotAuditFindings`):
 * a leaked slot or a stuck holder, its key, slot or job, what else is known in words, and when.
 *
 * @since 0.3.0
 * @category models
 */
export type SlotAuditFinding = internal.SlotAuditFinding

/**
 * The audit text of a cancelled job: `Cancelled — {cause}`, with ` (running attempt N interrupted)`
 * when its handler was running.
 *
 * @since 0.3.0
 * @category audit
 */
export const cancelText: (cause: string, running?: { readonly attempt: number }) => string = internal.cancelText

/**
 * The cause of an operator's cancel: "by an operator", with the reason when given.
 *
 * @since 0.3.0
 * @category audit
 */
export const operatorCause: (reason: string) => string = internal.operatorCause

/**
 * The cause of a `CancelRunning` replacement: "replaced by newer job {id} of '{key}'".
 *
 * @since 0.3.0
 * @category audit
 */
export const replacedCause: (key: string, newer: string) => string = internal.replacedCause
