/**
 * The attempt's concurrency slot, as a scoped layer: a scope of the attempt's own that the slots its
 * admitting behaviors take are held in (the concurrency gate asks its provider through
 * {@link acquiringInto}, which acquires into the scope {@link SlotScope} names). The slot is released
 * when that scope closes — by the attempt itself just before its finalizing write ({@link release}),
 * after the finalizing statement released it in the same statement when the store could (the provider's
 * release then only gives the connection back), or else by the layer's finalization: on a defect, a
 * timeout, an interruption or a lost connection alike.
 *
 * @since 0.3.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import type { SemaphoreProviderService } from "../semaphore/SemaphoreProvider.js"

/** One attempt's slot: the scope it is held in, and how it was released. */
export interface ConcurrencySlotState {
  /** Where the slots the attempt's admitting behaviors take are held; closing it releases them. */
  readonly scope: Scope.Closeable
  /** Whether the finalizing statement released the slot (then closing the scope only gives its connection back). */
  releasedByStatement: boolean
}

/** The running attempt's slot. */
export class ConcurrencySlot extends Context.Service<ConcurrencySlot, ConcurrencySlotState>()("warp/ConcurrencySlot") {}

/** The attempt's slot: a scope forked from the attempt's `scope`, closed with it if the attempt did not release it first. */
export const make = (scope: Scope.Scope): Effect.Effect<ConcurrencySlotState> =>
  Effect.map(Scope.fork(scope), (slotScope): ConcurrencySlotState => ({ scope: slotScope, releasedByStatement: false }))

/** The attempt's slot as a layer (a scope of its own, closed with the layer's). */
export const layer: Layer.Layer<ConcurrencySlot> = Layer.effect(ConcurrencySlot, Effect.flatMap(Effect.scope, make))

/** Releases the attempt's slot now (before its finalizing write); nothing if it holds none. */
export const release = (slot: ConcurrencySlotState): Effect.Effect<void> => Scope.close(slot.scope, Exit.void)

/**
 * The scope a provider seen through {@link acquiringInto} acquires into: set around the attempt's
 * admitting behaviors (and unset around what they admit), none by default.
 */
export const SlotScope = Context.Reference<Scope.Scope | undefined>("warp/SlotScope", { defaultValue: () => undefined })

/**
 * `provider`, acquiring into the running attempt's slot scope ({@link SlotScope}) when one is set, so a
 * slot taken by an admitting behavior belongs to the attempt's {@link ConcurrencySlot} rather than to
 * the behavior's own scope; elsewhere (no slot scope set) as `provider` itself.
 */
export const acquiringInto = (provider: SemaphoreProviderService): SemaphoreProviderService => ({
  tryAcquire: (name, limit, timeout) =>
    Effect.flatMap(SlotScope, (scope) =>
      scope === undefined ? provider.tryAcquire(name, limit, timeout) : Scope.provide(provider.tryAcquire(name, limit, timeout), scope)
    )
})
