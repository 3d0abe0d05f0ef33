/**
 * Process-wide defaults (the fourth rung). Read live on every attempt and never stamped: an absent
 * value on a row means "the global default applies".
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Declaration from "./Declaration.js"
import { families, type FamilyName, type Policies } from "./PolicyFamily.js"
import { InvalidPolicy } from "./InvalidPolicy.js"

/**
 * The global defaults in force: read at every resolution (never captured when a worker starts), so
 * {@link GlobalPoliciesService.set} takes effect at the next attempt of every worker sharing the
 * service. A `Context.Reference`: without a Layer of your own, there are no global defaults.
 */
export interface GlobalPoliciesService {
  /** The defaults now. */
  readonly current: Effect.Effect<Policies>
  /** Replaces the defaults (validated as {@link layer} does). */
  readonly set: (declarations: ReadonlyArray<Declaration.Declaration>) => Effect.Effect<void, InvalidPolicy>
}

const validate = (declarations: ReadonlyArray<Declaration.Declaration>): Result.Result<Policies, InvalidPolicy> => {
  for (const d of declarations) {
    if (!families[d.family as FamilyName].rungs.has("global")) {
      return Result.fail(new InvalidPolicy({ family: d.family, message: `'${d.family}' has no global default (a keyless policy is not a policy)` }))
    }
  }
  return Declaration.collect("global options", declarations)
}

/** A live service over a `SubscriptionRef` of the defaults (changes can be watched through `ref.changes`). */
export const fromRef = (ref: SubscriptionRef.SubscriptionRef<Policies>): GlobalPoliciesService => ({
  current: SubscriptionRef.get(ref),
  set: (declarations) => Effect.flatMap(Effect.fromResult(validate(declarations)), (policies) => SubscriptionRef.set(ref, policies))
})

const fixedEmpty: GlobalPoliciesService = {
  current: Effect.succeed({}),
  set: () => Effect.die(new Error("GlobalPolicies: provide GlobalPolicies.layer(...) to change the global defaults at run time"))
}

/** The global defaults reference (default: none). */
export const GlobalPolicies: Context.Reference<GlobalPoliciesService> = Context.Reference<GlobalPoliciesService>("warp/GlobalPolicies", {
  defaultValue: (): GlobalPoliciesService => fixedEmpty
})

/**
 * What a Layer of {@link GlobalPolicies} provides, as a type. In Effect 4 a `Context.Reference` has no
 * identifier of its own (`Context.Reference<S>` is a `Service<never, S>`): providing it adds `never` to
 * a Layer's output, and reading it requires nothing.
 */
export type GlobalPolicies = never

/**
 * Global defaults from declarations, e.g. `GlobalPolicies.layer([Retry(3)])`, changeable later with
 * `set`. Throws `InvalidPolicy` for a family without a global rung.
 */
export const layer = (declarations: ReadonlyArray<Declaration.Declaration>): Layer.Layer<GlobalPolicies> => {
  const initial = Result.getOrThrowWith(validate(declarations), (e) => e)
  return Layer.effect(GlobalPolicies, Effect.map(SubscriptionRef.make(initial), fromRef))
}

/** No global defaults (the same as providing nothing). */
export const none: Layer.Layer<GlobalPolicies> = Layer.succeed(GlobalPolicies, fixedEmpty)
