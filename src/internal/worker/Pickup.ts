/**
 * Instant pickup: how a worker's idle lanes learn of due work without waiting for their poll. The
 * store's wake-up hints (`JobStoreService.wakeups`: new due rows, a freed slot of a key with due jobs
 * waiting, a (re)connected listener) wake idle lanes — one lane per due row, one per freed slot, all of
 * them once on a (re)connect, when notifications may have been lost — and a timer wakes one when the
 * next Scheduled row comes due (learnt after an empty claim from `JobStoreService.nextDue`, shortened by
 * the time an insert tells or a requeue of this worker's sets). The poll interval stays the fallback:
 * a hint lost costs at most one poll interval, as before.
 *
 * Busy lanes: a `Due` hint of rows above the default priority that finds fewer idle lanes than rows
 * leaves the rest as urgent, for a while of one poll interval: a busy lane about to start the next job of
 * the batch it claimed, all of them of a lower priority, claims one row first (the claim takes the
 * highest priority due), so such a job waits for the end of the job running now on some lane, not for
 * the end of a batch. A lane's own claim after the hint counts against the urgent rows.
 *
 * Never a spin: a lane claims once per wake; the timer fires for times strictly in the future by the
 * store's clock (`nextDue`), and a lane re-claims instead of sleeping only when a hint came while it was
 * claiming (so a hint that lands between its empty claim and its sleep is not lost).
 *
 * A store without hints (the PostgreSQL store with `instantPickup: false`) leaves lanes to their poll.
 *
 * @since 1.1.0
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { JobStoreService } from "../store/JobStore.js"
import type { Wakeup } from "../store/Wakeup.js"
import type { WorkerState } from "./WorkerState.js"

/** One lane's part in pickup. */
export interface LaneWake {
  /**
   * Read before the lane's claim: hints seen so far. Pass it to {@link idle}, which then does not sleep
   * when a hint came since (the claim may have run before the hinted row was committed).
   */
  readonly epoch: () => number
  /**
   * An idle lane's wait after an empty claim (begun when {@link epoch} said `seen`): until a hint or
   * the timer wakes it, the poll interval passes, or the worker stops.
   */
  readonly idle: (seen: number) => Effect.Effect<void>
  /**
   * The lane's back-off on a Wait-mode key it holds a claimed job of, the key full moments ago (a store
   * that ignores the fetch's `contended` hint gave it the key's job again): one poll interval, or until
   * a slot of `key` frees (a `Freed` hint), or the worker stops.
   */
  readonly idleOn: (key: string) => Effect.Effect<void>
  /**
   * Asked by a busy lane before it starts the next job of its batch (`below`: the highest priority among
   * the batch's rows not started; `now`: epoch ms): whether it should claim one row first, because rows of a higher
   * priority came due that no idle lane was woken for (one lane per such row; see the module's note).
   * Both are read only while such rows are pending, so the common case costs the lane nothing per job.
   */
  readonly urgent: (below: () => number, now: () => number) => boolean
  /** The lane sends a claim of `n` rows now: it takes up to `n` of the urgent rows too. */
  readonly claiming: (n: number) => void
  /** The lane leaves (it stopped). */
  readonly leave: () => void
}

/** The worker's pickup. */
export interface Pickup {
  /** Whether the store sends hints (else lanes only poll). */
  readonly enabled: boolean
  /** A lane joins; `forget`: drops the lane's skip of a Wait-mode key, called when a slot of it frees. */
  readonly join: (forget: (key: string) => void) => LaneWake
  /** A lane's claim came back empty: learns when the next Scheduled row comes due, unless known. */
  readonly emptyClaim: Effect.Effect<void>
  /** A row this worker wrote comes due at `at` (epoch ms; a requeue with a time): the timer fires by then. */
  readonly dueAt: (at: number) => Effect.Effect<void>
  /** Acts on one hint as on those `run` relays from the store (for a hint the worker learns itself). */
  readonly hint: (hint: Wakeup) => Effect.Effect<void>
  /** Relays the store's hints and runs the timer, for the worker's life (forked by the worker). */
  readonly run: Effect.Effect<void>
}

/**
 * The timer fires this long after a row's time: a timer may fire up to a millisecond early, and a claim
 * sent before the row is due finds nothing (the lane then asks `nextDue` again).
 */
const TIMER_MARGIN_MS = 2

interface Joined {
  readonly forget: (key: string) => void
  /** Set while the lane sleeps: completing it wakes the lane. */
  wake: Deferred.Deferred<void> | undefined
  /** Set while the lane backs off on a key: completing it ends the back-off. */
  onKey: { readonly key: string; readonly wake: Deferred.Deferred<void> } | undefined
}

/**
 * The pickup of a worker on `store`: subscribes to the store's hints for the scope (before the lanes
 * start, so that none sent after their first claim is missed).
 */
export const make = (store: JobStoreService, state: WorkerState): Effect.Effect<Pickup, never, Scope.Scope> =>
  Effect.gen(function* () {
    const timerChanged = yield* Queue.sliding<void>(1)
    const wakeups = store.wakeups === undefined ? undefined : yield* store.wakeups
    const { config } = state
    const enabled = wakeups !== undefined
    const plainIdle = Effect.raceFirst(Effect.sleep(config.pollInterval), Deferred.await(state.stopping))
    const lanes = new Set<Joined>()
    // lanes asleep, the most recent last (woken first: the likeliest still warm)
    const sleeping: Array<Joined> = []
    let epoch = 0
    // the local time (epoch ms) the next Scheduled row comes due, as far as this worker knows
    let timerAt: number | undefined
    let needsQuery = true
    let querying = false
    // due rows of a high priority that no idle lane was woken for: busy lanes claim them between jobs
    let urgent: { priority: number; rows: number; until: number } | undefined

    /** Wakes up to `n` sleeping lanes; says how many. */
    const wake = (n: number): number => {
      epoch++
      let woken = 0
      for (; woken < n && sleeping.length > 0; woken++) {
        const lane = sleeping.pop()!
        const d = lane.wake
        lane.wake = undefined
        if (d !== undefined) Deferred.doneUnsafe(d, Effect.void)
      }
      return woken
    }

    const setTimer = (at: number) =>
      Effect.suspend(() => {
        if (timerAt !== undefined && timerAt <= at) return Effect.void
        timerAt = at
        return Queue.offer(timerChanged, undefined)
      })

    const onHint = (hint: Wakeup) =>
      Effect.suspend(() => {
        switch (hint._tag) {
          case "Due": {
            const n = Math.max(1, hint.count)
            const left = n - wake(n)
            if (left <= 0 || hint.priority === undefined || hint.priority === 0) return Effect.void
            const priority = hint.priority
            return Effect.map(Clock.currentTimeMillis, (now) => {
              const until = now + Duration.toMillis(config.pollInterval)
              urgent =
                urgent === undefined || urgent.until <= now
                  ? { priority, rows: left, until }
                  : { priority: Math.max(urgent.priority, priority), rows: urgent.rows + left, until }
            })
          }
          case "Freed": {
            // a key too long to carry: every lane backing off on a key ends it, and one lane wakes
            if (hint.key === undefined) {
              for (const lane of lanes) if (lane.onKey !== undefined) Deferred.doneUnsafe(lane.onKey.wake, Effect.void)
              wake(1)
              return Effect.void
            }
            // one slot freed: one lane learns of it — one that holds a claimed job of the key and backs off
            // on it, else the sleeping lane woken, else (none sleeps) a busy one; that lane drops its skip
            // of the key. The other lanes keep theirs: each of them would claim a job of the key now, and
            // all but one would meet it full again and requeue it (one key at limit 1, 8 lanes: 0.25-0.29
            // requeues per job when every lane dropped it, 0.10-0.15 with one)
            const key = hint.key
            for (const lane of lanes) {
              if (lane.onKey !== undefined && lane.onKey.key === key) {
                lane.forget(key)
                Deferred.doneUnsafe(lane.onKey.wake, Effect.void)
                return Effect.void
              }
            }
            const woken = sleeping.at(-1)
            if (wake(1) > 0) woken!.forget(key)
            else lanes.values().next().value?.forget(key)
            return Effect.void
          }
          case "Connected":
            needsQuery = true
            wake(sleeping.length)
            return Effect.void
          case "Future":
            return Effect.flatMap(Clock.currentTimeMillis, (now) => setTimer(now + hint.inMs + TIMER_MARGIN_MS))
        }
      })

    /** Sleeps until the timer's time (or a change of it), then wakes one lane. */
    const timer: Effect.Effect<never> = Effect.forever(
      Effect.gen(function* () {
        const at = timerAt
        if (at === undefined) return yield* Queue.take(timerChanged)
        const wait = at - (yield* Clock.currentTimeMillis)
        if (wait > 0) {
          const changed = yield* Effect.raceFirst(Effect.as(Effect.sleep(wait), false), Effect.as(Queue.take(timerChanged), true))
          if (changed) return
        }
        timerAt = undefined
        needsQuery = true
        wake(1)
      })
    )

    const join = (forget: (key: string) => void): LaneWake => {
      const self: Joined = { forget, wake: undefined, onKey: undefined }
      lanes.add(self)
      return {
        epoch: () => epoch,
        idle: (seen) =>
          !enabled
            ? plainIdle
            : Effect.suspend(() => {
                if (epoch !== seen) return Effect.void
                const d = Deferred.makeUnsafe<void>()
                self.wake = d
                sleeping.push(self)
                return Effect.raceFirst(plainIdle, Deferred.await(d)).pipe(
                  Effect.ensuring(
                    Effect.sync(() => {
                      self.wake = undefined
                      const i = sleeping.indexOf(self)
                      if (i >= 0) sleeping.splice(i, 1)
                    })
                  )
                )
              }),
        idleOn: (key) =>
          !enabled
            ? plainIdle
            : Effect.suspend(() => {
                const d = Deferred.makeUnsafe<void>()
                self.onKey = { key, wake: d }
                return Effect.raceFirst(plainIdle, Deferred.await(d)).pipe(Effect.ensuring(Effect.sync(() => void (self.onKey = undefined))))
              }),
        urgent: (below, now) => {
          const u = urgent
          if (u === undefined || u.priority <= below()) return false
          if (u.until <= now()) {
            urgent = undefined
            return false
          }
          if (--u.rows <= 0) urgent = undefined
          return true
        },
        claiming: (n) => {
          const u = urgent
          if (u !== undefined && (u.rows -= n) <= 0) urgent = undefined
        },
        leave: () => {
          lanes.delete(self)
        }
      }
    }

    const nextDue = store.nextDue
    const emptyClaim: Effect.Effect<void> =
      !enabled || nextDue === undefined
        ? Effect.void
        : Effect.suspend(() => {
            if (!needsQuery || querying) return Effect.void
            querying = true
            needsQuery = false
            // the time counts from the answer (the statement's `now()` is earlier): the timer never fires
            // before the row is due by the store's clock, whose claim would find nothing
            return Effect.zip(nextDue, Clock.currentTimeMillis).pipe(
              Effect.flatMap(([inMs, now]) => (Option.isSome(inMs) ? setTimer(now + inMs.value + TIMER_MARGIN_MS) : Effect.void)),
              // the store is out of reach: asked again after the next empty claim
              Effect.catch(() => Effect.sync(() => void (needsQuery = true))),
              Effect.ensuring(Effect.sync(() => void (querying = false)))
            )
          })

    return {
      enabled,
      join,
      emptyClaim,
      dueAt: (at) => (enabled ? setTimer(at) : Effect.void),
      hint: onHint,
      run: wakeups === undefined ? Effect.void : Effect.andThen(Effect.forkScoped(timer), Stream.runForEach(wakeups, onHint)).pipe(Effect.scoped)
    }
  })
