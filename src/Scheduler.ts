/**
 * The recurring-job scheduler: fires the registry's `Recurring` entries once per tick across every
 * process (a second insert of the same firing conflicts).
 *
 * @since 0.1.0
 */
import * as internal from "./internal/publisher/Scheduler.js"

/**
 * Starts the scheduler in the current scope: one fiber per `Recurring` entry of the registry.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = internal.make

/**
 * The scheduler as a Layer: fires while the layer is alive. Run it beside (or without) workers.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer
