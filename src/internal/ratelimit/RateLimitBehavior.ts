/**
 * The rate-limit family's behavior: a job whose policy names a key takes one start of that key's
 * current window before it runs. A full window requeues the job to the opening of the next one
 * (Outcome.Requeued with `at`), with an audit entry saying so. No policy: `next` runs at once and the
 * limiter is never asked.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import { Outcome } from "../job/Outcome.js"
import type { Behavior } from "../attempt/Pipeline.js"
import { Admission, type RateLimiterService } from "./RateLimiter.js"

/** The audit text of a rate-limited start. */
export const limitedText = (key: string, limit: number, windowMs: number, nextWindow: Date): string =>
  `Rate limited — '${key}' at ${limit} starts per ${Duration.format(Duration.millis(windowMs))}; requeued to the next window at ${nextWindow.toISOString()}`

/** Start decisions, as an Effect metric tagged `result` (`Admitted` / `Limited`). */
export const startsTotal = Metric.counter("warp_rate_limit_starts_total", { description: "Rate-limit start decisions" })

/** How long a job waits when the limiter cannot be asked. */
const unavailableDelayMs = 1000

/** Builds the behavior on a limiter. */
export const make = (limiter: RateLimiterService): Behavior => ({
  name: "rateLimit",
  wrap: (attempt, next) => {
    const policy = attempt.policies.rateLimit
    if (policy === undefined) return next
    return limiter.tryStart(policy).pipe(
      Effect.tap((a) => Metric.update(Metric.withAttributes(startsTotal, { result: a._tag }), 1)),
      Effect.matchEffect({
        onFailure: (e) =>
          Effect.map(Clock.currentTimeMillis, (now) =>
            Outcome.Requeued({ reason: `Rate limiter unavailable for '${policy.key}': ${e._tag}`, at: new Date(now + unavailableDelayMs) })
          ),
        onSuccess: Admission.$match({
          Admitted: () => next,
          Limited: ({ key, limit, nextWindow }) =>
            Effect.succeed(Outcome.Requeued({ reason: limitedText(key, limit, policy.windowMs, nextWindow), at: nextWindow }))
        })
      })
    )
  }
})
