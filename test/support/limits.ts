import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConcurrencyLimitManager from "../../src/internal/concurrency/ConcurrencyLimitManager.js"

const { ConcurrencyLimitManager: Limits } = ConcurrencyLimitManager

/** Wraps the manager in context, counting `get` calls per key. */
export const counting = <E, R>(inner: Layer.Layer<ConcurrencyLimitManager.ConcurrencyLimitManager, E, R>, calls: Map<string, number>) =>
  Layer.effect(
    Limits,
    Effect.map(Limits, (m): ConcurrencyLimitManager.ConcurrencyLimitManagerService => ({
      ...m,
      get: (key) => Effect.andThen(Effect.sync(() => calls.set(key, (calls.get(key) ?? 0) + 1)), m.get(key))
    }))
  ).pipe(Layer.provide(inner))
