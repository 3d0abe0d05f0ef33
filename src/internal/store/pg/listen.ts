/**
 * The PostgreSQL store's wake-up hints (see `../Wakeup.ts`): a `LISTEN` on the store's channel, on a
 * connection of its own (opened with the `PgClient`'s settings, outside its pool, so a small pool loses
 * nothing to it), held while at least one worker subscribes.
 *
 * A dropped connection fails @effect/sql-pg's notification queue; the listener then reconnects on an
 * exponential schedule, for as long as anyone subscribes, and publishes `Connected` once listening
 * again (and at the first connect): notifications sent meanwhile are lost, so the workers claim once
 * on it. Until then the workers' poll finds the due rows.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as PgConnection from "@effect/sql-pg/PgConnection"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import * as RcRef from "effect/RcRef"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import { channel, decode, type Wakeup } from "../Wakeup.js"

/** Reconnect attempts: 50 ms doubling, at most 2 s apart. */
export const reconnect = Schedule.min([Schedule.exponential("50 millis"), Schedule.spaced("2 seconds")])

/** The connection settings of `sql` when it is an @effect/sql-pg client; none for another client. */
const configOf = (sql: SqlClient.SqlClient): PgConnection.Config | undefined => {
  if (!(PgClient.TypeId in sql)) return undefined
  const config = (sql as unknown as PgClient.PgClient).config
  return typeof config === "object" && config !== null ? (config as PgConnection.Config) : undefined
}

/** A lost connection's reason, in a few words. */
const reasonOf = (e: unknown): string => {
  const cause = (e as { reason?: { cause?: { message?: unknown } } })?.reason?.cause?.message
  return typeof cause === "string" ? cause : e instanceof Error ? e.message : String(e)
}

/** One listening session: connects, listens, says `Connected`, and relays notifications until the connection drops (then succeeds). */
const session = (config: PgConnection.Config, hub: PubSub.PubSub<Wakeup>, drops: { n: number }) =>
  Effect.scoped(
    Effect.gen(function* () {
      const conn = yield* PgConnection.make(config)
      const queue = yield* conn.listen(channel)
      if (drops.n > 0) yield* Effect.logInfo(`warp: listening on '${channel}' again (after ${drops.n} lost connection(s))`)
      yield* PubSub.publish(hub, { _tag: "Connected" })
      // a failure of the queue is a lost connection: this session ends, and the next one starts
      return yield* Effect.forever(
        Effect.flatMap(Queue.takeAll(queue), (notes) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            PubSub.publishAll(hub, notes.flatMap((n) => decode(n.payload, now)))
          )
        )
      ).pipe(
        Effect.catch((e) =>
          Effect.sync(() => drops.n++).pipe(
            Effect.andThen(
              Effect.logWarning(`warp: lost the '${channel}' listener connection (${reasonOf(e)}); reconnecting (workers poll meanwhile)`)
            )
          )
        )
      )
    })
  )

/**
 * The subscription to the hints of the store on `sql`, or undefined when `sql` is not an @effect/sql-pg
 * client. The listener starts with the first subscriber and stops with the last (its connection closes).
 */
export const wakeups = (
  sql: SqlClient.SqlClient
): Effect.Effect<Effect.Effect<Stream.Stream<Wakeup>, never, Scope.Scope> | undefined, never, Scope.Scope> =>
  Effect.gen(function* () {
    const config = configOf(sql)
    if (config === undefined) return undefined
    const listener = yield* RcRef.make({
      acquire: Effect.gen(function* () {
        const hub = yield* Effect.acquireRelease(PubSub.unbounded<Wakeup>(), PubSub.shutdown)
        const drops = { n: 0 }
        yield* Effect.forkScoped(
          Effect.forever(
            session(config, hub, drops).pipe(
              Effect.retry(reconnect),
              // a connection that drops at once does not make a tight loop
              Effect.andThen(Effect.sleep("20 millis"))
            )
          )
        )
        return hub
      })
    })
    // subscribed before the listener's first `Connected` (its connect takes a round trip at least)
    return Effect.flatMap(RcRef.get(listener), (hub) => Effect.map(PubSub.subscribe(hub), Stream.fromSubscription))
  })
