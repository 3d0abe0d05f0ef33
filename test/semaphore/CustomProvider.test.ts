import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { SemaphoreProviderMemory } from "warp-effect"
import { SemaphoreProvider, type SemaphoreProviderService } from "warp-effect/provider"
import { ProviderContract } from "warp-effect/testing/vitest"

// Your own provider: here, one that counts "full" answers around the in-memory provider.
const counting = (inner: SemaphoreProviderService, full: { count: number }): SemaphoreProviderService => ({
  tryAcquire: (name, limit, timeout) =>
    inner.tryAcquire(name, limit, timeout).pipe(Effect.tap((slot) => Effect.sync(() => Option.isNone(slot) && full.count++)))
})

const CountingProvider = Layer.effect(
  SemaphoreProvider,
  Effect.map(SemaphoreProviderMemory.make, (inner) => counting(inner, { count: 0 }))
)

// Registers the contract's vitest tests; the factory is called once per test (a fresh provider each time).
ProviderContract.suite("counting provider", () => CountingProvider)
