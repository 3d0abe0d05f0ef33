/**
 * Registration of the concurrency addon. A worker without it refuses handlers and contracts that
 * declare concurrency policy (`UnenforcedPolicy`) and fails jobs enqueued with one; the dashboard hides
 * its concurrency page.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as SqlClient from "effect/sql/SqlClient"
import { type Addon, order } from "../attempt/Pipeline.js"
import { SemaphoreProvider } from "../semaphore/SemaphoreProvider.js"
import { JobStore } from "../store/JobStore.js"
import * as ConcurrencyBehavior from "./ConcurrencyBehavior.js"
import { ConcurrencyLimitManager, layerMemory, layerPg, layerPgWithoutMigrations, type LimitStoreError } from "./ConcurrencyLimitManager.js"

/**
 * The addon: hand it to the worker (`addons: [Concurrency.addon]`); it needs a `SemaphoreProvider` and
 * a `ConcurrencyLimitManager` (from {@link layer} or {@link layerMemoryLimits}), and the worker's
 * `JobStore` (for `CancelRunning` keys).
 */
export const addon: Addon<SemaphoreProvider | ConcurrencyLimitManager | JobStore> = {
  name: "concurrency",
  enforces: ["concurrency"],
  order: order.concurrency,
  behavior: Effect.gen(function* () {
    const provider = yield* SemaphoreProvider
    const manager = yield* ConcurrencyLimitManager
    const store = yield* JobStore
    return ConcurrencyBehavior.make(provider, manager, store)
  })
}

/** The admin limits on PostgreSQL (runs the addon's migration, `warp_concurrency_limits`). */
export const layer: Layer.Layer<ConcurrencyLimitManager, LimitStoreError, SqlClient.SqlClient> = layerPg

/** The admin limits on PostgreSQL without running the addon's migration (run `Migrations.concurrency` yourself). */
export const layerWithoutMigrations: Layer.Layer<ConcurrencyLimitManager, never, SqlClient.SqlClient> = layerPgWithoutMigrations

/** Admin limits in memory (single process, tests). */
export const layerMemoryLimits: Layer.Layer<ConcurrencyLimitManager> = layerMemory
