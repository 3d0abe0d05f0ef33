/**
 * The concurrency gate and its pipeline behavior.
 *
 * No key: `next` runs immediately — neither the provider nor the limit manager is touched. Key: the
 * effective limit (admin row > declared > 1) is resolved, and one slot of
 * `warp:concurrency:{key}` is asked for with a zero timeout. The gate's result is data:
 * `Acquired` (the slot is held in the attempt's scope until it closes), `Skipped` or `Requeued`.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import { CurrentSlot, HeldSlot, lapsedText, lostAfterEndText, lostText, SlotEnd, untilLost } from "../attempt/Attempt.js"
import type { Job } from "../job/Job.js"
import { Outcome } from "../job/Outcome.js"
import * as Telemetry from "../observability/Telemetry.js"
import type { Behavior } from "../attempt/Pipeline.js"
import type { ConcurrencyMode, ConcurrencyPolicy } from "../policy/PolicyValues.js"
import type { SemaphoreError, SemaphoreProviderService, Slot } from "../semaphore/SemaphoreProvider.js"
import type { ConcurrencyLimitManagerService, LimitStoreError } from "./ConcurrencyLimitManager.js"
import * as ConcurrencyLimitResolver from "./ConcurrencyLimitResolver.js"
import type { JobStoreService } from "../store/JobStore.js"
import type { StoreError } from "../store/StoreError.js"

/** The lock-name prefix of concurrency keys. */
export const LOCK_PREFIX = "warp:concurrency:"

/** The lock-name prefix of total caps over groups of keys. */
export const TOTAL_PREFIX = "warp:concurrency-total:"

/** The result of asking the gate for a slot. */
export type GateResult = Data.TaggedEnum<{
  /** A slot is held until the surrounding scope closes. */
  Acquired: { readonly key: string; readonly limit: number; readonly slot: Slot }
  /** Full, mode Skip: the job is dropped (Deleted). */
  Skipped: { readonly key: string; readonly limit: number }
  /** Full, mode Wait or Fifo: the job is requeued (Enqueued, ScheduleTime = now). */
  Requeued: { readonly key: string; readonly limit: number }
}>

/** Constructors and matchers of {@link GateResult}. */
export const GateResult = Data.taggedEnum<GateResult>()

/** The audit text of a Skip-mode cancellation. */
export const cancelledText = (key: string, limit: number) => `Cancelled — '${key}' full (${limit} slots)`
/** The audit text of a Wait- or Fifo-mode requeue. */
export const requeuedText = (key: string, limit: number) => `Requeued — '${key}' full (${limit} slots)`
/** The audit text of a Skip-mode cancellation by a full group (total cap). */
export const groupCancelledText = (group: string, limit: number) => `Cancelled — group '${group}' full (${limit} slots)`
/** The audit text of a requeue by a full group (total cap). */
export const groupRequeuedText = (group: string, limit: number) => `Requeued — group '${group}' full (${limit} slots)`

/** The audit text of a CancelRunning-mode requeue. */
export const replacingText = (key: string, limit: number, cancelling: ReadonlyArray<string>) =>
  cancelling.length === 0
    ? requeuedText(key, limit)
    : `${requeuedText(key, limit)}; cancelling older running ${cancelling.length === 1 ? "job" : "jobs"} ${cancelling.join(", ")}`

/**
 * What the gate needs of the job store for `CancelRunning` keys: marking a holder, and asking older
 * holders to stop (see `JobStoreService.markHolder`, `cancelHolders`).
 */
export type Holders = Pick<JobStoreService, "markHolder" | "cancelHolders">

const gateOptions = { description: "Concurrency gate results" }

/** Gate results, as an Effect metric with the attributes `result` and `key_family` (the key up to its first ':'). */
export const gateTotal: Metric.Counter<number> = Metric.counter("warp_concurrency_gate_total", gateOptions)

/** {@link gateTotal}'s series of one result and key family, resolved once (see `Telemetry.series`). */
const gateTotalOf: (result: string, family: string) => Metric.Counter<number> = Telemetry.series(
  (attributes) => Metric.counter("warp_concurrency_gate_total", { ...gateOptions, attributes }),
  ["result", "key_family"]
)

/** Attempts whose slot lapsed while they ran (checked before the finalizing write). */
export const lapsedTotal = Metric.counter("warp_concurrency_slot_lapsed_total", {
  description: "Attempts whose slot lapsed while they ran (their process paused or cut off past the provider's deadline)"
})

/** The metric family of a key: its text up to the first ':' (bounded cardinality). */
export const keyFamily = Telemetry.keyFamily

/** Whether a job that finds its key (or its group) full is dropped: mode Skip, or its other name CancelNewest. */
const dropsNewcomer = (mode: ConcurrencyMode): boolean => mode === "Skip" || mode === "CancelNewest"

/**
 * Asks for a slot of `policy.key` at `limit`. Full: `Skipped` in mode Skip (or its other name,
 * CancelNewest), else `Requeued` (Wait, Fifo; CancelRunning, whose behavior then asks older holders to stop).
 */
export const gate = (
  provider: SemaphoreProviderService,
  policy: ConcurrencyPolicy,
  limit: number
): Effect.Effect<GateResult, SemaphoreError, Scope.Scope> =>
  Effect.map(provider.tryAcquire(LOCK_PREFIX + policy.key, limit, 0), (slot) =>
    Option.isSome(slot)
      ? GateResult.Acquired({ key: policy.key, limit, slot: slot.value })
      : dropsNewcomer(policy.mode)
        ? GateResult.Skipped({ key: policy.key, limit })
        : GateResult.Requeued({ key: policy.key, limit })
  ).pipe(Effect.tap((r) => Metric.update(gateTotalOf(r._tag, keyFamily(policy.key)), 1)))

/**
 * The end of a run under the slots `held` (see `SlotEnd`): marks it on every slot that can tell
 * (`Slot.heldThrough`) and takes their verdicts now; then, for every slot not shown held up to now,
 * the lapse check — the requeue naming the first slot whose `lapsed` is true (counted in
 * `warp_concurrency_slot_lapsed_total`); else the requeue naming the first slot already lost without
 * a showing (verdict false: the loss may predate the end); else `outcome`. The end is kept for a loss
 * noticed afterwards (see {@link afterLoss}).
 */
interface RunEnd {
  readonly outcome: Outcome
  /** Whether `outcome` is a requeue decided at the end (a slot lapsed, or lost without a showing). */
  readonly settled: boolean
  /** Per held slot, its verdict on the end (`Slot.heldThrough`), or undefined when it cannot tell. */
  readonly verdicts: ReadonlyArray<Effect.Effect<boolean | undefined> | undefined>
}
const endOf = (held: ReadonlyArray<readonly [Slot, string]>, key: string, outcome: Outcome): Effect.Effect<RunEnd> =>
  Effect.gen(function* () {
    const verdicts: Array<Effect.Effect<boolean | undefined> | undefined> = []
    for (const [slot] of held) verdicts.push(slot.heldThrough === undefined ? undefined : yield* slot.heldThrough)
    const now: Array<boolean | undefined> = []
    for (const v of verdicts) now.push(v === undefined ? undefined : yield* v)
    for (let i = 0; i < held.length; i++) {
      const [slot, what] = held[i]!
      if (now[i] === true) continue
      if (slot.lapsed !== undefined && (yield* slot.lapsed)) {
        yield* Metric.update(Metric.withAttributes(lapsedTotal, { key_family: keyFamily(key) }), 1)
        return { outcome: Outcome.Requeued({ reason: lapsedText(what), keepsPlace: true }), settled: true, verdicts }
      }
    }
    const lost = held.findIndex((_, i) => now[i] === false)
    if (lost >= 0) return { outcome: Outcome.Requeued({ reason: lostAfterEndText(held[lost]![1]), keepsPlace: true }), settled: true, verdicts }
    return { outcome, settled: false, verdicts }
  })

/**
 * The outcome of a run whose slot (`what`) was found lost: before the run's end (`end` undefined), the
 * handler was interrupted — lost while running; after it, the end's outcome stands if every held slot
 * shows it stayed held up to the end, or if it is already a requeue decided at the end (a lapse says
 * more); else (the loss may predate the end) the run is requeued.
 */
const afterLoss = (end: RunEnd | undefined, what: string): Effect.Effect<Outcome> =>
  end === undefined
    ? Effect.succeed(Outcome.Requeued({ reason: lostText(what), keepsPlace: true }))
    : Effect.map(Effect.forEach(end.verdicts, (v) => v ?? Effect.succeed(false)), (held) =>
        held.every((v) => v === true) || end.settled ? end.outcome : Outcome.Requeued({ reason: lostAfterEndText(what), keepsPlace: true })
      )

/**
 * The admission's span (`warp.admission`: key, limit, slot, result, wait) and the slot-wait metric
 * (seconds from the job's due time to an acquired slot).
 */
const admission = <E, R>(job: Job, policy: ConcurrencyPolicy, limit: number, self: Effect.Effect<GateResult, E, R>) =>
  self.pipe(
    Effect.tap((result) =>
      Effect.gen(function* () {
        const waitMs = Math.max(0, (yield* Clock.currentTimeMillis) - job.scheduleTime.getTime())
        yield* Effect.annotateCurrentSpan({
          [Telemetry.attributes.admission]: result._tag,
          [Telemetry.attributes.waitMs]: waitMs,
          ...(result._tag === "Acquired" ? { [Telemetry.attributes.slot]: result.slot.index } : {}),
          ...(result._tag === "Acquired" && result.slot.fence !== undefined ? { [Telemetry.attributes.fence]: result.slot.fence.toString() } : {})
        })
        if (result._tag === "Acquired") {
          yield* Metric.update(Telemetry.slotWaitOf(keyFamily(policy.key)), waitMs / 1000)
        }
      })
    ),
    Effect.withSpan(
      Telemetry.spans.admission,
      { attributes: { [Telemetry.attributes.jobId]: job.id, [Telemetry.attributes.key]: policy.key, [Telemetry.attributes.limit]: limit } },
      { captureStackTrace: false }
    )
  )

/** The key's limit for this attempt: the admin override as the claim read it, when it read this key's; else asked now. */
const limitOf = (manager: ConcurrencyLimitManagerService, job: Job, policy: ConcurrencyPolicy): Effect.Effect<number, LimitStoreError> => {
  const claimed = manager.readAtClaim === true ? job.adminLimit : undefined
  return claimed !== undefined && claimed.key === policy.key
    ? Effect.succeed(claimed.slots ?? policy.limit ?? 1)
    : Effect.flatMap(ConcurrencyLimitResolver.make(manager), (resolver) => resolver.limitFor(policy.key, policy.limit))
}

/** Builds the behavior on a provider, a limit manager and the store's holder marks. */
export const make = (provider: SemaphoreProviderService, manager: ConcurrencyLimitManagerService, holders: Holders): Behavior => ({
  name: "concurrency",
  holdsSlot: true,
  // under the slot-pool rule a slot of index i belongs to every limit above i: a job may reuse the held
  // slot while its key's limit (an admin override included, read as at a pickup) is still above it
  admitsUnder: (attempt, slot) => {
    const policy = attempt.policies.concurrency
    return policy === undefined || policy.total !== undefined
      ? Effect.succeed(false)
      : limitOf(manager, attempt.job, policy).pipe(
          Effect.map((limit) => slot.name === LOCK_PREFIX + policy.key && slot.index < limit),
          Effect.orElseSucceed(() => false)
        )
  },
  wrap: (attempt, next) => {
    const policy = attempt.policies.concurrency
    if (policy === undefined) return next
    return Effect.scoped(
      Effect.gen(function* () {
        const limit = yield* limitOf(manager, attempt.job, policy)
        const total = policy.total
        // with a total cap: the group's admin override is read while the key's slot is asked for (a read,
        // no slot: one round trip less before the handler); used only once the key has room
        const groupOverride = total === undefined ? undefined : yield* Effect.forkScoped(manager.getGroupLimit(total.group))
        const result = yield* admission(attempt.job, policy, limit, gate(provider, policy, limit))
        const replacing = policy.mode === "CancelRunning"
        // a CancelRunning holder is marked so that a newer job can find it; a newcomer asks older holders to stop
        if (replacing && result._tag === "Requeued") {
          const cancelling = yield* holders.cancelHolders(policy.key, attempt.job)
          return Outcome.Requeued({ reason: replacingText(result.key, result.limit, cancelling) })
        }
        return yield* GateResult.$match(result, {
          Skipped: ({ key, limit }) => Effect.succeed(Outcome.Deleted({ reason: cancelledText(key, limit) })),
          Requeued: ({ key, limit }) => Effect.succeed(Outcome.Requeued({ reason: requeuedText(key, limit) })),
          Acquired: ({ key, slot }) =>
            Effect.gen(function* () {
              // the key has room; with a total cap, its group must have room too (asked second, so a key
              // found full never takes a group slot from the keys that have room)
              // what the attempt holds, each with how its loss or lapse is told
              const held: Array<readonly [Slot, string]> = [[slot, `Slot of '${key}'`]]
              // the group's slot lives in a scope of its own, closed as soon as the run's end is judged
              // (see `atEnd`): its release then runs alongside the finalizing write (which frees the key's
              // slot) instead of after it. The handler has ended by then, so the cap still bounds the
              // running handlers at every instant; the row, Processing until written, still counts as a
              // holder for the claim's admission (conservative). The attempt's scope awaits that release.
              let groupScope: Scope.Closeable | undefined
              let releasing: Fiber.Fiber<void> | undefined
              if (total !== undefined) {
                // an admin override of the group's cap wins over the declared total, as for a key
                const groupLimit = Option.match(yield* Fiber.join(groupOverride!), { onNone: () => total.limit, onSome: (o) => o.slots })
                const outer = yield* Effect.scope
                groupScope = yield* Scope.fork(outer)
                yield* Effect.addFinalizer(() => (releasing === undefined ? Effect.void : Effect.asVoid(Fiber.join(releasing))))
                const group = yield* Scope.provide(provider.tryAcquire(TOTAL_PREFIX + total.group, groupLimit, 0), groupScope)
                yield* Metric.update(gateTotalOf(Option.isSome(group) ? "TotalAcquired" : "TotalFull", keyFamily(key)), 1)
                if (Option.isNone(group)) {
                  return dropsNewcomer(policy.mode)
                    ? Outcome.Deleted({ reason: groupCancelledText(total.group, groupLimit) })
                    : // not served: a weighted job keeps its fair-share tag (waiting for the group costs its key no share)
                      Outcome.Requeued({ reason: groupRequeuedText(total.group, groupLimit), keepsTag: true })
                }
                held.push([group.value, `Slot of group '${total.group}'`])
              }
              if (replacing) yield* holders.markHolder(attempt.job.id, attempt.workerId, policy.key)
              // the run's end, told by the worker after the handler (see `SlotEnd`): a loss noticed after it
              // is judged at it (see `afterLoss`)
              let end: RunEnd | undefined
              const atEnd = (outcome: Outcome) =>
                // uninterruptible: a loss noticed meanwhile finds the end recorded (it may ask a ping at most)
                Effect.uninterruptible(
                  Effect.gen(function* () {
                    const e = yield* endOf(held, key, outcome)
                    end = e
                    // the handler has ended and every slot's verdict is taken: the group's slot goes now
                    if (groupScope !== undefined && releasing === undefined) releasing = yield* Effect.forkDetach(Scope.close(groupScope, Exit.void))
                    return e.outcome
                  })
                )
              return yield* untilLost(
                next.pipe(
                  Effect.provideService(CurrentSlot, { key, index: slot.index, fence: slot.fence }),
                  Effect.provideService(HeldSlot, slot),
                  Effect.provideService(SlotEnd, atEnd)
                ),
                Effect.raceAll(held.map(([s, what]) => Effect.as(s.lost, what))),
                (what) => afterLoss(end, what)
              )
            })
        })
      })
    ).pipe(
      Effect.catch((e: SemaphoreError | LimitStoreError | StoreError) =>
        Effect.map(Clock.currentTimeMillis, (now) =>
          Outcome.Requeued({ reason: `Concurrency gate unavailable for '${policy.key}': ${e._tag}`, at: new Date(now + 1000) })
        )
      )
    )
  }
})
