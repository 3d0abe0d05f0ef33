/**
 * Process-wide defaults (the fourth rung). Read live on every attempt and never stamped: an absent
 * value on a row means "the global default applies".
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Declaration from "./Declaration.js"
import { families, type FamilyName, type Policies } from "./PolicyFamily.js"
import { InvalidPolicy } from "./InvalidPolicy.js"

/** The global defaults in force. Only families with a global rung may appear. */
export class GlobalPolicies extends Context.Tag("warp/GlobalPolicies")<GlobalPolicies, Policies>() {}

/** Global defaults from declarations, e.g. `GlobalPolicies.layer([Retry(3)])`. Throws `InvalidPolicy` for a family without a global rung. */
export const layer = (declarations: ReadonlyArray<Declaration.Declaration>): Layer.Layer<GlobalPolicies> => {
  for (const d of declarations) {
    if (!families[d.family as FamilyName].rungs.has("global")) {
      throw new InvalidPolicy({ family: d.family, message: `'${d.family}' has no global default (a keyless policy is not a policy)` })
    }
  }
  return Layer.succeed(GlobalPolicies, Either.getOrThrowWith(Declaration.collect("global options", declarations), (e) => e))
}

/** No global defaults. */
export const none: Layer.Layer<GlobalPolicies> = Layer.succeed(GlobalPolicies, {})
