import * as SemaphoreProviderMemory from "../../src/internal/semaphore/SemaphoreProviderMemory.js"
import * as ProviderContract from "../../src/internal/testing/ProviderContract.js"

ProviderContract.suite("memory", () => SemaphoreProviderMemory.layer)
