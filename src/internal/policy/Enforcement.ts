/**
 * Which policy families a worker enforces, and the error when a declared policy has nothing to enforce
 * it. Retry and timeout are the worker's own behaviors; concurrency, rate limit and circuit breaker are
 * enforced only by their addons (`Addon.enforces`). A policy that no behavior enforces would be stamped
 * on the row and then ignored, so it is an error, never silence: a handler or contract that declares
 * one fails the worker's build ({@link UnenforcedPolicy}), and a job that carries one from its enqueue
 * (or a global default) ends Failed with {@link auditText}.
 *
 * @since 1.0.0
 */
import * as Data from "effect/Data"
import { familyNames, type FamilyName, type Policies } from "./PolicyFamily.js"

/** The families the worker enforces without an addon. */
export const core: ReadonlyArray<FamilyName> = ["retry", "timeout"]

/** What a user adds to enforce a family, per family (the worker's core families need nothing). */
const remedy: Record<FamilyName, string> = {
  concurrency: "Concurrency.addon (with Concurrency.layer and a SemaphoreProvider)",
  rateLimit: "RateLimitAddon.addon (with RateLimitAddon.layer), or Warp.layer({ rateLimit: true })",
  circuitBreaker: "CircuitBreakerAddon.addon (with CircuitBreakerAddon.layer), or Warp.layer({ circuitBreaker: true })",
  retry: "nothing (the worker enforces retry)",
  timeout: "nothing (the worker enforces timeout)"
}

/** How a family's policies are written, for messages. */
const spelled: Record<FamilyName, string> = {
  concurrency: "concurrency (Mutex / Semaphore)",
  rateLimit: "rate limit (RateLimit)",
  circuitBreaker: "circuit breaker (CircuitBreaker)",
  retry: "retry (Retry)",
  timeout: "timeout (Timeout)"
}

/** The families among `policies` that `enforced` does not cover, in the stable family order. */
export const unenforced = (policies: Policies, enforced: ReadonlySet<FamilyName>): ReadonlyArray<FamilyName> =>
  familyNames.filter((family) => policies[family] !== undefined && !enforced.has(family))

/**
 * A handler, contract or global default declares a policy family that the worker has no addon for. The
 * worker's Layer fails to build with it; `message` names the family, where it was declared and the fix.
 */
export class UnenforcedPolicy extends Data.TaggedError("UnenforcedPolicy")<{
  readonly family: FamilyName
  /** Where the policy is declared, e.g. `handler 'send' of contract 'SendEmail'`. */
  readonly site: string
  readonly message: string
}> {}

/** The error for `family` declared at `site`. */
export const unenforcedPolicy = (family: FamilyName, site: string): UnenforcedPolicy =>
  new UnenforcedPolicy({
    family,
    site,
    message: `${site} declares a ${spelled[family]} policy, but this worker has no addon that enforces it: add ${remedy[family]} to Worker.layer({ addons: [...] })`
  })

/** The audit text of a job whose resolved policy has a family this worker does not enforce (the job ends Failed). */
export const auditText = (families: ReadonlyArray<FamilyName>, workerId: string): string =>
  `Policy not enforced — worker ${workerId} has no addon for ${families.map((f) => spelled[f]).join(", ")}; the job was not run (add ${families
    .map((f) => remedy[f])
    .join("; ")})`
