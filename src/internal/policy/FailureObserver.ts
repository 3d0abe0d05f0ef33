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

/** Observes handler failures of the current attempt. */
export interface FailureObserverService {
  readonly failed: (error: string) => Effect.Effect<void>
}

/** The observer provided by an outer behavior; by default, one that ignores the report. */
export const FailureObserver: Context.Reference<FailureObserverService> = Context.Reference<FailureObserverService>("warp/FailureObserver", {
  defaultValue: (): FailureObserverService => ({ failed: () => Effect.void })
})

/** Reports a handler failure to the observer in context (by default nobody listens). */
export const report = (error: string): Effect.Effect<void> => FailureObserver.use((o) => o.failed(error))
