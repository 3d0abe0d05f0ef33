/**
 * The slot-leak audit (opt-in, PostgreSQL provider): every `every`, compares the advisory slot locks
 * held in the database with the jobs in Processing and their leases, and reports leaked slots (a slot
 * lock held by an idle session with no Processing job of its key to account for it) and stuck holders
 * (Processing jobs whose lease expired while their key's slot lock is held) as gauges, log lines and a
 * report (`lastReport`), and records the findings in the job store for the dashboard.
 * `terminateStale: true` ends a leaked slot's session (`pg_terminate_backend`).
 *
 * @example
 * const audit = SlotAudit.layer({ every: "30 seconds", terminateStale: false })
 *
 * @since 0.3.0
 */
import * as internal from "./internal/concurrency/SlotAudit.js"

/**
 * An advisory slot lock held by a session with no Processing job of its key to account for it.
 *
 * @since 0.3.0
 * @category models
 */
export type LeakedSlot = internal.LeakedSlot

/**
 * A Processing job whose lease has expired while a slot lock of its key is still held.
 *
 * @since 0.3.0
 * @category models
 */
export type StuckHolder = internal.StuckHolder

/**
 * One audit run's findings.
 *
 * @since 0.3.0
 * @category models
 */
export type SlotAuditReport = internal.SlotAuditReport

/**
 * Options of {@link layer}: `every`, `terminateStale` (default false), `idleFor` (default 10 s),
 * `maxSlots` (default 64), `keys`.
 *
 * @since 0.3.0
 * @category models
 */
export type SlotAuditOptions = internal.SlotAuditOptions

/**
 * The audit service: `lastReport` (for a dashboard) and `runOnce`.
 *
 * @since 0.3.0
 * @category models
 */
export type SlotAuditService = internal.SlotAuditService

/**
 * The audit service tag.
 *
 * @since 0.3.0
 * @category services
 */
export const SlotAudit = internal.SlotAudit

/**
 * The audit service tag.
 *
 * @since 0.3.0
 * @category services
 */
export type SlotAudit = internal.SlotAudit

/**
 * An audit run's query failed.
 *
 * @since 0.3.0
 * @category errors
 */
export const SlotAuditError = internal.SlotAuditError

/**
 * An audit run's query failed.
 *
 * @since 0.3.0
 * @category errors
 */
export type SlotAuditError = internal.SlotAuditError

/**
 * Gauge `warp_slot_audit_leaked`: leaked slots found by the last run.
 *
 * @since 0.3.0
 * @category metrics
 */
export const leakedGauge = internal.leakedGauge

/**
 * Gauge `warp_slot_audit_stuck`: stuck holders found by the last run.
 *
 * @since 0.3.0
 * @category metrics
 */
export const stuckGauge = internal.stuckGauge

/**
 * Counter `warp_slot_audit_terminated_total`: sessions ended by the audit.
 *
 * @since 0.3.0
 * @category metrics
 */
export const terminatedTotal = internal.terminatedTotal

/**
 * The audit as a scoped Layer: runs at start, then every `every` (a failed run is logged; the
 * schedule goes on). Requires the `SqlClient` of the job store's database, the `Registry` (to know
 * the key of a Processing row whose policy is not stamped yet) and the `JobStore`: each run replaces
 * the findings the store keeps (`recordSlotAudit`), which the dashboard's concurrency, keys and
 * workers pages show as a warning.
 *
 * @since 0.3.0
 * @category layers
 */
export const layer = internal.layer
