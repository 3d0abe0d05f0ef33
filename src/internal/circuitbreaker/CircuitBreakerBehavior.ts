/**
 * The circuit-breaker family's behavior. An attempt whose policy names a dependency group asks the
 * group's breaker first: open -> requeued to the end of the cool-down (handler not run); half-open ->
 * only the probe runs, the others are requeued shortly; closed -> the attempt runs and its result is
 * recorded. A handler failure counts even when the retry behavior inside turns it into a reschedule.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Ref from "effect/Ref"
import { Outcome } from "../job/Outcome.js"
import type { Behavior } from "../attempt/Pipeline.js"
import { FailureObserver } from "../policy/FailureObserver.js"
import type { CircuitBreakerPolicy } from "../policy/PolicyValues.js"
import { Admission, type AttemptResult, type CircuitBreakerStateService } from "./CircuitBreakerState.js"

/** The audit text of an attempt held back by an open breaker. */
export const openText = (group: string, until: Date): string =>
  `Circuit '${group}' open — requeued to the end of its cool-down at ${until.toISOString()}`

/** The audit text of an attempt held back while another attempt probes a half-open breaker. */
export const probingText = (group: string, retryAt: Date): string =>
  `Circuit '${group}' half-open — a probe is running; requeued to ${retryAt.toISOString()}`

/** Admission decisions, as an Effect metric tagged `result` (`Closed` / `Probe` / `Open` / `Probing`). */
export const admissionsTotal = Metric.counter("warp_circuit_breaker_admissions_total", { description: "Circuit-breaker admissions" })

const unavailableDelayMs = 1000

/** Builds the behavior on a breaker state service. */
export const make = (state: CircuitBreakerStateService): Behavior => ({
  name: "circuitBreaker",
  wrap: (attempt, next) => {
    const policy = attempt.policies.circuitBreaker
    if (policy === undefined) return next
    const jobId = attempt.job.id
    const record = (result: AttemptResult, probe: boolean) =>
      state.record(policy, jobId, result, probe).pipe(
        Effect.catch((e) => Effect.logWarning(`circuit breaker '${policy.group}': result of ${jobId} not recorded`, e))
      )
    const run = (probe: boolean) =>
      Effect.gen(function* () {
        const failed = yield* Ref.make(false)
        const outcome = yield* next.pipe(
          Effect.provideService(FailureObserver, { failed: () => Ref.set(failed, true) }),
          Effect.onInterrupt(() => (probe ? record("neutral", true) : Effect.void))
        )
        const result: AttemptResult =
          outcome._tag === "Succeeded" ? "success" : outcome._tag === "Failed" || (yield* Ref.get(failed)) ? "failure" : "neutral"
        yield* Effect.uninterruptible(record(result, probe))
        return outcome
      })
    return state.admit(policy, jobId).pipe(
      Effect.tap((a) => Metric.update(Metric.withAttributes(admissionsTotal, { result: a._tag }), 1)),
      Effect.matchEffect({
        onFailure: (e) => unavailable(policy, e._tag),
        onSuccess: Admission.$match({
          Closed: () => run(false),
          Probe: () => run(true),
          Open: ({ until }) => Effect.succeed(Outcome.Requeued({ reason: openText(policy.group, until), at: until })),
          Probing: ({ retryAt }) => Effect.succeed(Outcome.Requeued({ reason: probingText(policy.group, retryAt), at: retryAt }))
        })
      })
    )
  }
})

const unavailable = (policy: CircuitBreakerPolicy, tag: string) =>
  Effect.map(Clock.currentTimeMillis, (now) =>
    Outcome.Requeued({ reason: `Circuit breaker unavailable for '${policy.group}': ${tag}`, at: new Date(now + unavailableDelayMs) })
  )
