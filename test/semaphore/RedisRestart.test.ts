/**
 * A Redis that restarts without persistence forgets every lease while their holders still run. The
 * provider grants nothing while the server's uptime is below one lease, so the holder from before the
 * restart is told its slot is lost before anyone else can take it: never two holders of a Mutex.
 * Runs its own redis-server (killed with SIGKILL and started again on the same port).
 */
import { describe, expect, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import { SemaphoreProvider } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { freePort } from "../../src/internal/testing/EmbeddedPostgres.js"
import { SemaphoreProviderRedis } from "warp-effect/redis"

/** A private redis-server that keeps nothing on disk; ready once it answers PING. */
const startRedis = (port: number) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" })
      const probe = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 })
      probe.on("error", () => {})
      for (;;) {
        try {
          if (probe.status !== "ready") await probe.connect()
          if ((await probe.ping()) === "PONG") break
        } catch {
          await new Promise((r) => setTimeout(r, 50))
        }
      }
      probe.disconnect()
      return child
    }),
    (child: ChildProcess) =>
      Effect.callback<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        child.once("exit", () => resume(Effect.void))
        child.kill("SIGKILL")
      })
  )

const provider = (port: number) =>
  Effect.map(
    Layer.build(SemaphoreProviderRedis.layer({ redis: { host: "127.0.0.1", port }, lease: "1500 millis", heartbeat: "500 millis" })),
    Context.get(SemaphoreProvider)
  )

const hasRedis = await new Promise<boolean>((resolve) => {
  const p = spawn("redis-server", ["--version"], { stdio: "ignore" })
  p.on("error", () => resolve(false))
  p.on("exit", (code) => resolve(code === 0))
})

describe.skipIf(!hasRedis)("Redis provider across a Redis restart without persistence", () => {
  it.live(
    "grants nothing until one lease after the restart: the holder from before it is told its slot is lost first",
    () =>
      Effect.gen(function* () {
        const port = yield* Effect.promise(freePort)
        const serverScope = yield* Scope.make()
        yield* Scope.provide(startRedis(port), serverScope)
        const holder = yield* provider(port)
        // a fresh server is young too: the first grant waits until its uptime reaches the lease
        const slot = Option.getOrThrow(yield* holder.tryAcquire("k", 1, "10 seconds"))
        const lostAt = yield* Deferred.make<number>()
        yield* Effect.forkScoped(Effect.flatMap(slot.lost, () => Deferred.succeed(lostAt, Date.now())))

        // the server dies and comes back empty while the holder's slot is still open (its handler runs on)
        yield* Scope.close(serverScope, Exit.void)
        yield* startRedis(port)
        const other = yield* provider(port)
        const refused = yield* Effect.result(Effect.scoped(other.tryAcquire("k", 1, 0)))
        expect(Result.isFailure(refused) && refused.failure.message).toMatch(
          /^Redis restarted \d+ s ago: no slot is granted until one lease \(1500 ms\) has passed since its start/
        )
        const taken = yield* other.tryAcquire("k", 1, "20 seconds")
        const grantedAt = Date.now()
        expect(Option.isSome(taken)).toBe(true)
        // the old holder knew before the new one got in
        const lost = yield* Deferred.poll(lostAt)
        expect(Option.isSome(lost)).toBe(true)
        expect(yield* Option.getOrThrow(lost)).toBeLessThan(grantedAt)
      }).pipe(Effect.scoped),
    60_000
  )
})
