import { SemaphoreProviderMemory } from "warp-effect"
import { ProviderContract } from "warp-effect/testing"

ProviderContract.suite("memory", () => SemaphoreProviderMemory.layer)
