/**
 * The attempt's policy, as a scoped layer over its {@link JobContext}: the handler registered for the
 * row, the decoded payload, and every family's value — the row's stamp where it has one, else resolved
 * once through enqueue → handler → contract → global (globals read live from `GlobalPolicies` at each
 * resolution, never stamped). A row that cannot run (no handler, a payload or metadata that does not
 * decode, an invalid placement or computed limit) fails the layer with {@link Unrunnable}, whose reason
 * the worker writes as the attempt's failure.
 *
 * @since 0.3.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { Registry, type Registered } from "../job/Registry.js"
import { GlobalPolicies } from "../policy/GlobalPolicies.js"
import * as JobMetadata from "../policy/JobMetadata.js"
import * as Enforcement from "../policy/Enforcement.js"
import { type FamilyName, familyNames, type Policies } from "../policy/PolicyFamily.js"
import type { Attempt } from "./Attempt.js"
import { JobContext } from "./JobContext.js"
import * as PolicyResolution from "./PolicyResolution.js"

const allFamilies: ReadonlySet<FamilyName> = new Set(familyNames)

/** Why a claimed row cannot run; the attempt ends Failed with this reason. */
export class Unrunnable extends Data.TaggedError("Unrunnable")<{ readonly reason: string }> {}

/** The attempt's handler, payload and policy in force, and the metadata its finalizing write persists. */
export interface ResolvedPolicyValue {
  readonly registered: Registered
  readonly payload: unknown
  readonly policies: Policies
  /** The row's metadata after this resolution (its stamp, or the one this attempt writes). */
  readonly metadata: JobMetadata.JobMetadata
  /** The attempt as behaviors and handlers see it. */
  readonly attempt: Attempt
}

/** The running attempt's resolved policy. */
export class ResolvedPolicy extends Context.Service<ResolvedPolicy, ResolvedPolicyValue>()("warp/ResolvedPolicy") {}

/** Resolves the attempt's policy once (or reads the row's stamp). */
export const resolve = (
  context: JobContext["Service"],
  registry: Registry["Service"],
  globals: Policies,
  /** The families the worker enforces: a resolved policy of another family makes the row unrunnable. */
  enforced: ReadonlySet<FamilyName> = allFamilies
): Result.Result<ResolvedPolicyValue, Unrunnable> => {
  const { job, startedAt, workerId } = context
  const unrunnable = (reason: string) => Result.fail(new Unrunnable({ reason }))
  const registered = registry.lookup(job.type, job.handler)
  if (Option.isNone(registered)) {
    return unrunnable(
      `Unknown job type '${job.type}'${job.handler === null ? "" : ` (handler '${job.handler}')`}: no handler is registered for it in worker ${workerId}`
    )
  }
  const handler = registered.value.handler
  const placement = PolicyResolution.checkPlacement(handler)
  if (placement !== undefined) return unrunnable(placement)
  const contract = (handler as { contract: any }).contract
  const payload = Schema.decodeUnknownResult(contract.schema as Schema.Codec<unknown, unknown>)(job.payload)
  if (Result.isFailure(payload)) {
    return unrunnable(`Payload does not match the schema of '${job.type}': ${payload.failure.message}`)
  }
  const stored = JobMetadata.decode(job.metadata)
  if (Result.isFailure(stored)) return unrunnable(`Job metadata is invalid: ${stored.failure}`)
  const resolution = PolicyResolution.resolve({ stored: stored.success, handler, contract, globals, now: startedAt, payload: payload.success })
  if (resolution.failure !== undefined) return unrunnable(resolution.failure)
  const missing = Enforcement.unenforced(resolution.effective, enforced)
  if (missing.length > 0) return unrunnable(Enforcement.auditText(missing, workerId))
  return Result.succeed({
    registered: registered.value,
    payload: payload.success,
    policies: resolution.effective,
    metadata: resolution.metadata,
    attempt: { job, workerId, registered: registered.value, payload: payload.success, policies: resolution.effective }
  })
}

/**
 * The resolved policy as a layer: needs the attempt's context and the registry; the global defaults are
 * read from `GlobalPolicies` (a reference: none unless provided) at each resolution. `enforced`: the
 * families the worker enforces (a resolved policy of another family makes the row {@link Unrunnable});
 * every family by default.
 */
export const layer = (enforced: ReadonlySet<FamilyName> = allFamilies): Layer.Layer<ResolvedPolicy, Unrunnable, JobContext | Registry> =>
  Layer.effect(
    ResolvedPolicy,
    Effect.gen(function* () {
      const context = yield* JobContext
      const registry = yield* Registry
      const globals = yield* (yield* GlobalPolicies).current
      return yield* Effect.fromResult(resolve(context, registry, globals, enforced))
    })
  )
