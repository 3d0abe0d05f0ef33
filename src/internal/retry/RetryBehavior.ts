/**
 * The retry family's behavior: a failed attempt is rescheduled with exponential backoff (an Effect
 * `Schedule`) until the attempt limit, then stays Failed. A rescheduled failure is still reported to
 * the `FailureObserver` of an outer behavior (the circuit breaker counts it). A failure is not retried
 * when the next attempt would start after the job's `Total` timeout deadline.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { Outcome } from "../job/Outcome.js"
import type { Behavior } from "../attempt/Pipeline.js"
import * as FailureObserver from "../policy/FailureObserver.js"
import type { RetryPolicy } from "../policy/PolicyValues.js"
import { totalDeadline } from "../timeout/TimeoutBehavior.js"

/**
 * The delay before attempt `attempt + 1` after attempt `attempt` (1-based) failed: the schedule's
 * delay at its `attempt`-th recurrence.
 */
export const delayAfter = (policy: RetryPolicy, attempt: number): Effect.Effect<Duration.Duration> =>
  Effect.flatMap(Schedule.toStep(Schedule.exponential(Duration.millis(policy.initialDelayMs), policy.factor)), (step) => {
    const recurrences = Math.max(1, attempt)
    // (an exponential schedule recurs forever: it is never done)
    const at = (n: number): Effect.Effect<Duration.Duration> =>
      Effect.flatMap(Effect.orDie(step(0, n)), ([delay]) => (n >= recurrences ? Effect.succeed(delay) : at(n + 1)))
    return Effect.map(at(1), (delay) => Duration.min(delay, Duration.millis(policy.maxDelayMs)))
  })

/** The retry behavior. */
export const behavior: Behavior = {
  name: "retry",
  wrap: (attempt, next) =>
    Effect.flatMap(next, (outcome) => {
      const policy = attempt.policies.retry
      if (outcome._tag !== "Failed" || policy === undefined || attempt.job.attempt >= policy.maxAttempts) return Effect.succeed(outcome)
      return Effect.gen(function* () {
        yield* FailureObserver.report(outcome.error)
        const delay = yield* delayAfter(policy, attempt.job.attempt)
        const now = yield* Clock.currentTimeMillis
        const timeout = attempt.policies.timeout
        const deadline = timeout === undefined ? undefined : totalDeadline(timeout, attempt.job)
        if (deadline !== undefined && now + Duration.toMillis(delay) >= deadline) {
          return Outcome.Failed({ error: `${outcome.error}\nNot retried: the next attempt would start after the Total deadline ${new Date(deadline).toISOString()}` })
        }
        return Outcome.Requeued({
          reason: `Retry ${attempt.job.attempt + 1}/${policy.maxAttempts} in ${Duration.format(delay)} after: ${outcome.error.split("\n")[0]}`,
          at: new Date(now + Duration.toMillis(delay))
        })
      })
    })
}
