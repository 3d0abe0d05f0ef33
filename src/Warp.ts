/**
 * The entry point: one Layer that composes warp for an Effect application.
 *
 * ```ts
 * const WarpLive = Warp.layer({ handlers: [sendInvoice], worker: { concurrency: 8 } }).pipe(
 *   Layer.provide(Database.layerFromEnv("DATABASE_URL"))
 * )
 * ```
 *
 * @since 0.2.0
 */
import * as internal from "./internal/warp/Warp.js"

/**
 * Options of {@link layer} and {@link layerMemory}: handlers, worker options (or `false` for a
 * publish-only process), global defaults, your own `SemaphoreProvider` Layer, the optional rate-limit
 * and circuit-breaker addons, and whether to migrate.
 *
 * @since 0.2.0
 * @category models
 */
export type WarpOptions<H extends ReadonlyArray<any>, E = never, R = never> = internal.WarpOptions<H, E, R>

/**
 * The services the entry Layer provides: `Publisher`, `Registry`, `JobStore`,
 * `ConcurrencyLimitManager`, `SemaphoreProvider` and `GlobalPolicies`.
 *
 * @since 0.2.0
 * @category models
 */
export type Services = internal.Services

/**
 * How building the entry Layer can fail: a `JobStore.StoreError` (core migration or store) or a
 * `ConcurrencyLimitManager.LimitStoreError` (the concurrency addon's migration).
 *
 * @since 0.2.0
 * @category errors
 */
export type BuildError = internal.BuildError

/**
 * Warp on PostgreSQL over the `SqlClient` in context: store, registry, publisher, worker with the
 * concurrency addon (PostgreSQL advisory locks unless you pass `semaphoreProvider`), admin limits,
 * global defaults and the scheduler of recurring jobs. Its type names everything it needs: the
 * `SqlClient`, your handlers' requirements and your provider Layer's.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = internal.layer

/**
 * Warp in memory, for one process (tests, demos): the same publisher, worker and addons over the
 * in-memory store, admin limits and semaphore provider.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerMemory = internal.layerMemory
