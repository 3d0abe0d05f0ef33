import * as Effect from "effect/Effect"
import { ConcurrencyBehavior, ConcurrencyPolicy, SemaphoreProvider } from "warp-effect"

// The gate's result is data, not an exception: match on it (or generate schedules and check the multiset).
export const tryPayment = Effect.scoped(
  Effect.gen(function* () {
    const provider = yield* SemaphoreProvider.SemaphoreProvider
    const policy = new ConcurrencyPolicy({ key: "payment-api", limit: 5, mode: "Wait" })
    const result = yield* ConcurrencyBehavior.gate(provider, policy, policy.limit)
    return ConcurrencyBehavior.GateResult.$match(result, {
      Acquired: ({ slot }) => `holding slot ${slot.index} until this scope closes`,
      Skipped: ({ key, limit }) => ConcurrencyBehavior.cancelledText(key, limit),
      Requeued: ({ key, limit }) => ConcurrencyBehavior.requeuedText(key, limit)
    })
  })
)
