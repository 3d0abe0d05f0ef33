/**
 * A holder cut off from PostgreSQL by a connection that stops forwarding without closing anything (a
 * partition, a dropped NAT mapping, a stuck proxy) must not freeze its key: the server ends the
 * holder's session within the provider's deadline (idle_session_timeout on slot connections), and the
 * holder is told its slot is lost before anyone else gets it.
 */
import { describe, expect, it } from "@effect/vitest"
import { createServer, type Server, type Socket, connect } from "node:net"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { SemaphoreProvider } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { SemaphoreProviderPg } from "warp-effect"
import { sharedDatabase } from "./pg.js"

const db = sharedDatabase()

/** A TCP proxy to `target` whose `stall()` stops forwarding in both directions, closing nothing. */
const stallingProxy = (target: URL) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly port: number; readonly stall: () => void; readonly server: Server; readonly sockets: Set<Socket> }>((resume) => {
      let stalled = false
      const sockets = new Set<Socket>()
      const server = createServer((client) => {
        const upstream = connect(Number(target.port || 5432), target.hostname)
        for (const s of [client, upstream]) {
          sockets.add(s)
          s.on("error", () => {})
        }
        client.on("data", (d) => void (stalled || upstream.write(d)))
        upstream.on("data", (d) => void (stalled || client.write(d)))
        client.on("close", () => upstream.destroy())
        upstream.on("close", () => client.destroy())
      })
      server.listen(0, "127.0.0.1", () =>
        resume(Effect.succeed({ port: (server.address() as { port: number }).port, stall: () => void (stalled = true), server, sockets }))
      )
    }),
    (p) =>
      Effect.sync(() => {
        for (const s of p.sockets) s.destroy()
        p.server.close()
      })
  )

const provider = (url: string, options: SemaphoreProviderPg.PgProviderOptions) =>
  Effect.map(
    Layer.build(
      SemaphoreProviderPg.layer(options).pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 4, idleTimeout: "30 seconds" })))
    ),
    Context.get(SemaphoreProvider)
  )

describe("PostgreSQL provider: a holder cut off from the server", () => {
  it.live("does not freeze its key: the server frees the slot within the deadline, after the holder was told", () =>
    Effect.gen(function* () {
      const url = new URL(yield* Effect.promise(db.url))
      const version = yield* Effect.flatMap(db.client, (c) => Effect.promise(() => c.query("SHOW server_version_num"))).pipe(Effect.scoped)
      if (Number(version.rows[0].server_version_num) < 140000) return // idle_session_timeout needs PostgreSQL 14
      const proxy = yield* stallingProxy(url)
      const viaProxy = new URL(url)
      viaProxy.hostname = "127.0.0.1"
      viaProxy.port = String(proxy.port)
      const deadline = { deadline: "2 seconds" } as const
      const holder = yield* provider(viaProxy.toString(), deadline)
      const other = yield* provider(url.toString(), deadline)
      const key = `cut:${Math.random().toString(36).slice(2)}`

      const slot = Option.getOrThrow(yield* holder.tryAcquire(key, 1, 0))
      const lostAt = yield* Deferred.make<number>()
      yield* Effect.forkScoped(Effect.flatMap(slot.lost, () => Deferred.succeed(lostAt, Date.now())))
      expect(Option.isNone(yield* Effect.scoped(other.tryAcquire(key, 1, 0)))).toBe(true)

      // the holder's connection goes silent: nothing is closed, nothing is forwarded
      proxy.stall()
      const taken = yield* other.tryAcquire(key, 1, "30 seconds")
      const grantedAt = Date.now()
      expect(Option.isSome(taken)).toBe(true)
      const lost = yield* Deferred.poll(lostAt)
      expect(Option.isSome(lost)).toBe(true)
      expect(yield* Option.getOrThrow(lost)).toBeLessThan(grantedAt)
    }).pipe(Effect.scoped), 60_000)
})
