/**
 * The timeout family's behavior. `PerAttempt` interrupts the handler after its duration (so every
 * resource it holds, including a concurrency slot, is released by scope finalization); `Total`
 * bounds the run by the deadline stamped at publish and fails a job whose deadline has passed
 * without running it.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { Outcome } from "../job/Outcome.js"
import type { Job } from "../job/Job.js"
import type { Behavior } from "../attempt/Pipeline.js"
import type { TimeoutPolicy } from "../policy/PolicyValues.js"

/**
 * The wall-clock deadline (epoch ms) of a `Total` timeout: the one stamped at publish, or — for a row
 * inserted without the publisher, e.g. a recurring firing — the row's creation plus the duration.
 * Undefined for a `PerAttempt` timeout.
 */
export const totalDeadline = (policy: TimeoutPolicy, job: Job): number | undefined =>
  policy.scope !== "Total" ? undefined : policy.deadline !== undefined ? Date.parse(policy.deadline) : job.createdAt.getTime() + policy.durationMs

/** The timeout behavior. */
export const behavior: Behavior = {
  name: "timeout",
  wrap: (attempt, next) => {
    const policy = attempt.policies.timeout
    if (policy === undefined) return next
    return Effect.gen(function* () {
      let budget = policy.durationMs
      const deadline = totalDeadline(policy, attempt.job)
      if (deadline !== undefined) {
        budget = deadline - (yield* Clock.currentTimeMillis)
        if (budget <= 0) {
          return Outcome.Failed({ error: `Timed out: Total deadline ${new Date(deadline).toISOString()} passed before this attempt ran` })
        }
      }
      return yield* Effect.scoped(next).pipe(
        Effect.timeoutOrElse({
          duration: Duration.millis(budget),
          orElse: () =>
            Effect.succeed(
              Outcome.Failed({
                error:
                  deadline === undefined
                    ? `Timed out after ${budget} ms (PerAttempt)`
                    : `Timed out: Total deadline ${new Date(deadline).toISOString()} reached ${budget} ms into this attempt`
              })
            )
        })
      )
    })
  }
}
