/**
 * `warp-effect/provider`: what writing a `SemaphoreProvider` of your own needs. A provider is a Layer
 * of the {@link SemaphoreProvider} service: named counting semaphores whose slots (`name:0` ..
 * `name:{limit-1}`, see {@link slotName}) are held by the caller's `Scope` and released when it
 * closes, on success, failure, defect, timeout or interruption. Hand it to
 * `Warp.layer({ semaphoreProvider })` or provide it under `Worker.layer`.
 *
 * Check it with the contract suite every built-in provider passes, `ProviderContract.suite(name,
 * () => layer)` of `warp-effect/testing/vitest` (needs `vitest` and `@effect/vitest`).
 *
 * @since 1.0.0
 * @module warp-effect/provider
 */
import * as internal from "./internal/semaphore/SemaphoreProvider.js"

/**
 * The semaphore provider service tag (the same tag as `SemaphoreProvider.SemaphoreProvider` of
 * `warp-effect`): `Layer.effect(SemaphoreProvider, make)` builds a provider.
 *
 * @since 1.0.0
 * @category services
 */
export const SemaphoreProvider = internal.SemaphoreProvider

/**
 * The semaphore provider service tag.
 *
 * @since 1.0.0
 * @category services
 */
export type SemaphoreProvider = internal.SemaphoreProvider

/**
 * The operation a provider implements: `tryAcquire(name, limit, timeout)`, one of `limit` slots of
 * `name` (waiting up to `timeout`; zero: one try), held in the caller's `Scope`, or `None` when all
 * are held.
 *
 * @since 1.0.0
 * @category models
 */
export type SemaphoreProviderService = internal.SemaphoreProviderService

/**
 * A held slot: the semaphore's name, the slot's index, a signal that fires if the slot is lost, and
 * (when the provider offers one) a fencing token.
 *
 * @since 1.0.0
 * @category models
 */
export type Slot = internal.Slot

/**
 * The provider could not be asked (connection lost, bad arguments).
 *
 * @since 1.0.0
 * @category errors
 */
export const SemaphoreError = internal.SemaphoreError

/**
 * The provider could not be asked (connection lost, bad arguments).
 *
 * @since 1.0.0
 * @category errors
 */
export type SemaphoreError = internal.SemaphoreError

/**
 * The name of slot `index` of semaphore `name` (`name:index`), as every provider names its slots: a
 * name with limit N uses slots `name:0` .. `name:{N-1}`, so `Mutex(k)` and `Semaphore(k, N)` share one
 * pool (the cap of a key is the largest limit in use, never the sum).
 *
 * @since 0.1.0
 * @category utils
 */
export const slotName = internal.slotName

/**
 * Fails with a `SemaphoreError` unless `limit` is an integer >= 1 (for a provider's `tryAcquire`).
 *
 * @since 0.1.0
 * @category utils
 */
export const validateLimit = internal.validateLimit
