import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { SlotAudit } from "warp-effect"

// Every 30 seconds: leaked slot locks and stuck holders, as gauges, log lines, a report and the store's findings (shown on the dashboard). Needs SqlClient, Registry and JobStore.
export const audit = SlotAudit.layer({ every: "30 seconds", terminateStale: false })

// The last report, e.g. for a health page.
export const leaks = Effect.flatMap(SlotAudit.SlotAudit, (a) => a.lastReport).pipe(
  Effect.map(Option.match({ onNone: () => 0, onSome: (r) => r.leaked.length + r.stuck.length }))
)
