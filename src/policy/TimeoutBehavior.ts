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
import type { Behavior } from "../job/Pipeline.js"

/** The timeout behavior. */
export const behavior: Behavior = {
  name: "timeout",
  wrap: (attempt, next) => {
    const policy = attempt.policies.timeout
    if (policy === undefined) return next
    return Effect.gen(function* () {
      let budget = policy.durationMs
      if (policy.scope === "Total") {
        const deadline = policy.deadline !== undefined ? Date.parse(policy.deadline) : attempt.job.createdAt.getTime() + policy.durationMs
        budget = deadline - (yield* Clock.currentTimeMillis)
        if (budget <= 0) {
          return Outcome.Failed({ error: `Timed out: Total deadline ${new Date(deadline).toISOString()} passed before this attempt ran` })
        }
      }
      return yield* Effect.scoped(next).pipe(
        Effect.timeoutTo({
          duration: Duration.millis(budget),
          onSuccess: (o: Outcome) => o,
          onTimeout: () => Outcome.Failed({ error: `Timed out after ${budget} ms (${policy.scope})` })
        })
      )
    })
  }
}
