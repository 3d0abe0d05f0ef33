/**
 * The semaphore provider seam: named counting semaphores whose slots are held by a scope. Provide
 * `SemaphoreProviderPg.layer`, `SemaphoreProviderMemory.layer`, the Redis provider of
 * `warp-effect/redis`, or your own (what writing one needs is in `warp-effect/provider`; check it with
 * `ProviderContract.suite` of `warp-effect/testing/vitest`).
 *
 * @since 0.1.0
 */
import * as internal from "./internal/semaphore/SemaphoreProvider.js"

/**
 * A held slot: the semaphore's name, the slot's index, and a signal that fires if the slot is lost.
 *
 * @since 0.1.0
 * @category models
 */
export type Slot = internal.Slot

/**
 * The provider could not be asked (connection lost, bad arguments).
 *
 * @since 0.1.0
 * @category errors
 */
export const SemaphoreError = internal.SemaphoreError

/**
 * The provider could not be asked (connection lost, bad arguments).
 *
 * @since 0.1.0
 * @category errors
 */
export type SemaphoreError = internal.SemaphoreError

/**
 * The provider's operations.
 *
 * @since 0.1.0
 * @category models
 */
export type SemaphoreProviderService = internal.SemaphoreProviderService

/**
 * The semaphore provider tag.
 *
 * @since 0.1.0
 * @category services
 */
export const SemaphoreProvider = internal.SemaphoreProvider

/**
 * The semaphore provider tag.
 *
 * @since 0.1.0
 * @category services
 */
export type SemaphoreProvider = internal.SemaphoreProvider
