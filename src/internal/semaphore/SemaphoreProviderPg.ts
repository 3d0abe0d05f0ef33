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
 * - Connections: by default each held slot keeps its own connection checked out (of the provider's
 *   slot pool, see below) until release. In that mode a held slot also offers its release to the job store
 *   (`fusedRelease`): the attempt's finalizing statement then runs on the slot's connection and
 *   unlocks the slot under its guard, so the release costs no round trip of its own. With `multiplex: { connections: K }` all slots of the process live on K
 *   long-lived connections; session locks are re-entrant per connection, so an in-process gate
 *   (per connection: a mutex plus the set of locks it holds, which the scan skips) keeps two
 *   fibers from both holding one slot.
 * - Either way slots die with their connection: PostgreSQL frees the locks of a dead session. The
 *   driver's `end`/`error` events and a ping every `pingInterval` (connections that hang without
 *   closing; one watchdog fiber per provider pings every connection that holds slots) notice the loss
 *   and complete `slot.lost`, so the holder stops.
 * - Slot connections: `pg` clients of a small pool of the provider's own (`pg/Driver.ts`), built from
 *   the settings of the `PgClient` in context (its URL or host, port, user, password, database, TLS,
 *   application name; its `maxConnections` and `idleTimeout`), or from the `connection` option. Why not
 *   the `SqlClient`'s own connections, as with @effect/sql-pg 0.53 (whose connections were `pg`
 *   clients)? @effect/sql-pg 4 speaks the wire protocol itself, and a connection reserved from it tells
 *   of its death only to its pool, through an internal hook, or to a `LISTEN` queue: a public signal,
 *   but one that costs a `LISTEN` and an `UNLISTEN` round trip on every connection that takes a slot —
 *   two more round trips per acquisition in the default mode, where the fused release costs none —
 *   and that is not reachable from the `SqlClient`'s `reserve` without reaching into unexported
 *   classes. The pings alone would leave a terminated holder running for up to `pingInterval`. So the
 *   slots live on `pg` clients, whose `end`/`error` events fire as the socket closes: the lost-slot
 *   signal, the pings, the deadline, multiplexing, the lock-delay markers and the fused release behave
 *   as they did on @effect/sql-pg 0.53. The provider's setup statements and the removal of a dead
 *   lane's markers run on that pool too. A `SqlClient` that is not @effect/sql-pg's (and has no
 *   `connection` option) holds the slots on its own reserved connections, a lost one noticed by the
 *   pings alone.
 * - Carried admission (default mode, `FusedRelease.carry`). A store's finalizing statement that frees a
 *   slot and claims the lane's next row may also take, on the same connection, a slot for that row's
 *   key (mode Wait, no total cap; at the admin override the claim read, else the row's limit): the
 *   same guarded scan, both names' guards taken first in one order. The slot is handed to the next
 *   `tryAcquire` of its name in this process whose limit covers its index (the row's attempt, as a
 *   rule), without a scan; one nobody asks for within `ADOPT_WITHIN_MS` is released. The connection
 *   stays out of the pool while it holds either slot.
 * - On the slot pool's clients the statements on a slot's connection (the scan, the release, the
 *   store's fused finalizing statement, the pings) run as named prepared statements (`pg/Named.ts`),
 *   parsed and planned once per connection.
 * - Deadline (PostgreSQL 14+). A connection holding slots gets `idle_session_timeout = deadline`
 *   (set by the statement that takes a slot, put back by the one that releases it), and is pinged
 *   at least every quarter of it: a holder cut off from the server (a partition, a proxy that stops
 *   forwarding without closing anything) has its session ended — and its slots freed — by the
 *   server within `deadline`, instead of when TCP gives up (hours, or never behind a proxy that
 *   answers keepalives). The holder stops itself first: a ping unanswered for a quarter of the
 *   deadline completes `slot.lost`. A process paused longer than the deadline cannot stop itself;
 *   its slots are freed while it sleeps, so the deadline is also the longest pause that never
 *   over-admits. With `deadlineBy: "tcp"` the session gets `tcp_user_timeout = deadline` and
 *   keepalives instead: a cut holder goes silent and is ended as before, while a paused one (its
 *   kernel still answers) keeps its session and slots through a pause of any length — for direct
 *   connections only (behind a proxy the server hears the proxy, not the holder).
 *   Queries on a slot connection are never interrupted (a cancellation sent for one could land on a
 *   later statement of the session, and an interrupted scan or release would leave its locks in doubt).
 * - Lock-delay (`lockDelay`, default on). PostgreSQL frees a dead session's locks at once, while its
 *   holder may still run (until it notices; for as long as it is paused). So each held slot also has
 *   a marker row (`warp_semaphore_marker`: lock id, the holding connection's token, an expiry
 *   `deadline` ahead, renewed by every ping): the scan does not grant a slot whose lock is free but
 *   whose marker names another holder and has not expired. A clean release removes the marker in its
 *   own statement (the slot is free at once, as without markers); a holder whose connection died
 *   removes it through the pool when its scope releases the slot — after its handler stopped — so a
 *   terminated connection costs milliseconds; a holder that never comes back (killed, cut off,
 *   paused) leaves it to expire: its slots are usable again within `deadline` of its last renewal,
 *   by which time a live holder has stopped itself (its pings failed for a quarter of it).
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import * as SqlClient from "effect/sql/SqlClient"
import type { Connection } from "effect/sql/SqlConnection"
import type * as Statement from "effect/sql/Statement"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import { type DriverConfig, driverConfigOf, makeDriverPool, type PooledClient } from "../pg/Driver.js"
import { queryNamed, runNamed } from "../pg/Named.js"
import { guardKey, lockId } from "./lockId.js"
import {
  acquireWith,
  type FusedRelease,
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
  readonly pingInterval?: Duration.Input
  /** How long a ping may take before the connection's slots count as lost (default 5 seconds). */
  readonly pingTimeout?: Duration.Input
  /** How often a waiting `tryAcquire` retries (default 10 ms). */
  readonly retryInterval?: Duration.Input
  /**
   * Hold every slot of this process on `connections` long-lived connections instead of one
   * connection per held slot. The slot pool (see `connection`) must allow `connections` connections.
   */
  readonly multiplex?: { readonly connections: number }
  /**
   * How long the server keeps the slots of a holder it no longer hears from (default 10 seconds;
   * PostgreSQL 14+, ignored before). Pings run at least every quarter of it and time out after a
   * quarter of it.
   */
  readonly deadline?: Duration.Input
  /**
   * Lock-delay (default on): a slot whose holder lost it without releasing it (its connection died)
   * is not granted again until that holder has released it — its scope closed, so its handler has
   * stopped — or `deadline` after the holder's last renewal. Costs a row write per acquisition and per
   * release (in the same statements; a statement that frees a slot and takes it again rewrites its
   * marker only when it has aged an eighth of its life) and one per held connection per ping. Off, a lost slot is
   * granted again as soon as PostgreSQL frees its lock, while its old holder may run on until it
   * notices (milliseconds; up to `deadline` for a process that is paused or cut off).
   */
  readonly lockDelay?: boolean
  /**
   * How the server ends the session of a holder it no longer hears from, so that its slots are freed
   * within `deadline`:
   * - `"idle-session-timeout"` (default): the session's `idle_session_timeout`. Works whatever sits
   *   between worker and server (a proxy or pooler that answers TCP keepalives), but it also ends
   *   the session of a holder that is only paused (a stopped process, a long GC): `deadline` is the
   *   longest pause that never over-admits, and a run paused longer is recorded as lapsed.
   * - `"tcp"`: the session's `tcp_user_timeout` and keepalives (1 s idle, 1 s interval). A cut-off
   *   holder goes silent and its session ends within about `deadline`; a paused holder's kernel still
   *   answers, so its session — and its slots — live on through a pause of any length, and the run
   *   goes on when the process resumes. Only for a direct TCP connection to PostgreSQL: behind a
   *   proxy or pooler the server hears the proxy, and a cut holder's slots stay taken for as long as
   *   the proxy keeps the connection (use the default there).
   */
  readonly deadlineBy?: "idle-session-timeout" | "tcp"
  /**
   * The slot connections' settings (see the module note): by default those of the `PgClient` in
   * context (`url`, `host`, `port`, `path`, `database`, `username`, `password`, `ssl`,
   * `applicationName`, `startupParameters`, `startupOptions`, `connectTimeout`, `keepAlive`) and its
   * pool's size (`maxConnections`, default 10: one connection per held slot, or
   * `multiplex.connections`) and `idleTimeout` (default 60 seconds); the fields given here win. Needed
   * for a `SqlClient` that is not @effect/sql-pg's (without it, such a client's own connections hold the
   * slots, and a lost one is noticed by the pings alone) or one that connects through a custom `stream`.
   * URL `sslmode=prefer`/`allow` connect without TLS here: give `ssl` to require it.
   */
  readonly connection?: PgSlotConnection
}

/** The settings of the provider's slot connections (see {@link PgProviderOptions.connection}). */
export type PgSlotConnection = DriverConfig

/**
 * `$1` candidate lock ids, `$2` start offset, `$3` candidate count, `$4`/`$5` the guard key, `$6` the
 * session's `idle_session_timeout` (ms) once it holds a slot (NULL: left as it is), `$7` whether to
 * draw a fencing token, `$8` the lane's holder token, `$9` the marker's life (ms) (without markers,
 * only echoed), `$10`/`$11` the session's `tcp_user_timeout` (ms) and keepalive count (`deadlineBy:
 * "tcp"`; NULL: left as they are). Returns the position (in `$1`) of the lock taken and its token, or no row.
 *
 * Lock-delay: a slot whose lock is free but whose marker names another holder and has not expired
 * was lost by that holder (its connection died, it did not release), which may still be running: the
 * scan gives the lock back and goes on. The marker is read by `warp_semaphore_marker_blocks`, a
 * VOLATILE function, so with a snapshot taken after the guard is held: the statement's own snapshot is
 * taken before it waits for the guard, and could still show the marker of a slot whose holder released
 * it (lock and marker) while the scan waited — a free slot then read as taken. The slot taken gets this lane's marker; the marker is written
 * with asynchronous commit (a crash of the server just after an acquisition may lose it, which
 * matters only for a holder paused across the crash).
 */
const slotAt = "($1::bigint[])[1 + (($2::int + i + 1) % $3::int)]"

/**
 * When a slot taken already has a marker, whether the upsert rewrites it: when it names another
 * holder, or names this one but expires sooner than seven eighths of a fresh marker's life. A lane
 * that takes again the slot it holds or has just released in the same statement (a chain of one key's
 * jobs) then writes its marker only about once per eighth of its life instead of once per job; the
 * ping renews it meanwhile. The holder counts its slot as lapsed three quarters of the life after the
 * statement that took it, before any marker it left can expire.
 */
const MARKER_STALE = "warp_semaphore_marker.holder <> EXCLUDED.holder OR warp_semaphore_marker.until < EXCLUDED.until - (EXCLUDED.until - clock_timestamp()) / 8"
const scanText = (markers: boolean) => `
WITH RECURSIVE scan(i, got, id) AS (
  SELECT -1, false, NULL::bigint FROM (SELECT pg_advisory_xact_lock($4::int, $5::int)) AS guard
  UNION ALL
  SELECT i + 1,
         CASE WHEN NOT pg_try_advisory_lock(${slotAt}) THEN false${
           markers
             ? `
              WHEN warp_semaphore_marker_blocks(${slotAt}, $8::text)
              THEN NOT pg_advisory_unlock(${slotAt})`
             : ""
         }
              ELSE true END,
         ${slotAt}
  FROM scan WHERE NOT got AND i + 1 < $3::int
)${
  markers
    ? `, mark AS (
  INSERT INTO warp_semaphore_marker (lock_id, holder, until)
  SELECT id, $8::text, clock_timestamp() + $9::float8 * interval '1 millisecond'
  FROM scan WHERE got AND set_config('synchronous_commit', 'off', true) IS NOT NULL
  ON CONFLICT (lock_id) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
  WHERE ${MARKER_STALE}
)`
    : ""
}
SELECT ($2::int + i) % $3::int AS position,
       CASE WHEN $6::text IS NULL THEN NULL ELSE set_config('idle_session_timeout', $6::text, false) END AS deadline,
       CASE WHEN $10::text IS NULL THEN NULL
            ELSE set_config('tcp_user_timeout', $10::text, false) || set_config('tcp_keepalives_idle', '1', false)
                 || set_config('tcp_keepalives_interval', '1', false) || set_config('tcp_keepalives_count', $11::text, false) END AS tcp,
       CASE WHEN $7::boolean THEN nextval('warp_semaphore_fence')::text END AS fence${markers ? "" : ", $8::text AS holder, $9::float8 AS life"}
FROM scan WHERE got`
const SCAN_MARKED = scanText(true)

/**
 * Creates `warp_semaphore_marker_blocks(lock_id, holder)` unless it exists: whether another holder's
 * unexpired marker is on the slot. PL/pgSQL and VOLATILE, so never inlined into the scan and each call
 * reads the markers with a fresh snapshot (see the scan). Several processes may start at once: a
 * creation that loses the race fails, and the function is there.
 */
const markerFunction = (sql: SqlClient.SqlClient, exec: Exec): Effect.Effect<boolean> => {
  const exists = exec(sql`SELECT 1 FROM pg_proc WHERE proname = 'warp_semaphore_marker_blocks' AND pg_function_is_visible(oid)`).pipe(
    Effect.map((rows) => rows.length > 0),
    Effect.orElseSucceed(() => false)
  )
  const create = exec(sql.unsafe(`CREATE FUNCTION warp_semaphore_marker_blocks(lock bigint, me text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  RETURN EXISTS (SELECT 1 FROM warp_semaphore_marker m WHERE m.lock_id = lock AND m.holder <> me AND m.until > clock_timestamp());
END
$fn$`))
  return Effect.flatMap(exists, (there) => (there ? Effect.succeed(true) : Effect.andThen(Effect.ignore(create), exists)))
}

/** Runs a statement of the provider's setup: on the slot connections' pool when there is one. */
type Exec = <A>(statement: Statement.Statement<A>) => Effect.Effect<ReadonlyArray<A>, unknown>
const SCAN_PLAIN = scanText(false)

/**
 * The lane's markers live on (`$1` holder token, `$2` life in ms, `$3` the lock ids it holds, found by
 * the primary key): the ping of a lane that holds slots.
 */
const RENEW = `
UPDATE warp_semaphore_marker SET until = clock_timestamp() + $2::float8 * interval '1 millisecond'
WHERE lock_id = ANY($3::bigint[]) AND holder = $1::text AND set_config('synchronous_commit', 'off', true) IS NOT NULL`

/** The marker of a lost slot (`$1` lock id, `$2` holder token), dropped once its holder has stopped. */
const FORGET = "DELETE FROM warp_semaphore_marker WHERE lock_id = $1::bigint AND holder = $2::text"

const UNLOCK_ALL = "SELECT pg_advisory_unlock_all()"
const UNLOCK_ALL_RESET = "SELECT pg_advisory_unlock_all(), set_config('idle_session_timeout', $1::text, false)"

/** A held slot's release, offered to a store that fuses it into its finalizing statement (see `SemaphoreProvider.FusedRelease`). */
export type { FusedRelease }

/** How long a slot taken for a claimed job waits for its attempt's `tryAcquire` before it is released (ms). */
const ADOPT_WITHIN_MS = 500

/** The 32-bit ints at `from` (1-based byte) of the SHA-256 of `text` (SQL), as `guardKey` reads them. */
export const sha256Int = (text: string, from: number) =>
  `('x' || encode(substr(sha256(convert_to(${text}, 'UTF8')), ${from}, 4), 'hex'))::bit(32)::int`
/** The lock id of slot name `text` (SQL), as `lockId` computes it. */
export const sha256Id = (text: string) => `('x' || encode(substr(sha256(convert_to(${text}, 'UTF8')), 1, 8), 'hex'))::bit(64)::bigint`
/** In the carried admission's scan: the lock id of the slot at step `s.i + 1` of the admitted name. */
const ADMIT_SLOT_ID = sha256Id("adm.name || ':' || ((adm.off + s.i + 1) % adm.lim)")
/** In the carried admission: the two ints of the admitted name's guard key. */
const ADMIT_GUARD = [sha256Int("'warp:semaphore-guard:' || adm.name", 1), sha256Int("'warp:semaphore-guard:' || adm.name", 5)] as const

/**
 * The prefix of the concurrency gate's slot names (`ConcurrencyBehavior.LOCK_PREFIX`, which imports
 * this module; a test checks they agree): the admission a finalizing statement carries takes slots of
 * `LOCK_PREFIX + key`.
 */
export const LOCK_PREFIX = "warp:concurrency:"

/**
 * Whether `err` is the server's answer to a statement (an ErrorResponse with a SQLSTATE) rather than
 * the end of the session: not a connection exception (08), an operator intervention that ends the
 * session (57P), or an insufficient-resources one (53).
 */
const serverAnswered = (err: unknown): boolean => {
  const e = err as { severity?: unknown; code?: unknown }
  return typeof e?.severity === "string" && typeof e.code === "string" && !/^(08|57P|53)/.test(e.code)
}

/**
 * The release of `slot` a store may fuse into its finalizing statement (`Slot.fusedRelease`, see
 * {@link FusedRelease}): none for a slot of a provider that offers none (a multiplexed one, another
 * provider), already released, or lost.
 */
export const fusedRelease = (slot: Slot): FusedRelease | undefined => slot.fusedRelease?.()

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
  Queue.offerUnsafe(token, undefined)
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

/**
 * A slot a carried admission took on `lane` (slot `index`, lock `id`, its fence), from the statement
 * sent at `sentAt`, waiting since `at` (`performance.now()`) for an attempt to ask for it.
 */
interface HandedOver {
  readonly lane: Lane
  readonly id: string
  readonly index: number
  readonly fence: bigint | undefined
  readonly sentAt: number
  readonly at: number
}

/**
 * A lane's connection: a `pg` client of the provider's pool (see the module note), or, on a
 * `SqlClient` that is not @effect/sql-pg's and without `connection` settings, one reserved from it.
 */
type LaneConnection = { readonly _tag: "Driver"; readonly client: PooledClient } | { readonly _tag: "Sql"; readonly conn: Connection }

/** A connection holding slots: its own for one slot by default, shared when multiplexing. */
interface Lane {
  readonly via: LaneConnection
  readonly scope: Scope.Closeable
  /** Lock ids held on this connection (the in-process gate: the scan skips them). */
  readonly held: Set<string>
  readonly lost: Deferred.Deferred<void>
  /** Names this lane's lock-delay markers. */
  readonly token: string
  /**
   * When (`performance.now()`) the last successful ping was sent: the server had the session (and
   * renewed its markers) then, so its slots are the holder's until one deadline after it.
   */
  renewedAt: number
  /**
   * When (`performance.now()`) the last statement answered on the connection was sent: the session
   * was alive after that instant, so the slots it held then had stayed held up to it (see `heldThrough`).
   */
  answeredAt: number
  dead: boolean
  /** The ping in flight, if any (interrupted when the lane stops being watched). */
  watchdog: Fiber.Fiber<void> | undefined
  /** When (`performance.now()`) the watchdog pings the lane next. */
  nextPingAt: number
  /** Called once when the lane dies (a fused finalizing statement waiting on it stops waiting). */
  readonly onDeath: Set<() => void>
}

/** Builds the provider on the `SqlClient` in context; closes its connections with the surrounding scope. */
export const make = (options: PgProviderOptions = {}): Effect.Effect<SemaphoreProviderService, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // the slot connections' own pool (see the module note); none: the SqlClient's connections, pings alone
    const driverConfig = driverConfigOf(sql, options.connection)
    const pool = driverConfig === undefined ? undefined : yield* makeDriverPool(driverConfig)
    const exec: Exec = <A>(statement: Statement.Statement<A>) => {
      if (pool === undefined) return statement
      const [text, params] = statement.compile()
      return pool.query(text, params) as Effect.Effect<ReadonlyArray<A>, unknown>
    }
    const deadlineMs = Duration.toMillis(Duration.fromInputUnsafe(options.deadline ?? "10 seconds"))
    const quarter = Duration.millis(Math.max(1, Math.floor(deadlineMs / 4)))
    const lapseAfterMs = deadlineMs - Duration.toMillis(quarter)
    const pingEvery = Duration.min(Duration.fromInputUnsafe(options.pingInterval ?? "1 second"), quarter)
    const pingTimeout = Duration.min(Duration.fromInputUnsafe(options.pingTimeout ?? "5 seconds"), quarter)
    // idle_session_timeout exists from PostgreSQL 14
    const version = yield* exec(sql<{ v: number }>`SELECT current_setting('server_version_num')::int AS v`).pipe(
      Effect.map((rows) => Number(rows[0]?.v ?? 0)),
      Effect.orElseSucceed(() => 0)
    )
    const byTcp = options.deadlineBy === "tcp"
    const sessionDeadline = !byTcp && version >= 140000 ? String(Math.max(1, Math.round(deadlineMs))) : null
    // tcp_user_timeout exists from PostgreSQL 12; keepalive probes a second apart, as many as fit the deadline
    const tcpDeadline = byTcp && version >= 120000 ? String(Math.max(1, Math.round(deadlineMs))) : null
    const keepaliveCount = String(Math.max(1, Math.floor(deadlineMs / 1000)))
    // what a connection's idle_session_timeout goes back to when it returns to the pool, read once
    const resetDeadline =
      sessionDeadline === null
        ? null
        : yield* exec(sql<{ v: string }>`SELECT reset_val AS v FROM pg_settings WHERE name = 'idle_session_timeout'`).pipe(
            Effect.map((rows) => String(rows[0]?.v ?? "0")),
            Effect.orElseSucceed(() => "0")
          )
    // fencing tokens: one sequence for every slot name (a number that grows for all names grows for
    // each), kept by the database across provider restarts; none where it cannot be created
    const fencing = yield* exec(sql`CREATE SEQUENCE IF NOT EXISTS warp_semaphore_fence`).pipe(
      Effect.as(true),
      Effect.catch(() =>
        exec(sql`SELECT 1 FROM pg_class WHERE relname = 'warp_semaphore_fence' AND relkind = 'S' AND pg_table_is_visible(oid)`).pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orElseSucceed(() => false)
        )
      )
    )
    // lock-delay markers: one table for every slot name, kept by the database; none where it cannot be
    // created (the scan then frees a lost slot at once, as before)
    const table = options.lockDelay === false ? false : yield* exec(sql`CREATE TABLE IF NOT EXISTS warp_semaphore_marker (
  lock_id bigint PRIMARY KEY, holder text NOT NULL, until timestamptz NOT NULL)`).pipe(
      Effect.as(true),
      Effect.catch(() =>
        exec(sql`SELECT 1 FROM pg_class WHERE relname = 'warp_semaphore_marker' AND relkind = 'r' AND pg_table_is_visible(oid)`).pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orElseSucceed(() => false)
        )
      )
    )
    // and the function the scan reads them with (without it, no markers either)
    const markers = table && (yield* markerFunction(sql, exec))
    // markers left by holders that never came back are overwritten by the slot's next holder; those of
    // slots never taken again are swept here, once per provider start (an hour past their expiry)
    if (markers) {
      yield* exec(sql`DELETE FROM warp_semaphore_marker WHERE until < now() - interval '1 hour'`).pipe(Effect.ignore)
    }
    const every = options.retryInterval ?? "10 millis"
    const connections = options.multiplex?.connections
    if (connections !== undefined && (!Number.isInteger(connections) || connections < 1)) {
      return yield* Effect.die(new Error(`multiplex.connections must be an integer >= 1, got ${connections}`))
    }
    const fail = (name: string, message: string) => (cause: unknown) => new SemaphoreError({ name, message, cause })

    // never interrupted: see the module note. On the provider's `pg` clients, as named prepared
    // statements (`pg/Named.ts`): the scan and the release are planned once per connection
    const query = (lane: Lane, text: string, params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<any>, unknown> =>
      lane.via._tag === "Driver" ? runNamed(lane.via.client, text, params) : Effect.uninterruptible(lane.via.conn.executeUnprepared(text, params, undefined))

    const runFork = Effect.runForkWith(yield* Effect.context<never>())

    const openLane = Effect.gen(function* () {
      const scope = yield* Scope.make()
      const via: LaneConnection =
        pool !== undefined
          ? { _tag: "Driver", client: yield* pool.connect.pipe(Effect.onError(() => Scope.close(scope, Exit.void))) }
          : { _tag: "Sql", conn: yield* sql.reserve.pipe(Scope.provide(scope), Effect.onError(() => Scope.close(scope, Exit.void))) }
      const lane: Lane = { via, scope, held: new Set(), lost: yield* Deferred.make<void>(), token: randomUUID(), renewedAt: performance.now(), answeredAt: 0, dead: false, watchdog: undefined, nextPingAt: 0, onDeath: new Set() }
      yield* onConnectionEnd(lane)
      return lane
    })

    /**
     * Kills the lane as soon as the driver reports its connection ended or broken (a terminated
     * backend, a cut socket), so `slot.lost` completes within moments instead of at the next ping;
     * the listeners come off as the client goes back to the pool (in one step).
     */
    const onConnectionEnd = (lane: Lane) =>
      Effect.suspend(() => {
        // the provider's `pg` client (see `pg/Driver.ts`); a connection of the SqlClient gets the ping alone
        if (lane.via._tag !== "Driver") return Effect.void
        const client = lane.via.client
        const ended = () => void runFork(kill(lane))
        client.on("end", ended)
        client.on("error", ended)
        return Scope.addFinalizer(
          lane.scope,
          Effect.sync(() => {
            client.off("end", ended)
            client.off("error", ended)
            client.release()
          })
        )
      })

    /**
     * The release of slot `id` of `name` held by the lane `token`, as common table expressions: `r`
     * unlocks it under the name's guard (with `reset` not null, the session's `idle_session_timeout`
     * put back: the connection goes back to the pool); the slot's lock-delay marker is removed (a clean
     * release frees the slot at once).
     */
    const releaseCtes = (name: string, id: string, token: string, reset: string | null) => {
      const [g1, g2] = guardOf(name)
      const gone = markers
        ? sql`warp_marker_gone AS (DELETE FROM warp_semaphore_marker WHERE lock_id = ${id}::bigint AND holder = ${token}::text), `
        : sql``
      return sql`${gone}r AS (
  SELECT pg_advisory_unlock(${id}::bigint) AS released,
         CASE WHEN ${reset}::text IS NULL THEN NULL ELSE set_config('idle_session_timeout', ${reset}::text, false) END AS deadline
  FROM (SELECT pg_advisory_xact_lock(${g1}::int, ${g2}::int)) AS guard
)`
    }

    /**
     * The release of slot `id` of `name` (held by the lane `token`) fused with the admission of a
     * claimed row, for `FusedRelease.carry`. Both names' guards are taken first, in one order for every
     * statement (two statements that each take two guards cannot wait for each other); the release
     * leaves the session's deadline to the end of the statement, which puts it back only when no slot
     * was taken; when the slot taken is the one released (same name, same index), its marker stays.
     */
    const admissionCtes = (name: string, id: string, token: string, claimed: Statement.Fragment) => {
      const [g1, g2] = guardOf(name)
      const key = sql`(c.metadata #>> '{policies,concurrency,value,key}')`
      const lim = sql`(c.metadata #>> '{policies,concurrency,value,limit}')`
      const slotId = sql.literal(ADMIT_SLOT_ID)
      const gone = markers
        ? sql`, mark AS (
  INSERT INTO warp_semaphore_marker (lock_id, holder, until)
  SELECT id, ${token}::text, clock_timestamp() + ${deadlineMs}::float8 * interval '1 millisecond' FROM scan WHERE got
  ON CONFLICT (lock_id) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
  WHERE ${sql.literal(MARKER_STALE)}
), warp_marker_gone AS (
  DELETE FROM warp_semaphore_marker WHERE lock_id = ${id}::bigint AND holder = ${token}::text
    AND NOT EXISTS (SELECT 1 FROM scan WHERE got AND scan.id = ${id}::bigint)
)`
        : sql``
      const ctes = sql`adm AS MATERIALIZED (
  SELECT ${LOCK_PREFIX}::text || ${key} AS name, l.lim, floor(random() * l.lim)::int AS off
  FROM ${claimed} c
  CROSS JOIN LATERAL (SELECT CASE WHEN c.admin_key IS NOT DISTINCT FROM ${key} AND c.admin_slots IS NOT NULL THEN c.admin_slots
                                  WHEN ${lim} ~ '^[1-9][0-9]{0,3}$' THEN ${lim}::int END AS lim) l
  WHERE (c.metadata #>> '{policies,concurrency,value,mode}') = 'Wait' AND (c.metadata #> '{policies,concurrency,value,total}') IS NULL
    AND ${key} IS NOT NULL AND l.lim BETWEEN 1 AND ${SCAN_ALL}
  ORDER BY c.priority DESC, c.schedule_time, c.id
  LIMIT 1
), guards AS MATERIALIZED (
  SELECT count(pg_advisory_xact_lock(x.k1, x.k2)) AS n FROM (
    SELECT k1, k2 FROM (
      SELECT ${g1}::int AS k1, ${g2}::int AS k2
      UNION SELECT ${sql.literal(ADMIT_GUARD[0])}, ${sql.literal(ADMIT_GUARD[1])} FROM adm
    ) u ORDER BY k1, k2
  ) x
), scan(i, got, id) AS (
  SELECT -1, false, NULL::bigint FROM adm, guards
  UNION ALL
  SELECT s.i + 1,
         CASE WHEN NOT pg_try_advisory_lock(${slotId}) THEN false${
           markers
             ? sql`
              WHEN warp_semaphore_marker_blocks(${slotId}, ${token}::text)
              THEN NOT pg_advisory_unlock(${slotId})`
             : sql``
         }
              ELSE true END,
         ${slotId}
  FROM scan s, adm WHERE NOT s.got AND s.i + 1 < adm.lim
)${gone}, r AS (
  SELECT pg_advisory_unlock(${id}::bigint) AS released FROM guards
)`
      const columns = sql`(
  SELECT (SELECT released FROM r) AS released, t.name AS warp_admit_name, t.id::text AS warp_admit_id, t.idx AS warp_admit_index,
         t.fence AS warp_admit_fence,
         CASE WHEN ${sessionDeadline}::text IS NULL THEN NULL
              ELSE set_config('idle_session_timeout', CASE WHEN t.id IS NULL THEN ${resetDeadline ?? "0"}::text ELSE ${sessionDeadline}::text END, false) END AS warp_deadline
  FROM (SELECT 1) one LEFT JOIN (
    SELECT adm.name, sc.id, (adm.off + sc.i) % adm.lim AS idx, CASE WHEN ${fencing}::boolean THEN nextval('warp_semaphore_fence')::text END AS fence
    FROM scan sc, adm WHERE sc.got
  ) t ON true
)`
      return { ctes, columns }
    }

    /**
     * The lock-delay marker of a slot whose lane died, dropped once its holder has stopped (the scope
     * releasing it closes after the handler ended): the slot is free again at once instead of when the
     * marker expires. Through the pool, in the background (the release does not wait): each try is
     * bounded and left behind at its timeout (a pool that cannot reach the server, a new connection
     * hanging in connect, is not awaited), and tries go on for at most one deadline — the pool's
     * connections may have died with the lane's, and it reconnects meanwhile; past that the marker has
     * expired anyway.
     */
    const forget = (lane: Lane, id: string): Effect.Effect<void> =>
      markers
        ? Effect.asVoid(
            Effect.forkDetach(
              Effect.suspend(() => (pool !== undefined ? pool.query(FORGET, [id, lane.token]) : sql.unsafe(FORGET, [id, lane.token]))).pipe(
                // left behind at its timeout: it runs on in a fiber of its own
                (once) => Effect.flatMap(Effect.forkDetach(once), Fiber.join),
                Effect.timeout(quarter),
                Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo({ duration: Duration.millis(deadlineMs) }))),
                Effect.ignore,
                Effect.interruptible
              )
            )
          )
        : Effect.void

    /** Drops whatever the connection still holds and gives it back to the pool. */
    const dispose = (lane: Lane) =>
      query(lane, resetDeadline === null ? UNLOCK_ALL : UNLOCK_ALL_RESET, resetDeadline === null ? [] : [resetDeadline]).pipe(Effect.ignore, Effect.andThen(Scope.close(lane.scope, Exit.void)))

    /** The connection is unusable or its locks are in doubt: its slots are lost. */
    const kill = (lane: Lane): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (lane.dead) return Effect.void
        lane.dead = true
        watched.delete(lane)
        for (const f of lane.onDeath) f()
        lane.onDeath.clear()
        const watchdog = lane.watchdog
        lane.watchdog = undefined
        return Deferred.succeed(lane.lost, undefined).pipe(
          Effect.andThen(Effect.forkDetach(dispose(lane))),
          // the ping in flight is interrupted without waiting for it
          Effect.andThen(Effect.sync(() => watchdog?.interruptUnsafe()))
        )
      })

    /**
     * Pings the connection — renewing the lane's lock-delay markers while it holds slots; a failed or
     * late ping kills the lane. The ping itself is never interrupted.
     */
    const ping = (lane: Lane) =>
      Effect.suspend(() => {
        const sent = performance.now()
        return Effect.forkDetach(markers && lane.held.size > 0 ? query(lane, RENEW, [lane.token, deadlineMs, `{${[...lane.held].join(",")}}`]) : query(lane, "SELECT 1", [])).pipe(
          Effect.flatMap((f) => {
            const answer = Effect.timeoutOrElse(Fiber.join(f), { duration: pingTimeout, orElse: () => Effect.fail("ping timed out") })
            // a timeout that fires far later than it was due means this process was paused (stopped, a
            // long GC) while the ping was out, not that the server was slow: the answer may already wait
            // in the socket, so it gets one more timeout from now (a session that died meanwhile fails
            // it at once)
            return Effect.catchIf(answer, () => performance.now() - sent > 2 * Duration.toMillis(pingTimeout) + 100, () => answer)
          }),
          Effect.tap(() =>
            Effect.sync(() => {
              lane.renewedAt = Math.max(lane.renewedAt, sent)
              lane.answeredAt = Math.max(lane.answeredAt, sent)
            })
          )
        )
      })

    /**
     * The watchdog: one fiber for every lane of the provider, waking every quarter of `pingInterval`,
     * pings each watched lane `pingInterval` after its last ping ended (one ping in flight per lane);
     * a failed or late ping kills the lane. One fiber per provider rather than one per held slot: a
     * fiber forked and interrupted per acquisition cost CPU on every keyed attempt, while most slots
     * are released long before their first ping is due.
     */
    const watched = new Set<Lane>()
    const pingEveryMs = Duration.toMillis(pingEvery)
    const pingTask = (lane: Lane) =>
      ping(lane).pipe(
        Effect.matchEffect({
          onFailure: () =>
            Effect.suspend(() => {
              lane.watchdog = undefined
              return kill(lane)
            }),
          onSuccess: () =>
            Effect.sync(() => {
              lane.watchdog = undefined
              lane.nextPingAt = performance.now() + pingEveryMs
            })
        }),
        Effect.interruptible
      )
    const tick = Effect.suspend(() => {
      const now = performance.now()
      for (const lane of watched) {
        if (lane.dead) watched.delete(lane)
        else if (lane.watchdog === undefined && now >= lane.nextPingAt) {
          const fiber = runFork(pingTask(lane))
          if (fiber.pollUnsafe() === undefined) lane.watchdog = fiber
        }
      }
      return handedOver.size === 0 ? Effect.void : sweepHandedOver
    })
    yield* Effect.forkScoped(Effect.interruptible(Effect.forever(Effect.andThen(Effect.sleep(Duration.millis(Math.max(1, pingEveryMs / 4))), tick))))

    /** The lane is pinged from now on, first `pingInterval` from now. */
    const watch = (lane: Lane) =>
      Effect.sync(() => {
        lane.nextPingAt = performance.now() + pingEveryMs
        watched.add(lane)
      })

    /** The lane is no longer pinged; a ping in flight is interrupted (the query itself runs to its end). */
    const unwatch = (lane: Lane) =>
      Effect.suspend(() => {
        watched.delete(lane)
        const watchdog = lane.watchdog
        lane.watchdog = undefined
        return watchdog === undefined ? Effect.void : Fiber.interrupt(watchdog)
      })

    /** Runs the guarded scan over the lane's candidate slots; returns the slot index taken and its fencing token. */
    const scanLane = (
      lane: Lane,
      name: string,
      ids: ReadonlyArray<string>
    ): Effect.Effect<
      Option.Option<{ readonly index: number; readonly fence: bigint | undefined; readonly lapsed: Effect.Effect<boolean>; readonly heldThrough: Effect.Effect<Effect.Effect<boolean | undefined>> }>,
      SemaphoreError
    > => {
      const sentAt = performance.now()
      const free: Array<number> = []
      for (let i = 0; i < ids.length; i++) if (!lane.held.has(ids[i]!)) free.push(i)
      if (free.length === 0) return Effect.succeed(Option.none())
      const [g1, g2] = guardOf(name)
      const candidates =
        free.length === ids.length && idCache.get(name) === ids ? arrayLiteral(name, ids) : `{${free.map((i) => ids[i]).join(",")}}`
      return query(lane, markers ? SCAN_MARKED : SCAN_PLAIN, [candidates, randomOffset(free.length), free.length, g1, g2, sessionDeadline, fencing, lane.token, deadlineMs, tcpDeadline, keepaliveCount]).pipe(
        Effect.tapError(() => kill(lane)),
        Effect.mapError(fail(name, "advisory lock scan failed")),
        Effect.map((rows) => {
          if (rows.length === 0) return Option.none()
          const row = rows[0] as { position: number; fence: string | null }
          const index = free[Number(row.position)]!
          lane.held.add(ids[index]!)
          // the holder-side deadline: the lane is gone, or no renewal was sent within three quarters of
          // the deadline (the server frees the slot one deadline after it at the earliest) and the
          // session does not answer now. A session that answers has lived throughout — its locks with
          // it, so nobody else can have taken the slot — and the answer renews the markers.
          const lapsed = lapsedCheck(lane, sentAt)
          lane.answeredAt = Math.max(lane.answeredAt, sentAt)
          return Option.some({ index, fence: row.fence === null ? undefined : BigInt(row.fence), lapsed, heldThrough: heldThroughOf(lane, sentAt) })
        })
      )
    }

    /**
     * Unlocks one slot under its guard and removes its marker; `last`: the connection goes back to the
     * pool, its deadline is put back. On a dead lane (its locks are gone with it), or one that dies
     * now, only the marker is removed, through the pool: the holder has stopped, since its scope is
     * releasing the slot.
     */
    const unlock = (lane: Lane, name: string, id: string, last: boolean): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (lane.dead) return forget(lane, id)
        const sent = performance.now()
        // the marker's removal is committed asynchronously (a crash may lose it: the slot then waits for
        // the marker to expire, never the other way round); a fused finalize commits as the store's write does
        const [text, params] = sql`WITH ${releaseCtes(name, id, lane.token, last ? resetDeadline : null)}
SELECT released, ${markers} AND set_config('synchronous_commit', 'off', true) IS NOT NULL AS async FROM r`.compile()
        return query(lane, text, params).pipe(
          Effect.matchEffect({
            onFailure: () => Effect.andThen(kill(lane), forget(lane, id)),
            onSuccess: () =>
              Effect.sync(() => {
                lane.held.delete(id)
                lane.answeredAt = Math.max(lane.answeredAt, sent)
              })
          })
        )
      })

    /**
     * Slot `id` (`index` of `name`) held on `lane`, which holds it alone (default mode): its `Held`. The
     * release unlocks it (unless a store's finalizing statement did) and gives the connection back once
     * the lane holds nothing (a slot handed over by that statement may hold it on).
     */
    const holding = (
      lane: Lane,
      name: string,
      id: string,
      index: number,
      fence: bigint | undefined,
      lapsed: Effect.Effect<boolean>,
      heldThrough: Effect.Effect<Effect.Effect<boolean | undefined>>
    ): Held => {
      // this slot is held until it is unlocked: by `unlock`, or by a store's finalizing statement
      let mine = true
      const holds = () => mine && !lane.dead && lane.held.has(id)
      const release = Effect.gen(function* () {
        if (lane.dead) return yield* mine ? forget(lane, id) : Effect.void
        if (holds()) yield* unlock(lane, name, id, true)
        mine = false
        if (!lane.dead && lane.held.size === 0) {
          yield* unwatch(lane)
          yield* Scope.close(lane.scope, Exit.void)
        }
      })
      // its `fusedRelease` is set below, once the release it offers is built
      const slot: { -readonly [K in keyof Slot]: Slot[K] } = { name, index, lost: Deferred.await(lane.lost), fence, lapsed, heldThrough }
      const runOnLane = (text: string, params: ReadonlyArray<unknown>) =>
        Effect.suspend(() => {
          if (!holds()) return Effect.failSync(() => new SemaphoreError({ name, message: "slot no longer held" }))
          const failed = (cause: unknown) => new SemaphoreError({ name, message: "finalizing statement failed on the slot connection", cause })
          const lostMeanwhile = () => new SemaphoreError({ name, message: "slot connection lost during the finalizing statement" })
          const via = lane.via
          const sent = performance.now()
          // the statement itself is never interrupted (see the module note); a lane lost meanwhile ends
          // the wait. On the driver's client, one callback each (no fiber); else a race of two fibers
          // (made interruptible: a finalizing write runs uninterruptibly, and the race awaits its loser)
          const outcome =
            via._tag === "Driver"
              ? Effect.callback<ReadonlyArray<unknown>, SemaphoreError>((resume) => {
                  let finished = false
                  const onDeath = () => {
                    if (finished) return
                    finished = true
                    resume(Effect.fail(lostMeanwhile()))
                  }
                  // a lane that died since `holds()` was asked has run its death callbacks already
                  if (lane.dead) return onDeath()
                  lane.onDeath.add(onDeath)
                  queryNamed(via.client, text, params, (err, rows) => {
                    lane.onDeath.delete(onDeath)
                    // an error the server sent about the statement (not about the session): the session
                    // was alive after the statement was sent
                    if (err !== undefined && serverAnswered(err)) lane.answeredAt = Math.max(lane.answeredAt, sent)
                    if (finished) return
                    finished = true
                    resume(err !== undefined ? Effect.fail(failed(err)) : Effect.succeed(rows))
                  })
                  return Effect.sync(() => {
                    finished = true
                    lane.onDeath.delete(onDeath)
                  })
                })
              : Effect.flatMap(Effect.forkDetach(query(lane, text, params)), (f) =>
                  Effect.raceFirst(
                    Effect.interruptible(Effect.mapError(Fiber.join(f), failed)),
                    Effect.interruptible(Effect.andThen(Deferred.await(lane.lost), Effect.failSync(lostMeanwhile)))
                  )
                )
          return outcome.pipe(
            Effect.tapError(() => kill(lane)),
            Effect.tap(() =>
              Effect.sync(() => {
                mine = false
                lane.held.delete(id)
                lane.answeredAt = Math.max(lane.answeredAt, sent)
              })
            )
          )
        })
      const fusedOnce: FusedRelease = {
        client: sql,
        statement: releaseCtes(name, id, lane.token, resetDeadline),
        run: runOnLane,
        carry: (claimed) => {
          const sentAt = performance.now()
          return {
            ...admissionCtes(name, id, lane.token, claimed),
            run: (text, params) =>
              Effect.map(runOnLane(text, params), (rows) => {
                const row = rows[0] as { warp_admit_name?: string | null; warp_admit_id?: string | null; warp_admit_index?: number | null; warp_admit_fence?: string | null } | undefined
                if (row?.warp_admit_name != null && row.warp_admit_id != null && row.warp_admit_index != null) {
                  adopt(lane, row.warp_admit_name, String(row.warp_admit_id), Number(row.warp_admit_index), row.warp_admit_fence == null ? undefined : BigInt(row.warp_admit_fence), sentAt)
                }
                return rows
              })
          }
        }
      }
      slot.fusedRelease = () => (holds() ? fusedOnce : undefined)
      return { slot, release }
    }

    /**
     * `Slot.heldThrough` of a slot taken by a statement sent at `sentAt` on `lane`: whether nobody else
     * can have been granted it between then and the run's end (`at`, noted when this is run).
     * - A statement sent on the slot's session at or after `at` was answered: the session lived past
     *   `at`, and a session's advisory lock is freed only with it (or by this holder's release, which
     *   comes after the run), so the lock was held throughout. This is the only proof without lock-delay:
     *   the server frees a dead session's lock at once, and the holder hears of the death only later,
     *   so a death noticed after the end may have happened before it.
     * - With lock-delay markers, also: `at` came within three quarters of the deadline after the last
     *   renewal (or the acquisition) was sent. The marker then still blocked the slot (it expires one
     *   deadline after that at the earliest, and a dead lane's marker is dropped only once its holder's
     *   scope releases the slot, after the run), so whether the session died before or after `at`, no
     *   scan could grant the slot before it — the lapse rule, at the run's end. A marker is written
     *   with asynchronous commit: a server that crashes and is back before the run ends may have
     *   forgotten it, the residual the lapse check already carries (a holder paused across a crash).
     */
    const heldThroughOf = (lane: Lane, sentAt: number): Effect.Effect<Effect.Effect<boolean | undefined>> =>
      Effect.sync(() => {
        const at = performance.now()
        return Effect.sync(() =>
          lane.answeredAt >= at || (markers && at - Math.max(sentAt, lane.renewedAt) < lapseAfterMs) ? true : lane.dead ? false : undefined
        )
      })

    /**
     * The holder-side deadline of a slot taken by a statement sent at `sentAt` on `lane` (see
     * `scanLane`): passed with no renewal, and the session does not answer now. A lane that died within
     * the deadline has not lapsed: its slot was lost, which `lost` and `heldThrough` tell.
     */
    const lapsedCheck = (lane: Lane, sentAt: number): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        const withinDeadline = performance.now() - Math.max(sentAt, lane.renewedAt) < lapseAfterMs
        if (lane.dead) return Effect.succeed(!withinDeadline)
        if (withinDeadline) return Effect.succeed(false)
        return ping(lane).pipe(
          Effect.map(() => lane.dead),
          Effect.catch(() => Effect.as(kill(lane), true))
        )
      })

    /**
     * Slots taken for a claimed job by the finalizing statement that claimed it (see
     * `FusedRelease.carry`), by name, until an attempt of this process asks for a slot of that name
     * (`tryAcquire` hands it over when its index is under the limit asked) or they are left unasked for
     * `ADOPT_WITHIN_MS` (then released).
     */
    const handedOver = new Map<string, Array<HandedOver>>()
    const adopt = (lane: Lane, name: string, id: string, index: number, fence: bigint | undefined, sentAt: number) => {
      lane.held.add(id)
      const list = handedOver.get(name) ?? []
      list.push({ lane, id, index, fence, sentAt, at: performance.now() })
      handedOver.set(name, list)
    }
    /** A slot handed over for `name` usable at `limit`, as held; none when there is none (or its lane died). */
    const takeHandedOver = (name: string, limit: number): Effect.Effect<Option.Option<Held>> =>
      Effect.suspend(() => {
        const list = handedOver.get(name)
        if (list === undefined) return Effect.succeed(Option.none())
        const at = list.findIndex((h) => h.index < limit)
        if (at < 0) return Effect.succeed(Option.none())
        const [h] = list.splice(at, 1)
        if (list.length === 0) handedOver.delete(name)
        if (h!.lane.dead) return Effect.as(dropHandedOver(name, h!), Option.none())
        return Effect.succeed(Option.some(holding(h!.lane, name, h!.id, h!.index, h!.fence, lapsedCheck(h!.lane, h!.sentAt), heldThroughOf(h!.lane, h!.sentAt))))
      })
    /** Releases a handed-over slot nobody took (or whose lane died). */
    const dropHandedOver = (name: string, h: HandedOver) =>
      holding(h.lane, name, h.id, h.index, h.fence, Effect.succeed(true), Effect.succeed(Effect.succeed(false))).release
    /** Releases the handed-over slots left unasked for `ADOPT_WITHIN_MS` (from the watchdog's tick). */
    const sweepHandedOver = Effect.suspend(() => {
      const now = performance.now()
      const stale: Array<Effect.Effect<void>> = []
      for (const [name, list] of handedOver) {
        for (let i = list.length - 1; i >= 0; i--) {
          const h = list[i]!
          if (h.lane.dead || now - h.at > ADOPT_WITHIN_MS) {
            list.splice(i, 1)
            stale.push(dropHandedOver(name, h))
          }
        }
        if (list.length === 0) handedOver.delete(name)
      }
      return stale.length === 0 ? Effect.void : Effect.asVoid(Effect.forkDetach(Effect.all(stale, { discard: true })))
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
        const { fence, heldThrough, index, lapsed } = taken.value
        yield* watch(lane)
        return Option.some(holding(lane, name, ids[index]!, index, fence, lapsed, heldThrough))
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
            ({ fence, heldThrough, index, lapsed }): Held => ({
              slot: { name, index, lost: Deferred.await(current.lost), fence, lapsed, heldThrough },
              release: entry.mutex(unlock(current, name, ids[index]!, false))
            })
          )
        })
      )
    }

    // slots taken for claimed jobs that no attempt asked for yet: released with the provider
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        const left = [...handedOver].flatMap(([name, list]) => list.map((h) => dropHandedOver(name, h)))
        handedOver.clear()
        return Effect.all(left, { discard: true })
      })
    )

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
                unwatch(lane),
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
        Effect.andThen(
          validateLimit(name, limit),
          Effect.suspend(() => {
            const scan = limit > SCAN_ALL ? attemptWindows(name, limit) : attempt(name, slotIds(name, limit))
            // a slot a finalizing statement took for a claimed job of this name, if one covers the limit
            const first = Effect.suspend(() =>
              handedOver.has(name) ? Effect.flatMap(takeHandedOver(name, limit), (h) => (Option.isSome(h) ? Effect.succeed(h) : scan)) : scan
            )
            return acquireWith(first, timeout, every)
          })
        )
    }
    return service
  })

/**
 * The PostgreSQL provider Layer over the `SqlClient` in context. Its slot connections come from a pool
 * of its own (see the module note) that must hold one connection per held slot, or
 * `multiplex.connections` connections when multiplexing (its size: the `PgClient`'s `maxConnections`,
 * or `connection.maxConnections`).
 */
export const layer = (options: PgProviderOptions = {}): Layer.Layer<SemaphoreProvider, never, SqlClient.SqlClient> =>
  Layer.effect(SemaphoreProvider, make(options))
