/**
 * Concurrency control: the persisted policy and its typed enqueue-time accessor, the worker addon that
 * enforces `Mutex` and `Semaphore` declarations (`Worker.layer({ addons: [Concurrency.addon] })`) with
 * its admin limit Layers, the audit texts of a full key and the gate's metric. `Mutex` and
 * `Semaphore` themselves are exported flat by `warp-effect`.
 *
 * @since 0.1.0
 */
import * as addonInternal from "./internal/concurrency/ConcurrencyAddon.js"
import * as internal from "./internal/concurrency/Concurrency.js"
import * as behavior from "./internal/concurrency/ConcurrencyBehavior.js"

/**
 * Options of `Mutex` and `Semaphore`: the `mode` when the key is full, a `total` cap over a
 * group of keys, and (since 0.3.0) an opt-in fair-share `weight`.
 *
 * @since 0.1.0
 * @category models
 */
export type ConcurrencyOptions = internal.ConcurrencyOptions

/**
 * A concurrency limit computed from the job's decoded payload: `Semaphore("api", (p) => p.tier === "gold" ? 8 : 2)`.
 * It must return an integer >= 1; anything else (NaN, 0, 1.5, a throw) fails the job with a message
 * naming the key and the value. Not with mode `Fifo`.
 *
 * @since 0.3.0
 * @category models
 */
export type LimitFrom<P = any> = internal.LimitFrom<P>

/**
 * The draft edited by `configure(ConcurrencyMetadata, (m) => ...)` on `JobParameters.make()`.
 *
 * @since 0.1.0
 * @category models
 */
export type ConcurrencyDraft = internal.ConcurrencyDraft

/**
 * Typed accessor for the `concurrency` metadata slot, for `JobParameters.configure`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const ConcurrencyMetadata = internal.ConcurrencyMetadata

/**
 * What happens when a job is picked up while its key is full: `Skip`, `Wait` or `Fifo` (a schema).
 *
 * @since 0.1.0
 * @category models
 */
export const ConcurrencyMode = internal.ConcurrencyMode

/**
 * What happens when a job is picked up while its key is full.
 *
 * @since 0.1.0
 * @category models
 */
export type ConcurrencyMode = internal.ConcurrencyMode

/**
 * The `concurrency` metadata slot: at most `limit` jobs of `key` processing at once, in `mode`.
 *
 * @since 0.1.0
 * @category models
 */
export const ConcurrencyPolicy = internal.ConcurrencyPolicy

/**
 * The `concurrency` metadata slot.
 *
 * @since 0.1.0
 * @category models
 */
export type ConcurrencyPolicy = internal.ConcurrencyPolicy

/**
 * A total cap over a group of keys (`{ group, limit }`), declared with a key's policy (`total` option):
 * a job runs only when its key and its group both have room.
 *
 * @since 0.3.0
 * @category models
 */
export type TotalCap = internal.TotalCap

/**
 * The concurrency addon: hand it to the worker (`addons: [Concurrency.addon]`); it needs a
 * `SemaphoreProvider`, a `ConcurrencyLimitManager` and the `JobStore`.
 *
 * @since 0.2.0
 * @category addons
 */
export const addon = addonInternal.addon

/**
 * The admin limits on PostgreSQL (runs the addon's migration, `warp_concurrency_limits`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = addonInternal.layer

/**
 * The admin limits on PostgreSQL without running the addon's migration (run `Migrations.concurrency` yourself).
 *
 * @since 0.2.0
 * @category layers
 */
export const layerWithoutMigrations = addonInternal.layerWithoutMigrations

/**
 * Admin limits in memory (single process, tests).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemoryLimits = addonInternal.layerMemoryLimits

/**
 * The audit text of a Skip-mode cancellation: `Cancelled — '{key}' full ({limit} slots)`.
 *
 * @since 0.1.0
 * @category texts
 */
export const cancelledText = behavior.cancelledText

/**
 * The audit text of a Wait- or Fifo-mode requeue: `Requeued — '{key}' full ({limit} slots)`.
 *
 * @since 0.1.0
 * @category texts
 */
export const requeuedText = behavior.requeuedText

/**
 * Gate results, as an Effect metric tagged `result` and `key_family` (`warp_concurrency_gate_total`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const gateTotal = behavior.gateTotal
