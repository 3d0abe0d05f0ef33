import { SemaphoreProviderMemory } from "warp-effect"
import { ProviderContract } from "warp-effect/testing/vitest"

ProviderContract.suite("memory", () => SemaphoreProviderMemory.layer)
