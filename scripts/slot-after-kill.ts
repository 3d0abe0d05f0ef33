/**
 * How long a slot stays unusable after its holder process is killed with SIGKILL: a child process takes
 * the slot of a fresh name and holds it (its pings / heartbeats running), is killed, and this process
 * asks for the slot every 10 ms until it gets it. Printed per provider: every try and the median, from
 * the kill to the grant. A figure, not a test.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx scripts/slot-after-kill.ts [tries=5] [deadlineMs=2000]
 *
 * - PostgreSQL with lock-delay: the server frees the lock at once (the socket closes with the process),
 *   but the marker keeps the slot until `deadline` after the holder's last renewal (pings every quarter
 *   of it at most, so between 3/4 of the deadline and the deadline after the kill);
 * - PostgreSQL without lock-delay: free as soon as the server notices the closed connection;
 * - Redis (a private redis-server, nothing on disk): the lease (`deadlineMs` here) runs out.
 *
 * Creates a database `warp_kill_<random>` on that server and drops it at the end.
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import pg from "pg"
import { SemaphoreProvider } from "../src/internal/semaphore/SemaphoreProvider.js"
import * as SemaphoreProviderPg from "../src/internal/semaphore/SemaphoreProviderPg.js"
import * as SemaphoreProviderRedis from "../src/internal/semaphore/SemaphoreProviderRedis.js"
import * as PrivateRedis from "../test/support/faults/PrivateRedis.js"

type Kind = "pg" | "pg-no-lock-delay" | "redis"

const providerLayer = (kind: Kind, target: string, deadlineMs: number): Layer.Layer<SemaphoreProvider, unknown> =>
  kind === "redis"
    ? SemaphoreProviderRedis.layer({ redis: target, prefix: "warp:kill:", lease: Duration.millis(deadlineMs) })
    : SemaphoreProviderPg.layer({ deadline: Duration.millis(deadlineMs), lockDelay: kind === "pg" }).pipe(
        Layer.provide(PgClient.layer({ url: Redacted.make(target), maxConnections: 4 }))
      )

const withProvider = <A>(kind: Kind, target: string, deadlineMs: number, f: (p: SemaphoreProvider["Type"]) => Effect.Effect<A, unknown, Scope.Scope>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Effect.map(Layer.build(providerLayer(kind, target, deadlineMs)), Context.get(SemaphoreProvider)), f)))

const [, , mode, ...rest] = process.argv

if (mode === "hold") {
  // the child: take the slot, say so, hold it until killed
  const [kind, target, name, deadline] = rest as [Kind, string, string, string]
  await withProvider(kind, target, Number(deadline), (p) =>
    Effect.gen(function* () {
      const slot = yield* p.tryAcquire(name, 1, "10 seconds")
      if (Option.isNone(slot)) return yield* Effect.die("no slot")
      process.stdout.write("HELD\n")
      return yield* Effect.never
    })
  )
} else {
  const tries = Number(mode ?? 5)
  const deadlineMs = Number(rest[0] ?? 2_000)
  const base = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
  const db = `warp_kill_${Math.random().toString(36).slice(2, 8)}`
  const admin = new pg.Client({ connectionString: base })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${db}`)
  const u = new URL(base)
  u.pathname = `/${db}`
  const redis = await PrivateRedis.start()
  const self = fileURLToPath(import.meta.url)
  const median = (xs: ReadonlyArray<number>) => {
    const s = [...xs].sort((a, b) => a - b)
    return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
  }
  try {
    for (const kind of ["pg", "pg-no-lock-delay", "redis"] as const) {
      const target = kind === "redis" ? redis.url : u.toString()
      const figures: Array<number> = []
      await withProvider(kind, target, deadlineMs, (p) =>
        Effect.gen(function* () {
          for (let i = 0; i < tries; i++) {
            const name = `kill-${kind}-${i}-${Math.random().toString(36).slice(2, 6)}`
            const child = spawn(process.execPath, ["--import", "tsx", self, "hold", kind, target, name, String(deadlineMs)], {
              stdio: ["ignore", "pipe", "inherit"]
            })
            yield* Effect.promise(
              () =>
                new Promise<void>((resolve, reject) => {
                  child.stdout!.on("data", (d: Buffer) => d.toString().includes("HELD") && resolve())
                  child.once("exit", (code) => reject(new Error(`holder exited (${code}) before holding`)))
                })
            )
            // let a few renewals pass, at a random point of the renewal cycle
            yield* Effect.sleep(Duration.millis(500 + Math.floor(Math.random() * deadlineMs) / 4))
            const killedAt = performance.now()
            child.kill("SIGKILL")
            let got = false
            while (!got) {
              got = yield* Effect.scoped(Effect.map(p.tryAcquire(name, 1, 0), Option.isSome))
              if (!got) yield* Effect.sleep("10 millis")
            }
            figures.push(performance.now() - killedAt)
          }
        })
      )
      const ms = figures.map((f) => Math.round(f))
      console.log(`${kind} (${kind === "redis" ? "lease" : "deadline"} ${deadlineMs} ms): slot usable again ${ms.join(", ")} ms after SIGKILL; median ${Math.round(median(figures))} ms`)
    }
  } finally {
    await redis.stop()
    await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
    await admin.end()
  }
}
