/**
 * The context of one running attempt, available to pipeline behaviors.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type { Policies } from "../policy/PolicyFamily.js"
import type { Slot } from "../semaphore/SemaphoreProvider.js"
import type { Job } from "./Job.js"
import type { Registered } from "./Registry.js"

/** One attempt: the claimed row, its handler and the policy in force. */
export interface Attempt {
  readonly job: Job
  readonly workerId: string
  readonly registered: Registered
  readonly payload: unknown
  readonly policies: Policies
}

/** The current attempt, provided to behaviors and handlers. */
export class CurrentAttempt extends Context.Tag("warp/CurrentAttempt")<CurrentAttempt, Attempt>() {}

/** The concurrency slot an attempt holds: its key, its index and the provider's fencing token. */
export interface SlotInfo {
  readonly key: string
  readonly index: number
  readonly fence?: bigint | undefined
}

/** The slot the running attempt holds (set by the concurrency gate around what it admits); none by default. */
export class CurrentSlot extends Context.Reference<CurrentSlot>()("warp/CurrentSlot", {
  defaultValue: (): SlotInfo | undefined => undefined
}) {}

/**
 * The provider's slot the running attempt holds (set by the concurrency gate beside
 * {@link CurrentSlot}), so that the worker can hand its release to the finalizing write; none by default.
 */
export class HeldSlot extends Context.Reference<HeldSlot>()("warp/HeldSlot", {
  defaultValue: (): Slot | undefined => undefined
}) {}
