/**
 * What the store's batched writes share (`./finalizeBatch.ts`, `./insertBatch.ts`): how one batch is
 * written and its callers settled.
 *
 * @since 0.3.0
 */
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { isOutage, type StoreError } from "../StoreError.js"

/** A caller waiting in a batch. */
export interface Waiting<A> {
  readonly done: Deferred.Deferred<A, StoreError>
}

/** What a waiting caller is answered with. */
type AnswerOf<P> = P extends Waiting<infer A> ? A : never

/**
 * Writes `batch`: alone through `one`, else as one statement `many`, whose result `settle` turns into each
 * caller's answer. A statement that could not reach the server fails every caller with that failure (each
 * retries its own, or gives up); one the server rejected is retried caller by caller through `one`, so one
 * bad item fails only its own caller.
 */
export const flushBatch = <P extends Waiting<any>, R>(
  batch: ReadonlyArray<P>,
  one: (p: P) => Effect.Effect<AnswerOf<P>, StoreError>,
  many: () => Effect.Effect<R, StoreError>,
  settle: (p: P, result: R) => AnswerOf<P>
): Effect.Effect<void> => {
  const alone = (p: P) => Effect.flatMap(Effect.exit(one(p)), (exit) => Deferred.done(p.done, exit))
  if (batch.length === 1) return Effect.asVoid(alone(batch[0]!))
  return Effect.exit(many()).pipe(
    Effect.flatMap((exit) =>
      Exit.isSuccess(exit)
        ? Effect.forEach(batch, (p) => Deferred.succeed(p.done, settle(p, exit.value)), { discard: true })
        : isOutage(Cause.squash(exit.cause))
          ? Effect.forEach(batch, (p) => Deferred.failCause(p.done, exit.cause), { discard: true })
          : Effect.forEach(batch, alone, { discard: true })
    )
  )
}
