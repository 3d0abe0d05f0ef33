/**
 * The recurring-job scheduler: one fiber per registered `Recurring` entry sleeps (on Effect's
 * `Clock`) until the entry's next cron tick and fires it.
 *
 * A firing bypasses the publisher: it inserts the row directly with empty metadata (but for a
 * Fifo-mode concurrency policy, carried as the publisher does, see `Publisher.fifoCarry`), so the
 * contract's declared policy is resolved (and stamped) by the first attempt, like any job. Its id is
 * derived from `(recurring id, tick)` (`Recurring.firingId`), so any number of schedulers — fibers or
 * processes on one store — fire each tick once: the second insert of a firing conflicts and is
 * ignored. A tick that passes while no scheduler runs is not fired afterwards.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as JobMetadata from "../policy/JobMetadata.js"
import { JobStore } from "../store/JobStore.js"
import type { StoreError } from "../store/StoreError.js"
import type { InvalidArgument } from "../error/InvalidArgument.js"
import type { InvalidPayload } from "../job/errors.js"
import * as PayloadCodec from "../job/PayloadCodec.js"
import { JobParameters } from "./JobParameters.js"
import { fifoCarry, priorityOf } from "./Publisher.js"
import * as Recurring from "../job/Recurring.js"
import { Registry } from "../job/Registry.js"

/**
 * Fires one tick of `recurring`: inserts its row (Enqueued, ScheduleTime = tick, empty metadata but
 * for a Fifo-mode concurrency policy of the handler registered in this process, or of the contract;
 * the priority of that handler, else of the contract).
 * Returns false when that firing already exists (another scheduler fired it).
 */
export const fire = (
  recurring: Recurring.Recurring,
  tick: Date
): Effect.Effect<boolean, InvalidPayload | InvalidArgument | StoreError, JobStore> =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const payload = yield* Effect.suspend(() =>
      Effect.fromResult(PayloadCodec.encode(`Recurring '${recurring.id}'`, recurring.contract, recurring.payload))
    )
    const id = Recurring.firingId(recurring.id, tick)
    const registry = yield* Effect.serviceOption(Registry)
    const handler = Option.getOrUndefined(Option.flatMap(registry, (r) => r.lookup(recurring.contract.name, null)))?.handler
    const fifo = fifoCarry(recurring.contract, handler)
    return yield* store
      .insert([
        {
          id,
          type: recurring.contract.name,
          handler: null,
          payload,
          state: "Enqueued",
          scheduleTime: tick,
          metadata: JobMetadata.encode(fifo === undefined ? JobMetadata.JobMetadata.empty : JobMetadata.fromEntries({ concurrency: fifo })),
          // the handler's priority, else the contract's, as the publisher resolves it
          priority: priorityOf(recurring.contract, JobParameters.make(), handler)
        }
      ])
      .pipe(
        Effect.as(true),
        // the primary key makes a firing unique: if the row exists, this tick was fired already
        Effect.catchTag("StoreError", (e) =>
          Effect.flatMap(store.get(id), (existing) => (Option.isSome(existing) ? Effect.succeed(false) : Effect.fail(e))).pipe(
            // fired, run and removed by retention already: this tick was fired
            Effect.catchTag("JobExpired", () => Effect.succeed(false))
          )
        )
      )
  })

// exponential from 100 ms, at most 5 s apart (the shorter of the two delays), for up to a minute
const storeRetry = Schedule.min([Schedule.exponential("100 millis"), Schedule.spaced("5 seconds")]).pipe(Schedule.upTo({ duration: "1 minute" }))

/** Runs one entry forever: sleep until the next tick, fire it, repeat. */
const runEntry = (recurring: Recurring.Recurring): Effect.Effect<never, never, JobStore> =>
  Effect.gen(function* () {
    let after = yield* Clock.currentTimeMillis
    while (true) {
      const tick = Recurring.nextTick(recurring, after)
      const wait = tick.getTime() - (yield* Clock.currentTimeMillis)
      if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
      yield* fire(recurring, tick).pipe(
        Effect.retry({ schedule: storeRetry, while: (e) => e._tag === "StoreError" }),
        Effect.tapError((e) => Effect.logError(`recurring '${recurring.id}': tick ${tick.toISOString()} not fired`, e)),
        Effect.tap((fired) => (fired ? Effect.logDebug(`recurring '${recurring.id}' fired for ${tick.toISOString()}`) : Effect.void)),
        Effect.ignore
      )
      after = tick.getTime()
    }
  })

/** Starts the scheduler in the current scope: one fiber per `Recurring` entry of the registry. */
export const make: Effect.Effect<void, never, Scope.Scope | JobStore | Registry> = Effect.gen(function* () {
  const registry = yield* Registry
  yield* Effect.forEach(registry.recurring, (r) => Effect.forkScoped(runEntry(r)), { discard: true })
})

/** The scheduler as a Layer: fires while the layer is alive. Run it beside (or without) workers. */
export const layer: Layer.Layer<never, never, JobStore | Registry> = Layer.effectDiscard(make)
