/**
 * Lets an outer behavior learn that the handler failed even when an inner behavior turns the failure
 * into something else — the retry behavior reschedules a failed attempt (`Requeued`), yet a circuit
 * breaker outside it must still count the failure. The outer behavior provides an observer to `next`;
 * the inner one reports through {@link report}.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/** Observes handler failures of the current attempt. */
export interface FailureObserverService {
  readonly failed: (error: string) => Effect.Effect<void>
}

/** The observer provided by an outer behavior, if any. */
export class FailureObserver extends Context.Tag("warp/FailureObserver")<FailureObserver, FailureObserverService>() {}

/** Reports a handler failure to the observer in context; does nothing without one. */
export const report = (error: string): Effect.Effect<void> =>
  Effect.flatMap(
    Effect.serviceOption(FailureObserver),
    Option.match({ onNone: () => Effect.void, onSome: (o) => o.failed(error) })
  )
