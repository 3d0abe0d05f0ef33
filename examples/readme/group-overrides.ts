import * as Effect from "effect/Effect"
import { ConcurrencyLimitManager } from "warp-effect"

// A total cap's override: every key of group "export-api" together gets 4 slots for the next hour,
// whatever `total: { group: "export-api", limit }` its jobs declare; then the declared cap again.
export const squeezeExports = Effect.flatMap(ConcurrencyLimitManager.ConcurrencyLimitManager, (limits) =>
  limits.addOrUpdateGroupLimit("export-api", 4, { expiresIn: "1 hour" })
)

export const releaseExports = Effect.flatMap(ConcurrencyLimitManager.ConcurrencyLimitManager, (limits) => limits.removeGroupLimit("export-api"))
