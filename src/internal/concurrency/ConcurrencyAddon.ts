/**
 * Registration of the concurrency addon. Without it, the runtime ignores declared concurrency
 * policy (it is still stamped, like any family) and the dashboard hides its page.
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ConcurrencyAddon } from "../job/Pipeline.js"
import { SemaphoreProvider } from "../semaphore/SemaphoreProvider.js"
import * as ConcurrencyBehavior from "./ConcurrencyBehavior.js"
import { ConcurrencyLimitManager, layerMemory, layerPg, type LimitStoreError } from "./ConcurrencyLimitManager.js"

/** The addon's behavior, on the provider and limit manager in context. */
export const layerBehavior: Layer.Layer<ConcurrencyAddon, never, SemaphoreProvider | ConcurrencyLimitManager> = Layer.effect(
  ConcurrencyAddon,
  Effect.gen(function* () {
    const provider = yield* SemaphoreProvider
    const manager = yield* ConcurrencyLimitManager
    return { behavior: ConcurrencyBehavior.make(provider, manager) }
  })
)

/**
 * The addon on PostgreSQL: the behavior plus the admin limit manager (and its migration).
 * Provide your `SemaphoreProvider` (e.g. `SemaphoreProviderPg.layer()`).
 */
export const layer: Layer.Layer<ConcurrencyAddon | ConcurrencyLimitManager, LimitStoreError, SemaphoreProvider | SqlClient.SqlClient> =
  Layer.provideMerge(layerBehavior, layerPg)

/** The addon with in-memory admin overrides (single process, tests). */
export const layerMemoryLimits: Layer.Layer<ConcurrencyAddon | ConcurrencyLimitManager, never, SemaphoreProvider> = Layer.provideMerge(
  layerBehavior,
  layerMemory
)
