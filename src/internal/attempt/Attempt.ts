/**
 * The context of one running attempt, available to pipeline behaviors.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type { Policies } from "../policy/PolicyFamily.js"
import type { Slot } from "../semaphore/SemaphoreProvider.js"
import type { Job } from "../job/Job.js"
import type { Outcome } from "../job/Outcome.js"
import type { SlotInfo } from "../job/Handler.js"
import type { Registered } from "../job/Registry.js"

export type { SlotInfo }

/** One attempt: the claimed row, its handler and the policy in force. */
export interface Attempt {
  readonly job: Job
  readonly workerId: string
  readonly registered: Registered
  readonly payload: unknown
  readonly policies: Policies
}

/** The current attempt, provided to behaviors and handlers. */
export class CurrentAttempt extends Context.Service<CurrentAttempt, Attempt>()("warp/CurrentAttempt") {}

/** The slot the running attempt holds (set by the concurrency gate around what it admits); none by default. */
export const CurrentSlot = Context.Reference<SlotInfo | undefined>("warp/CurrentSlot", {
  defaultValue: () => undefined
})

/**
 * The provider's slot the running attempt holds (set by the concurrency gate beside
 * {@link CurrentSlot}), so that the worker can hand its release to the finalizing write; none by default.
 */
export const HeldSlot = Context.Reference<Slot | undefined>("warp/HeldSlot", {
  defaultValue: () => undefined
})

/**
 * The end of the run inside the slots the attempt holds (set by the concurrency gate beside
 * {@link HeldSlot}): the worker hands it the outcome of the handler and of the behaviors around it,
 * right after they ended and before the finalizing write, and records the outcome it returns. The gate
 * marks that instant as the run's end (a slot lost after it was not lost while running: see
 * `Slot.heldThrough`) and returns the outcome, or, when one of its slots lapsed, the requeue naming it.
 * By default (no slot held) the outcome as it is.
 */
export const SlotEnd = Context.Reference<(outcome: Outcome) => Effect.Effect<Outcome>>("warp/SlotEnd", {
  defaultValue: () => Effect.succeed
})

/**
 * Runs `next` (a handler, with what runs inside a slot) in a fiber of its own until it ends or
 * `lost` completes (then the result is `onLost()`'s, even if the handler ended meanwhile: `onLost`
 * decides whether a loss after the handler's end keeps its outcome). Whatever ends this effect —
 * `lost`, or an interruption from outside — the handler's fiber is interrupted and awaited first, its
 * finalizers included, so a slot's scope never closes under a handler that is still running.
 *
 * Two fibers: the handler's, and a watcher of `lost` that interrupts it (`Effect.raceFirst` over a
 * join would fork two more racers per attempt, ~0.2 ms of CPU per keyed attempt in
 * `bench/profile-keyless.ts PROFILE_STORE=stub PROFILE_KEYS=300`).
 */
export const untilLost = <A, E, R, L = void>(next: Effect.Effect<A, E, R>, lost: Effect.Effect<L>, onLost: (lost: L) => Effect.Effect<A>): Effect.Effect<A, E, R> =>
  Effect.uninterruptibleMask((restore) =>
    // the handler's fiber starts as its caller runs (interruptible or not), like the caller's own code
    Effect.flatMap(Effect.forkChild(restore(next), { uninterruptible: "inherit" }), (handler) => {
      let lostWith: { readonly value: L } | undefined
      const watch = Effect.flatMap(lost, (value) => {
        lostWith ??= { value }
        return interruptFork(handler)
      })
      // the watcher is interruptible even when the caller is not: it is stopped once the handler ended
      return Effect.flatMap(Effect.forkChild(Effect.interruptible(watch)), (watcher) =>
        restore(Fiber.await(handler)).pipe(
          Effect.onInterrupt(() => Fiber.interrupt(handler)),
          Effect.ensuring(interruptFork(watcher)),
          Effect.flatMap((exit): Effect.Effect<A, E> => (lostWith !== undefined ? onLost(lostWith.value) : exit))
        )
      )
    })
  )

/**
 * Asks `fiber` to stop, without waiting for it to end (the interruptor named is the calling fiber, as
 * `Fiber.interrupt` names it).
 */
export const interruptFork = <A, E>(fiber: Fiber.Fiber<A, E>): Effect.Effect<void> =>
  Effect.withFiber((self) => {
    fiber.interruptUnsafe(self.id)
    return Effect.void
  })

/** The outcome of an attempt whose slot (`what`) lapsed while it ran (whatever its handler returned). */
export const lapsedText = (what: string): string =>
  `${what} lapsed while running (no renewal within the semaphore provider's deadline: the process was paused or cut off, and the slot may have been granted again); requeued`

/** The outcome of an attempt whose slot (`what`) was lost while its handler ran (the handler was interrupted). */
export const lostText = (what: string): string => `${what} lost while running (connection to the semaphore provider died); requeued`

/**
 * The outcome of an attempt whose slot (`what`) was found lost after its handler had ended, when its
 * provider cannot show that the slot stayed held until that end (it may have been granted again while
 * the handler ran): its result is not kept.
 */
export const lostAfterEndText = (what: string): string =>
  `${what} lost after its handler ended, before its result was written (connection to the semaphore provider died, and the provider cannot show the slot stayed held until the handler's end); requeued`
