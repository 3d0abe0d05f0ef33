import * as Effect from "effect/Effect"
import { ConcurrencyLimitManager } from "warp-effect"

// Admin overrides: sticky rows in warp_concurrency_limits; precedence admin row > declared > 1.
export const scaleUp = (key: string, slots: number) =>
  Effect.flatMap(ConcurrencyLimitManager.ConcurrencyLimitManager, (limits) => limits.addOrUpdateLimit(key, slots))

export const scaleDown = (key: string) =>
  Effect.flatMap(ConcurrencyLimitManager.ConcurrencyLimitManager, (limits) => limits.removeLimit(key))
