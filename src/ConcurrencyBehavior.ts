/**
 * The concurrency gate as data: ask a `SemaphoreProvider` for a slot and match on the result.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/concurrency/ConcurrencyBehavior.js"

/**
 * The result of asking the gate for a slot: `Acquired`, `Skipped` or `Requeued`.
 *
 * @since 0.1.0
 * @category models
 */
export type GateResult = internal.GateResult

/**
 * Constructors and matchers of {@link GateResult}.
 *
 * @since 0.1.0
 * @category models
 */
export const GateResult = internal.GateResult

/**
 * Asks for a slot of `policy.key` at `limit`; the slot is held until the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const gate = internal.gate

/**
 * The audit text of a Skip-mode cancellation.
 *
 * @since 0.1.0
 * @category texts
 */
export const cancelledText = internal.cancelledText

/**
 * The audit text of a Wait- or Fifo-mode requeue.
 *
 * @since 0.1.0
 * @category texts
 */
export const requeuedText = internal.requeuedText

/**
 * Gate results, as an Effect metric tagged `result` and `key_family` (`warp_concurrency_gate_total`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const gateTotal = internal.gateTotal
