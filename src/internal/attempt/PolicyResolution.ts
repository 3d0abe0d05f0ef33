/**
 * Resolution: the one chain every family shares — enqueue metadata -> handler -> contract -> global.
 * A stamped row is the authority: its entries are read and never re-resolved. Global defaults are
 * read live and never stamped.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import type { AnyContract } from "../job/Contract.js"
import type { AnyHandler } from "../job/Handler.js"
import * as ComputedLimit from "../policy/ComputedLimit.js"
import * as Declaration from "../policy/Declaration.js"
import * as JobMetadata from "../policy/JobMetadata.js"
import { families, familyNames, type Policies } from "../policy/PolicyFamily.js"
import { ConcurrencyPolicy } from "../policy/PolicyValues.js"

/** The result of resolving one attempt's policy. */
export interface Resolution {
  /** The values in force for this attempt (stamped or resolved winners, plus live globals). */
  readonly effective: Policies
  /** The metadata the finalizing write persists (stamped, unless policy-exempt). */
  readonly metadata: JobMetadata.JobMetadata
  /**
   * Why the attempt cannot run: a concurrency limit computed from the payload was not a valid limit
   * (the job is failed with this message; nothing is stamped).
   */
  readonly failure?: string | undefined
}

/** Why a handler placement cannot be honoured at run time (for handlers built around the typed API). */
export const checkPlacement = (handler: AnyHandler): string | undefined => {
  const raw = handler as unknown as { policy?: unknown; policies?: Record<string, unknown> }
  const declared = raw.policy !== undefined || (raw.policies !== undefined && Object.keys(raw.policies).length > 0)
  switch (handler._tag) {
    case "StreamHandler":
      return declared ? `Policy declared on stream handler '${handler.name}': stream handlers cannot honour policy` : undefined
    case "RequestHandler":
      return declared ? `Policy declared on request handler '${handler.name}': in-memory requests cannot honour policy` : undefined
    case "SagaHandler":
      return undefined
    case "JobHandler":
    case "MessageHandler": {
      const policies = handler.policies ?? {}
      const decls = Object.entries(policies).map(([family, value]) => ({ _tag: "PolicyDeclaration", family, value, placement: "anywhere" }))
      const checked = Declaration.collect(`handler '${handler.name}'`, decls as Array<Declaration.Declaration>)
      if (Result.isFailure(checked)) return `Invalid policy on handler '${handler.name}': ${checked.failure.message}`
      if (policies.timeout?.scope === "Total") {
        return `Timeout(scope: Total) declared on handler '${handler.name}': its deadline runs from enqueue, so it must be declared on the contract or passed at enqueue`
      }
      return undefined
    }
  }
}

/**
 * Resolves one attempt. `stored` is the row's decoded metadata; `now` becomes `stampedAt` when this
 * attempt is the one that stamps.
 */
export const resolve = (options: {
  readonly stored: JobMetadata.JobMetadata
  readonly handler: AnyHandler
  readonly contract: AnyContract
  readonly globals: Policies
  readonly now: Date
  /** The decoded payload, for a concurrency limit computed from it. */
  readonly payload?: unknown
}): Resolution => {
  const { contract, globals, handler, now, stored } = options
  if (handler._tag === "SagaHandler") return { effective: {}, metadata: stored }
  const handlerPolicies: Policies = handler._tag === "JobHandler" || handler._tag === "MessageHandler" ? handler.policies : {}
  let entries: JobMetadata.PolicyEntries
  if (stored.stampedAt !== undefined) {
    entries = stored.policies
  } else {
    const out: Record<string, { source: JobMetadata.Source; value: unknown }> = {}
    for (const name of familyNames) {
      const rungs = families[name].rungs
      const published = stored.policies[name]
      if (published !== undefined && published.source === "enqueue" && rungs.has("enqueue")) {
        out[name] = published
      } else if (handlerPolicies[name] !== undefined && rungs.has("handler")) {
        out[name] = { source: "handler", value: handlerPolicies[name] }
      } else if (published !== undefined && published.source === "contract" && rungs.has("contract")) {
        out[name] = published
      } else if (contract.policies[name] !== undefined && rungs.has("contract")) {
        out[name] = { source: "contract", value: contract.policies[name] }
      }
    }
    // a computed concurrency limit of the winning handler or contract: computed now, stamped as a number
    const conc = out.concurrency
    const limitFrom =
      conc === undefined ? undefined : conc.source === "handler" ? ComputedLimit.of(handlerPolicies) : conc.source === "contract" ? ComputedLimit.of(contract.policies) : undefined
    if (conc !== undefined && limitFrom !== undefined) {
      const value = conc.value as ConcurrencyPolicy
      const computed = ComputedLimit.compute(value, limitFrom, options.payload)
      if (Result.isFailure(computed)) return { effective: {}, metadata: stored, failure: computed.failure }
      out.concurrency = { source: conc.source, value: new ConcurrencyPolicy({ key: value.key, limit: computed.success, mode: value.mode }) }
    }
    entries = out as JobMetadata.PolicyEntries
  }
  // a stamped row's stamp is kept as it was decoded (the same document, not built again)
  const metadata = stored.stampedAt !== undefined ? stored : JobMetadata.fromEntries(entries, now.toISOString())
  const effective: Record<string, unknown> = { ...metadata.values }
  for (const name of familyNames) {
    if (effective[name] === undefined && families[name].rungs.has("global") && globals[name] !== undefined) {
      effective[name] = globals[name]
    }
  }
  return { effective: effective as Policies, metadata }
}
