/**
 * The distributed semaphore seam. `tryAcquire` returns an optional slot held in the caller's
 * `Scope`: closing the scope (success, failure, defect, timeout, interruption) releases it.
 *
 * Slot-pool rule shared by every built-in provider: a name with limit N uses slots `name:0` ..
 * `name:{N-1}`, so `Mutex(k)` (slot `k:0`) and `Semaphore(k, N)` share one pool — the cap for a key
 * is the largest limit in use, never the sum.
 *
 * A provider of your own can be checked with the exported contract suite
 * (`ProviderContract.suite` from `warp-effect/testing/vitest`).
 *
 * @since 0.1.0
 */
import type * as SqlClient from "effect/sql/SqlClient"
import type * as Statement from "effect/sql/Statement"
import * as Context from "effect/Context"
import * as Describe from "../error/Describe.js"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"

/** A held slot. */
export interface Slot {
  readonly name: string
  /** Index of the slot in `0 .. limit-1`. */
  readonly index: number
  /**
   * Completes if the slot is lost while held (e.g. its database connection died, which frees a
   * distributed lock). Holders race their work against it; providers that cannot lose a slot
   * return `Effect.never`.
   */
  readonly lost: Effect.Effect<void>
  /**
   * The fencing token of this acquisition: a number that only grows per slot name, across provider
   * restarts too, when the provider offers one (the built-in providers do). A resource that remembers
   * the highest token it has seen can refuse a write from a holder whose slot was since granted again
   * (a process paused longer than any lease): `UPDATE … SET …, fence = $token WHERE … AND fence < $token`.
   */
  readonly fence?: bigint | undefined
  /**
   * Whether the slot has lapsed: its holder-side deadline passed with no successful renewal (the
   * process was paused or cut off for that long), so the provider may have granted it again, or it
   * was lost. Checked before an attempt's finalizing write: a run that lapsed is not recorded as a
   * plain outcome. Absent for a provider whose slots cannot lapse (memory).
   */
  readonly lapsed?: Effect.Effect<boolean> | undefined
  /**
   * Marks now as the end of the holder's run (its handler ended) and gives the verdict on it: an
   * effect that, asked then or later, says whether the slot stayed this holder's — nobody else could
   * have been granted it — from its acquisition up to that end: true (shown), false (the slot was lost
   * and it cannot be shown: the loss may predate the end) or undefined (not known yet: the slot is not
   * known lost, and a later answer may show it). Asked at the end (false: the run is requeued), when
   * the slot is found lost afterwards (only true keeps the run's outcome), and by a finalizing
   * statement that fails with the slot's connection (only true lets the outcome be written without
   * it). Absent (a provider that cannot tell): a slot found lost before the run's result was written
   * does not keep it. A slot whose `lost` never completes (memory) needs none. (Since 1.1.0; see
   * docs/slot-validity.md.)
   */
  readonly heldThrough?: Effect.Effect<Effect.Effect<boolean | undefined>> | undefined
  /**
   * The slot's release, offered to a store that can run it inside the attempt's finalizing statement
   * (see {@link FusedRelease}): asked when that statement goes out, it answers undefined once the slot
   * is released or lost. Absent (a provider that cannot, the generic path): the attempt's scope releases
   * the slot, as it does whenever a store does not take the offer. The built-in PostgreSQL provider
   * offers it in its default mode. (Since 1.1.0.)
   */
  readonly fusedRelease?: (() => FusedRelease | undefined) | undefined
}

/** The provider could not be asked (connection lost, bad arguments). */
export class SemaphoreError extends Data.TaggedError("SemaphoreError")<{
  readonly name: string
  readonly message: string
  readonly cause?: unknown
}> {}

/** The semaphore provider service. */
export interface SemaphoreProviderService {
  /**
   * Tries to take one of `limit` slots of `name`, waiting up to `timeout` (zero: one try).
   * `None` = all slots held. The slot is released when the surrounding `Scope` closes.
   */
  readonly tryAcquire: (
    name: string,
    limit: number,
    timeout: Duration.Input
  ) => Effect.Effect<Option.Option<Slot>, SemaphoreError, Scope.Scope>
}

/** The semaphore provider tag. Provide `SemaphoreProviderMemory.layer`, `SemaphoreProviderPg.layer` or your own. */
export class SemaphoreProvider extends Context.Service<SemaphoreProvider, SemaphoreProviderService>()("warp/SemaphoreProvider") {}

/** The slot names of `name` at `limit`. */
export const slotName = (name: string, index: number): string => `${name}:${index}`

/** A random starting offset for a slot scan. */
export const randomOffset = (limit: number): number => Math.floor(Math.random() * limit)

/** Fails with a `SemaphoreError` unless `limit` is an integer >= 1. */
export const validateLimit = (name: string, limit: number): Effect.Effect<void, SemaphoreError> =>
  Number.isInteger(limit) && limit >= 1
    ? Effect.void
    : Effect.fail(
        new SemaphoreError({ name, message: `SemaphoreProvider.tryAcquire(${Describe.show(name, 40)}, ${Describe.show(limit)}): limit must be an integer >= 1, got ${Describe.show(limit)}` })
      )

/** What one successful acquisition attempt yields: the slot and the effect that gives it back. */
export interface Held {
  readonly slot: Slot
  readonly release: Effect.Effect<void>
}

/**
 * Turns a single acquisition attempt into `tryAcquire`: `attempt` is repeated every `every` until
 * it yields a slot or `timeout` has elapsed (zero: one try). Each attempt runs uninterruptibly
 * and registers its release in the caller's scope before anything can interrupt it, so a slot
 * is never taken without being given back; the waits between attempts stay interruptible, so an
 * `Effect.timeout` around the caller is not held up by a long acquisition timeout.
 */
export const acquireWith = <E>(
  attempt: Effect.Effect<Option.Option<Held>, E>,
  timeout: Duration.Input,
  every: Duration.Input = "5 millis"
): Effect.Effect<Option.Option<Slot>, E, Scope.Scope> =>
  Effect.flatMap(Effect.scope, (scope) =>
    pollUntil(
      Effect.uninterruptible(
        Effect.tap(attempt, (held) => (Option.isSome(held) ? Scope.addFinalizer(scope, held.value.release) : Effect.void))
      ),
      timeout,
      every
    ).pipe(Effect.map(Option.map((held) => held.slot)))
  )

class Busy {
  readonly _tag = "Busy"
}

/**
 * Repeats `once` (which returns `None` while all slots are held) until it returns a slot or
 * `timeout` has elapsed; a zero timeout tries exactly once.
 */
export const pollUntil = <A, E, R>(
  once: Effect.Effect<Option.Option<A>, E, R>,
  timeout: Duration.Input,
  every: Duration.Input = "5 millis"
): Effect.Effect<Option.Option<A>, E, R> => {
  const waitMs = Duration.toMillis(timeout)
  if (waitMs <= 0) return once
  return once.pipe(
    Effect.flatMap((o): Effect.Effect<Option.Option<A>, E | Busy> => (Option.isSome(o) ? Effect.succeed(o) : Effect.fail(new Busy()))),
    Effect.retry({ schedule: Schedule.spaced(every).pipe(Schedule.upTo({ duration: Duration.millis(waitMs) })), while: (e) => e instanceof Busy }),
    Effect.catchIf((e): e is Busy => e instanceof Busy, () => Effect.succeed(Option.none<A>()))
  )
}

/**
 * A held slot's release, offered to a store that can run it inside its own finalizing statement on
 * the slot's connection: the port between a SQL provider and a SQL store, which names neither (the
 * built-in PostgreSQL provider offers it in its default mode, one connection per held slot; the
 * built-in PostgreSQL store runs it when it shares the provider's `SqlClient`). A store that ignores it
 * stays correct: the slot is then released by the attempt's scope.
 */
export interface FusedRelease {
  /** The `SqlClient` whose connection holds the slot: a store fuses only a statement meant for it. */
  readonly client: SqlClient.SqlClient
  /**
   * The release as common table expressions of that client, for the store to add to its statement's
   * `WITH` list: `r` (one row, column `released`) unlocks the slot under its name's guard and puts the
   * session's `idle_session_timeout` back; another removes the slot's lock-delay marker.
   */
  readonly statement: Statement.Fragment
  /**
   * Runs `text` (with `params`) on the slot's connection. On success the slot counts as released and
   * the scope's release only gives the connection back; on failure, or when the connection is lost
   * while the statement runs, the slot is lost (the connection is dropped) and this fails.
   */
  readonly run: (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, SemaphoreError>
  /**
   * Set by the worker: asked when `run` failed (the slot's connection died), whether the store may still
   * write the outcome through its pool — the slot provably stayed held up to the run's end
   * (`Slot.heldThrough`). False: the store fails with the `SemaphoreError`, and the worker writes the
   * requeue it names instead (`FinalizeOptions.unproven`). Absent: the store writes through its pool.
   */
  readonly fallback?: Effect.Effect<boolean> | undefined
  /**
   * The release for a statement that also claims rows (`claimed`: a relation of the claimed rows with
   * their `metadata`, `schedule_time`, `id`, `admin_key` and `admin_slots`), in place of `statement`:
   * the common table expressions `ctes` free this slot and take, on the same connection, a slot for
   * the first claimed row (by priority descending, ScheduleTime, id: the order its lane runs them) whose key is in mode Wait without a total cap, at its
   * limit (the admin override read by the claim, else the row's); `columns` is a one-row relation for
   * the statement's `FROM` (`released` and the slot taken, if any). Run the statement with `run`: a
   * slot it took is handed to the next `tryAcquire` of that name in this process whose limit covers
   * it, or released if none asks for it soon.
   */
  readonly carry: (claimed: Statement.Fragment) => {
    readonly ctes: Statement.Fragment
    readonly columns: Statement.Fragment
    readonly run: (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, SemaphoreError>
  }
}
