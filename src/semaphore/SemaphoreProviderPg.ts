/**
 * The PostgreSQL semaphore provider: session-level advisory locks.
 *
 * - Slots of `name` at limit N are the locks `name:0` .. `name:{N-1}` (64-bit ids from a SHA-256 of
 *   the slot name). One statement scans them from a random offset and takes the first free one — a
 *   recursive CTE, so it never takes more than one.
 * - A held slot keeps its own connection checked out (`sql.reserve`) until release; a connection
 *   that dies frees its lock in PostgreSQL, and a ping every `pingInterval` notices the loss and
 *   completes `slot.lost` so the holder stops.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import { lockId } from "./lockId.js"
import { pollUntil, randomOffset, SemaphoreError, SemaphoreProvider, type SemaphoreProviderService, type Slot, slotName } from "./SemaphoreProvider.js"

/** Options of the PostgreSQL provider. */
export interface PgProviderOptions {
  /** How often a held slot's connection is checked (default 1 second). */
  readonly pingInterval?: Duration.DurationInput
  /** How often a waiting `tryAcquire` retries (default 10 ms). */
  readonly retryInterval?: Duration.DurationInput
}

const SCAN = `
WITH RECURSIVE scan(i, got) AS (
  SELECT 0, pg_try_advisory_lock(($1::bigint[])[1 + ($2::int % $3::int)])
  UNION ALL
  SELECT i + 1, pg_try_advisory_lock(($1::bigint[])[1 + (($2::int + i + 1) % $3::int)])
  FROM scan WHERE NOT got AND i + 1 < $3::int
)
SELECT ($2::int + i) % $3::int AS slot FROM scan WHERE got`

/** Builds the provider on the `SqlClient` in context. */
export const make = (options: PgProviderOptions = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ping = Duration.decode(options.pingInterval ?? "1 second")
    const every = options.retryInterval ?? "10 millis"
    const fail = (name: string, message: string) => (cause: unknown) => new SemaphoreError({ name, message, cause })

    const acquireOnce = (name: string, limit: number, ids: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const connScope = yield* Scope.make()
        const conn = yield* sql.reserve.pipe(Scope.extend(connScope), Effect.mapError(fail(name, "could not reserve a connection")))
        const rows = yield* conn.executeUnprepared(SCAN, [`{${ids.join(",")}}`, randomOffset(limit), limit], undefined).pipe(
          Effect.mapError(fail(name, "advisory lock scan failed")),
          Effect.onError(() => Scope.close(connScope, Exit.void))
        )
        if (rows.length === 0) {
          yield* Scope.close(connScope, Exit.void)
          return Option.none<{ slot: Slot; release: Effect.Effect<void> }>()
        }
        const index = Number((rows[0] as any).slot)
        const lost = yield* Deferred.make<void>()
        // The ping is uninterruptible: interrupting a query in flight would make sql-pg send a
        // pg_cancel_backend, which could land on the unlock that follows.
        const watchdog = yield* Effect.sleep(ping).pipe(
          Effect.zipRight(Effect.uninterruptible(conn.executeUnprepared("SELECT 1", [], undefined))),
          Effect.forever,
          Effect.catchAll(() => Deferred.succeed(lost, undefined)),
          // forked from an acquire (uninterruptible) region: the watchdog itself must be interruptible
          Effect.interruptible,
          Effect.forkDaemon
        )
        const release = Effect.gen(function* () {
          yield* Fiber.interrupt(watchdog)
          yield* conn.executeUnprepared("SELECT pg_advisory_unlock($1::bigint)", [ids[index]], undefined).pipe(Effect.ignore)
          yield* Scope.close(connScope, Exit.void)
        })
        return Option.some({ slot: { name, index, lost: Deferred.await(lost) }, release })
      })

    const service: SemaphoreProviderService = {
      tryAcquire: (name, limit, timeout) => {
        if (!Number.isInteger(limit) || limit < 1) {
          return Effect.fail(new SemaphoreError({ name, message: `limit must be an integer >= 1, got ${limit}` }))
        }
        const ids = Array.from({ length: limit }, (_, i) => lockId(slotName(name, i)))
        return Effect.acquireRelease(pollUntil(acquireOnce(name, limit, ids), timeout, every), (held) =>
          Option.match(held, { onNone: () => Effect.void, onSome: (h) => h.release })
        ).pipe(Effect.map(Option.map((h) => h.slot)))
      }
    }
    return service
  })

/** The PostgreSQL provider Layer. Requires a `SqlClient` whose pool can hold one connection per held slot. */
export const layer = (options: PgProviderOptions = {}): Layer.Layer<SemaphoreProvider, never, SqlClient.SqlClient> =>
  Layer.effect(SemaphoreProvider, make(options))
