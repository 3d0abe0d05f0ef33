/**
 * The PostgreSQL semaphore provider: session-level advisory locks.
 *
 * - Slot-pool rule: the slots of `name` at limit N are the locks `name:0` .. `name:{N-1}` (64-bit
 *   ids from a SHA-256 of the slot name) for every N, so `Mutex(k)` and `Semaphore(k, N)` share
 *   one pool of N slots.
 * - One statement scans the slots from a random offset and takes the first free one (a recursive
 *   CTE, so it never takes more than one). The scan first takes a per-name guard
 *   (`pg_advisory_xact_lock` in the two-int key space, held until the statement ends) and every
 *   release unlocks its slot under the same guard. No cooperating acquire or release can
 *   therefore happen while a scan runs: "full" means every slot was held for the whole scan, and
 *   a slot that was free for the whole call is always found. Only a holder's connection dying
 *   frees a slot outside the guard.
 * - Connections: by default each held slot keeps its own connection checked out (`sql.reserve`)
 *   until release. In that mode a held slot also offers its release to the job store
 *   (`fusedRelease`): the attempt's finalizing statement then runs on the slot's connection and
 *   unlocks the slot under its guard, so the release costs no round trip of its own. With `multiplex: { connections: K }` all slots of the process live on K
 *   long-lived connections; session locks are re-entrant per connection, so an in-process gate
 *   (per connection: a mutex plus the set of locks it holds, which the scan skips) keeps two
 *   fibers from both holding one slot.
 * - Either way slots die with their connection: PostgreSQL frees the locks of a dead session. The
 *   driver's `end`/`error` events (on @effect/sql-pg) and a ping every `pingInterval` (any SqlClient,
 *   and connections that hang without closing) notice the loss and complete `slot.lost`, so the
 *   holder stops.
 * - Deadline (PostgreSQL 14+). A connection holding slots gets `idle_session_timeout = deadline`
 *   (set by the statement that takes a slot, put back by the one that releases it), and is pinged
 *   at least every quarter of it: a holder cut off from the server (a partition, a proxy that stops
 *   forwarding without closing anything) has its session ended — and its slots freed — by the
 *   server within `deadline`, instead of when TCP gives up (hours, or never behind a proxy that
 *   answers keepalives). The holder stops itself first: a ping unanswered for a quarter of the
 *   deadline completes `slot.lost`. A process paused longer than the deadline cannot stop itself;
 *   its slots are freed while it sleeps, so the deadline is also the longest pause that never
 *   over-admits.
 *   Queries on a slot connection are never interrupted (sql-pg would send `pg_cancel_backend`
 *   through the pool, which could land on a later statement).
 *
 * @since 0.1.0
 */
import type { Connection } from "@effect/sql/SqlConnection"
import * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Runtime from "effect/Runtime"
import * as Scope from "effect/Scope"
import { guardKey, lockId } from "./lockId.js"
import {
  acquireWith,
  type Held,
  randomOffset,
  SemaphoreError,
  type Slot,
  SemaphoreProvider,
  type SemaphoreProviderService,
  slotName,
  validateLimit
} from "./SemaphoreProvider.js"

/** Options of the PostgreSQL provider. */
export interface PgProviderOptions {
  /** How often a connection holding slots is checked (default 1 second). */
  readonly pingInterval?: Duration.DurationInput
  /** How long a ping may take before the connection's slots count as lost (default 5 seconds). */
  readonly pingTimeout?: Duration.DurationInput
  /** How often a waiting `tryAcquire` retries (default 10 ms). */
  readonly retryInterval?: Duration.DurationInput
  /**
   * Hold every slot of this process on `connections` long-lived connections instead of one
   * connection per held slot. The pool must allow `connections` reserved connections.
   */
  readonly multiplex?: { readonly connections: number }
  /**
   * How long the server keeps the slots of a holder it no longer hears from (default 10 seconds;
   * PostgreSQL 14+, ignored before). Pings run at least every quarter of it and time out after a
   * quarter of it.
   */
  readonly deadline?: Duration.DurationInput
}

/**
 * `$1` candidate lock ids, `$2` start offset, `$3` candidate count, `$4`/`$5` the guard key, `$6` the
 * session's `idle_session_timeout` (ms) once it holds a slot (NULL: left as it is), `$7` whether to
 * draw a fencing token. Returns the position (in `$1`) of the lock taken and its token, or no row.
 */
const SCAN = `
WITH RECURSIVE scan(i, got) AS (
  SELECT -1, false FROM (SELECT pg_advisory_xact_lock($4::int, $5::int)) AS guard
  UNION ALL
  SELECT i + 1, pg_try_advisory_lock(($1::bigint[])[1 + (($2::int + i + 1) % $3::int)])
  FROM scan WHERE NOT got AND i + 1 < $3::int
)
SELECT ($2::int + i) % $3::int AS position,
       CASE WHEN $6::text IS NULL THEN NULL ELSE set_config('idle_session_timeout', $6::text, false) END AS deadline,
       CASE WHEN $7::boolean THEN nextval('warp_semaphore_fence')::text END AS fence
FROM scan WHERE got`

const UNLOCK_ALL = "SELECT pg_advisory_unlock_all()"
const UNLOCK_ALL_RESET = "SELECT pg_advisory_unlock_all(), set_config('idle_session_timeout', $1::text, false)"

/**
 * A held slot's release, offered to a store that can run it inside its own finalizing statement on
 * the slot's connection (the built-in PostgreSQL store does, when it shares the provider's
 * `SqlClient`). Only the default mode (one connection per held slot) offers it.
 */
export interface FusedRelease {
  /** The `SqlClient` whose connection holds the slot: a store fuses only a statement meant for it. */
  readonly client: SqlClient.SqlClient
  /**
   * The release as a query of that client — the slot unlocked under its name's guard, the session's
   * `idle_session_timeout` put back — for the store to embed (e.g. as a CTE its statement reads).
   */
  readonly statement: Statement.Fragment
  /**
   * Runs `text` (with `params`) on the slot's connection. On success the slot counts as released and
   * the scope's release only gives the connection back; on failure, or when the connection is lost
   * while the statement runs, the slot is lost (the connection is dropped) and this fails.
   */
  readonly run: (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, SemaphoreError>
}

const fusable = new WeakMap<Slot, () => FusedRelease | undefined>()

/**
 * The release of `slot` a store may fuse into its finalizing statement (see {@link FusedRelease}):
 * none for a slot of another provider, of a multiplexed provider, already released, or lost.
 */
export const fusedRelease = (slot: Slot): FusedRelease | undefined => fusable.get(slot)?.()

/** The guard key of `name`, in the two-int advisory key space (exported for tests). */
export const guardOf = (name: string): readonly [number, number] => {
  let guard = guardCache.get(name)
  if (guard === undefined) {
    if (guardCache.size >= 4096) guardCache.clear()
    guard = guardKey(`warp:semaphore-guard:${name}`)
    guardCache.set(name, guard)
  }
  return guard
}

/** Guard keys per name, computed once (a SHA-256 each); bounded. */
const guardCache = new Map<string, readonly [number, number]>()

/**
 * A FIFO mutex that wakes one waiter per release (`Effect.Semaphore` wakes every waiter, which
 * is quadratic with hundreds of fibers queued on one connection).
 */
const makeMutex = Effect.map(Queue.unbounded<void>(), (token) => {
  token.unsafeOffer(undefined)
  return <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.acquireUseRelease(Queue.take(token), () => self, () => Queue.offer(token, undefined))
})

/**
 * Slot lock ids per name, computed once (a SHA-256 per slot adds up at large limits); bounded.
 * Cached arrays are never mutated: a larger limit replaces the entry with a longer copy.
 */
const idCache = new Map<string, ReadonlyArray<string>>()
const slotIds = (name: string, limit: number): ReadonlyArray<string> => {
  const cached = idCache.get(name) ?? []
  if (cached.length >= limit) return cached.length === limit ? cached : cached.slice(0, limit)
  const ids = cached.slice()
  while (ids.length < limit) ids.push(lockId(slotName(name, ids.length)))
  if (idCache.size >= 4096) idCache.clear()
  idCache.set(name, ids)
  return ids
}

/**
 * Limits up to SCAN_ALL are scanned whole, in one guarded statement. Above it, a try scans windows
 * of SCAN_WINDOW slots from a random start, the next one only while the previous one is full, so
 * it never costs work per slot of the limit (the ids of every slot of a limit of 2^31 - 1 would
 * not even fit in memory). Each window is guarded on its own: a slot freed in a window already
 * passed can be missed, as the spec allows for a scan.
 */
const SCAN_ALL = 8192
const SCAN_WINDOW = 1024

/** The array literal of all slot ids of `name` at one limit, cached like the ids. */
const literalCache = new Map<string, string>()
const arrayLiteral = (name: string, ids: ReadonlyArray<string>): string => {
  const key = `${ids.length}:${name}`
  let literal = literalCache.get(key)
  if (literal === undefined) {
    if (literalCache.size >= 4096) literalCache.clear()
    literal = `{${ids.join(",")}}`
    literalCache.set(key, literal)
  }
  return literal
}

/** A connection holding slots: its own for one slot by default, shared when multiplexing. */
interface Lane {
  readonly conn: Connection
  readonly scope: Scope.CloseableScope
  /** Lock ids held on this connection (the in-process gate: the scan skips them). */
  readonly held: Set<string>
  readonly lost: Deferred.Deferred<void>
  dead: boolean
  watchdog: Fiber.RuntimeFiber<void, never> | undefined
}

/** Builds the provider on the `SqlClient` in context; closes its connections with the surrounding scope. */
export const make = (options: PgProviderOptions = {}): Effect.Effect<SemaphoreProviderService, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const deadlineMs = Duration.toMillis(Duration.decode(options.deadline ?? "10 seconds"))
    const quarter = Duration.millis(Math.max(1, Math.floor(deadlineMs / 4)))
    const pingEvery = Duration.min(Duration.decode(options.pingInterval ?? "1 second"), quarter)
    const pingTimeout = Duration.min(Duration.decode(options.pingTimeout ?? "5 seconds"), quarter)
    // idle_session_timeout exists from PostgreSQL 14
    const version = yield* sql<{ v: number }>`SELECT current_setting('server_version_num')::int AS v`.pipe(
      Effect.map((rows) => Number(rows[0]?.v ?? 0)),
      Effect.orElseSucceed(() => 0)
    )
    const sessionDeadline = version >= 140000 ? String(Math.max(1, Math.round(deadlineMs))) : null
    // what a connection's idle_session_timeout goes back to when it returns to the pool, read once
    const resetDeadline =
      sessionDeadline === null
        ? null
        : yield* sql<{ v: string }>`SELECT reset_val AS v FROM pg_settings WHERE name = 'idle_session_timeout'`.pipe(
            Effect.map((rows) => String(rows[0]?.v ?? "0")),
            Effect.orElseSucceed(() => "0")
          )
    // fencing tokens: one sequence for every slot name (a number that grows for all names grows for
    // each), kept by the database across provider restarts; none where it cannot be created
    const fencing = yield* sql`CREATE SEQUENCE IF NOT EXISTS warp_semaphore_fence`.pipe(
      Effect.as(true),
      Effect.catchAll(() =>
        sql`SELECT 1 FROM pg_class WHERE relname = 'warp_semaphore_fence' AND relkind = 'S' AND pg_table_is_visible(oid)`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orElseSucceed(() => false)
        )
      )
    )
    const every = options.retryInterval ?? "10 millis"
    const connections = options.multiplex?.connections
    if (connections !== undefined && (!Number.isInteger(connections) || connections < 1)) {
      return yield* Effect.dieMessage(`multiplex.connections must be an integer >= 1, got ${connections}`)
    }
    const fail = (name: string, message: string) => (cause: unknown) => new SemaphoreError({ name, message, cause })

    // never interrupted: see the module note on pg_cancel_backend
    const query = (lane: Lane, text: string, params: ReadonlyArray<unknown>) =>
      Effect.uninterruptible(lane.conn.executeUnprepared(text, params, undefined))

    const runFork = Runtime.runFork(yield* Effect.runtime<never>())

    const openLane = Effect.gen(function* () {
      const scope = yield* Scope.make()
      const conn = yield* sql.reserve.pipe(Scope.extend(scope), Effect.onError(() => Scope.close(scope, Exit.void)))
      const lane: Lane = { conn, scope, held: new Set(), lost: yield* Deferred.make<void>(), dead: false, watchdog: undefined }
      yield* onConnectionEnd(lane)
      return lane
    })

    /**
     * The driver's client behind a reserved connection, when the SqlClient is @effect/sql-pg's (its
     * connection keeps the `pg` client in a `pg` field). Any other SqlClient gets the ping alone.
     */
    const driverClient = (conn: Connection): { on(e: string, f: () => void): unknown; off(e: string, f: () => void): unknown } | undefined => {
      const client = (conn as { pg?: unknown }).pg as { on?: unknown; off?: unknown } | undefined
      return typeof client?.on === "function" && typeof client.off === "function" ? (client as any) : undefined
    }

    /**
     * Kills the lane as soon as the driver reports its connection ended or broken (a terminated
     * backend, a cut socket), so `slot.lost` completes within moments instead of at the next ping;
     * the listeners come off before the connection goes back to the pool.
     */
    const onConnectionEnd = (lane: Lane) =>
      Effect.suspend(() => {
        const client = driverClient(lane.conn)
        if (client === undefined) return Effect.void
        const ended = () => void runFork(kill(lane))
        client.on("end", ended)
        client.on("error", ended)
        return Scope.addFinalizer(
          lane.scope,
          Effect.sync(() => {
            client.off("end", ended)
            client.off("error", ended)
          })
        )
      })

    /**
     * The release of slot `id` of `name`: unlocked under the name's guard; with `reset` not null, the
     * session's `idle_session_timeout` put back (the connection goes back to the pool).
     */
    const releaseStatement = (name: string, id: string, reset: string | null) => {
      const [g1, g2] = guardOf(name)
      return sql`SELECT pg_advisory_unlock(${id}::bigint) AS released,
       CASE WHEN ${reset}::text IS NULL THEN NULL ELSE set_config('idle_session_timeout', ${reset}::text, false) END AS deadline
FROM (SELECT pg_advisory_xact_lock(${g1}::int, ${g2}::int)) AS guard`
    }

    /** Drops whatever the connection still holds and gives it back to the pool. */
    const dispose = (lane: Lane) =>
      query(lane, resetDeadline === null ? UNLOCK_ALL : UNLOCK_ALL_RESET, resetDeadline === null ? [] : [resetDeadline]).pipe(Effect.ignore, Effect.zipRight(Scope.close(lane.scope, Exit.void)))

    /** The connection is unusable or its locks are in doubt: its slots are lost. */
    const kill = (lane: Lane): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (lane.dead) return Effect.void
        lane.dead = true
        const watchdog = lane.watchdog
        lane.watchdog = undefined
        return Deferred.succeed(lane.lost, undefined).pipe(
          Effect.zipRight(Effect.forkDaemon(dispose(lane))),
          Effect.zipRight(watchdog === undefined ? Effect.void : Fiber.interruptFork(watchdog))
        )
      })

    /** Pings the connection; a failed or late ping kills the lane. The ping itself is never interrupted. */
    const watch = (lane: Lane) => {
      const ping = Effect.forkDaemon(query(lane, "SELECT 1", [])).pipe(
        Effect.flatMap((f) => Effect.timeoutFail(Fiber.join(f), { duration: pingTimeout, onTimeout: () => "ping timed out" }))
      )
      return Effect.sleep(pingEvery).pipe(
        Effect.zipRight(ping),
        Effect.forever,
        Effect.catchAll(() =>
          Effect.suspend(() => {
            lane.watchdog = undefined
            return kill(lane)
          })
        ),
        // forked from an uninterruptible acquisition: the watchdog itself must be interruptible
        Effect.interruptible,
        Effect.forkDaemon,
        Effect.tap((fiber) => Effect.sync(() => void (lane.watchdog = fiber)))
      )
    }

    /** Runs the guarded scan over the lane's candidate slots; returns the slot index taken and its fencing token. */
    const scanLane = (
      lane: Lane,
      name: string,
      ids: ReadonlyArray<string>
    ): Effect.Effect<Option.Option<{ readonly index: number; readonly fence: bigint | undefined }>, SemaphoreError> => {
      const free: Array<number> = []
      for (let i = 0; i < ids.length; i++) if (!lane.held.has(ids[i]!)) free.push(i)
      if (free.length === 0) return Effect.succeed(Option.none())
      const [g1, g2] = guardOf(name)
      const candidates =
        free.length === ids.length && idCache.get(name) === ids ? arrayLiteral(name, ids) : `{${free.map((i) => ids[i]).join(",")}}`
      return query(lane, SCAN, [candidates, randomOffset(free.length), free.length, g1, g2, sessionDeadline, fencing]).pipe(
        Effect.tapError(() => kill(lane)),
        Effect.mapError(fail(name, "advisory lock scan failed")),
        Effect.map((rows) => {
          if (rows.length === 0) return Option.none()
          const row = rows[0] as { position: number; fence: string | null }
          const index = free[Number(row.position)]!
          lane.held.add(ids[index]!)
          return Option.some({ index, fence: row.fence === null ? undefined : BigInt(row.fence) })
        })
      )
    }

    /**
     * Unlocks one slot under its guard (a no-op on a dead lane: its locks are gone with it); `last`: the
     * connection goes back to the pool, its deadline is put back.
     */
    const unlock = (lane: Lane, name: string, id: string, last: boolean): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (lane.dead) return Effect.void
        const [text, params] = releaseStatement(name, id, last ? resetDeadline : null).compile()
        return query(lane, text, params).pipe(
          Effect.matchEffect({ onFailure: () => kill(lane), onSuccess: () => Effect.sync(() => void lane.held.delete(id)) })
        )
      })

    /** Default: one reserved connection per held slot. */
    const attemptDedicated = (name: string, ids: ReadonlyArray<string>): Effect.Effect<Option.Option<Held>, SemaphoreError> =>
      Effect.gen(function* () {
        const lane = yield* openLane.pipe(Effect.mapError(fail(name, "could not reserve a connection")))
        const taken = yield* scanLane(lane, name, ids)
        if (Option.isNone(taken)) {
          yield* Scope.close(lane.scope, Exit.void)
          return Option.none()
        }
        const { fence, index } = taken.value
        yield* watch(lane)
        const id = ids[index]!
        // the lane holds this one slot until it is unlocked: by `unlock`, or by a store's finalizing statement
        const holds = () => !lane.dead && lane.held.has(id)
        const release = Effect.gen(function* () {
          if (lane.watchdog !== undefined) yield* Fiber.interrupt(lane.watchdog)
          lane.watchdog = undefined
          if (lane.dead) return
          if (lane.held.has(id)) yield* unlock(lane, name, id, true)
          if (!lane.dead) yield* Scope.close(lane.scope, Exit.void)
        })
        const slot: Slot = { name, index, lost: Deferred.await(lane.lost), fence }
        const fusedOnce: FusedRelease = {
          client: sql,
          statement: releaseStatement(name, id, resetDeadline),
          run: (text, params) =>
            Effect.suspend(() => {
              if (!holds()) return Effect.failSync(() => new SemaphoreError({ name, message: "slot no longer held" }))
              const lost = Effect.zipRight(
                Deferred.await(lane.lost),
                Effect.failSync(() => new SemaphoreError({ name, message: "slot connection lost during the finalizing statement" }))
              )
              // the statement itself is never interrupted (see the module note); a lane lost meanwhile ends the wait
              // (the racers are made interruptible: a finalizing write runs uninterruptibly, and the race
              // awaits its loser's interruption)
              return Effect.forkDaemon(query(lane, text, params)).pipe(
                Effect.flatMap((f) =>
                  Effect.raceFirst(
                    Effect.interruptible(Effect.mapError(Fiber.join(f), fail(name, "finalizing statement failed on the slot connection"))),
                    Effect.interruptible(lost)
                  )
                ),
                Effect.tapBoth({
                  onFailure: () => kill(lane),
                  onSuccess: () => Effect.sync(() => void lane.held.delete(id))
                })
              )
            })
        }
        fusable.set(slot, () => (holds() ? fusedOnce : undefined))
        return Option.some({ slot, release })
      })

    /** Multiplexed: K long-lived connections, each with its own mutex (the in-process gate). */
    const entries = yield* Effect.forEach(Array.from({ length: connections ?? 0 }), () =>
      Effect.map(makeMutex, (mutex) => ({ mutex, lane: undefined as Lane | undefined }))
    )
    let next = 0
    const attemptShared = (name: string, ids: ReadonlyArray<string>): Effect.Effect<Option.Option<Held>, SemaphoreError> => {
      const entry = entries[next++ % entries.length]!
      return entry.mutex(
        Effect.gen(function* () {
          let lane = entry.lane
          if (lane === undefined || lane.dead) {
            lane = yield* openLane.pipe(Effect.mapError(fail(name, "could not reserve a connection")))
            entry.lane = lane
            yield* watch(lane)
          }
          const current = lane
          const taken = yield* scanLane(current, name, ids)
          return Option.map(
            taken,
            ({ fence, index }): Held => ({
              slot: { name, index, lost: Deferred.await(current.lost), fence },
              release: entry.mutex(unlock(current, name, ids[index]!, false))
            })
          )
        })
      )
    }

    yield* Effect.addFinalizer(() =>
      Effect.forEach(
        entries,
        (entry) =>
          entry.mutex(
            Effect.suspend(() => {
              const lane = entry.lane
              entry.lane = undefined
              if (lane === undefined || lane.dead) return Effect.void
              lane.dead = true
              return Effect.all([
                lane.watchdog === undefined ? Effect.void : Fiber.interrupt(lane.watchdog),
                Deferred.succeed(lane.lost, undefined),
                dispose(lane)
              ])
            })
          ),
        { discard: true }
      )
    )

    const attempt = connections === undefined ? attemptDedicated : attemptShared

    /** One try at a limit above SCAN_ALL: window after window, while each is full. */
    const attemptWindows = (name: string, limit: number): Effect.Effect<Option.Option<Held>, SemaphoreError> => {
      const start = randomOffset(limit)
      const tryWindow = (w: number): Effect.Effect<Option.Option<Held>, SemaphoreError> => {
        if (w * SCAN_WINDOW >= limit) return Effect.succeed(Option.none())
        const first = start + w * SCAN_WINDOW
        const ids = Array.from({ length: Math.min(SCAN_WINDOW, limit - w * SCAN_WINDOW) }, (_, i) => lockId(slotName(name, (first + i) % limit)))
        return Effect.flatMap(attempt(name, ids), (held) =>
          Option.isNone(held)
            ? tryWindow(w + 1)
            : Effect.succeed(Option.some({ ...held.value, slot: { ...held.value.slot, index: (first + held.value.slot.index) % limit } }))
        )
      }
      return Effect.suspend(() => tryWindow(0))
    }
    const service: SemaphoreProviderService = {
      tryAcquire: (name, limit, timeout) =>
        Effect.zipRight(
          validateLimit(name, limit),
          Effect.suspend(() =>
            acquireWith(limit > SCAN_ALL ? attemptWindows(name, limit) : attempt(name, slotIds(name, limit)), timeout, every)
          )
        )
    }
    return service
  })

/**
 * The PostgreSQL provider Layer. Requires a `SqlClient` whose pool can hold one connection per
 * held slot, or `multiplex.connections` connections when multiplexing.
 */
export const layer = (options: PgProviderOptions = {}): Layer.Layer<SemaphoreProvider, never, SqlClient.SqlClient> =>
  Layer.scoped(SemaphoreProvider, make(options))
