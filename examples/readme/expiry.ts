import * as Effect from "effect/Effect"
import { ConcurrencyLimitManager } from "warp-effect"

// Throttle a noisy key for the length of an incident: 2 slots for 30 minutes, then the declared limit again.
export const throttle = (key: string) =>
  Effect.flatMap(ConcurrencyLimitManager.ConcurrencyLimitManager, (limits) => limits.addOrUpdateLimit(key, 2, { expiresIn: "30 minutes" }))

// Or until an instant.
export const throttleUntil = (key: string, until: Date) =>
  Effect.flatMap(ConcurrencyLimitManager.ConcurrencyLimitManager, (limits) => limits.addOrUpdateLimit(key, 2, { expiresAt: until }))
