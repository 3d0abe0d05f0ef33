import * as Schema from "effect/Schema"
import { Contract, Semaphore } from "warp-effect"

// The limit is computed from the payload once, by the attempt that stamps the policy, and stamped as a number.
export const Export = Contract.job("Export", Schema.Struct({ tenant: Schema.String, tier: Schema.Literals(["gold", "basic"]) }), {
  policy: [Semaphore("exports", (p: { readonly tier: "gold" | "basic" }) => (p.tier === "gold" ? 8 : 2))]
})
