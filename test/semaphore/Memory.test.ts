import * as SemaphoreProviderMemory from "../../src/semaphore/SemaphoreProviderMemory.js"
import * as ProviderContract from "../../src/testing/ProviderContract.js"

ProviderContract.suite("memory", () => SemaphoreProviderMemory.layer)
