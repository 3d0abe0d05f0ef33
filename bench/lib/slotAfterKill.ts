/**
 * How long a slot stays unusable after its holder process is killed with SIGKILL (bench scenario 12;
 * issue 23, item 7): a child process takes the slot of a fresh name and holds it (its pings /
 * heartbeats running), is killed at a random point of its renewal cycle, and this process asks for the
 * slot every 10 ms until it gets it. The figure is from the kill to the grant.
 *
 * - PostgreSQL with lock-delay: the server frees the lock at once (the socket closes with the process),
 *   but the marker keeps the slot until `deadline` after the holder's last renewal (pings every quarter
 *   of it at most, so between 3/4 of the deadline and the deadline after the kill);
 * - PostgreSQL without lock-delay: free as soon as the server notices the closed connection;
 * - Redis (a private redis-server, nothing on disk): the lease runs out.
 *
 * This file is also the child's entry: `node --import tsx slotAfterKill.ts hold <kind> <target> <name> <deadlineMs>`.
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
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { SemaphoreProvider } from "../../src/internal/semaphore/SemaphoreProvider.js"
import * as SemaphoreProviderPg from "../../src/internal/semaphore/SemaphoreProviderPg.js"
import * as SemaphoreProviderRedis from "../../src/internal/semaphore/SemaphoreProviderRedis.js"

/** Which provider holds the slot (`pg-tcp`: the PostgreSQL provider with `deadlineBy: "tcp"`). */
export type Kind = "pg" | "pg-tcp" | "pg-no-lock-delay" | "redis"

const providerLayer = (kind: Kind, target: string, deadlineMs: number): Layer.Layer<SemaphoreProvider, unknown> =>
  kind === "redis"
    ? SemaphoreProviderRedis.layer({ redis: target, prefix: "warp:kill:", lease: Duration.millis(deadlineMs) })
    : SemaphoreProviderPg.layer({
        deadline: Duration.millis(deadlineMs),
        lockDelay: kind !== "pg-no-lock-delay",
        ...(kind === "pg-tcp" ? { deadlineBy: "tcp" as const } : {})
      }).pipe(
        Layer.provide(PgClient.layer({ url: Redacted.make(target), maxConnections: 4 }))
      )

const withProvider = <A>(kind: Kind, target: string, deadlineMs: number, f: (p: SemaphoreProvider["Service"]) => Effect.Effect<A, unknown, Scope.Scope>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Effect.map(Layer.build(providerLayer(kind, target, deadlineMs)), Context.get(SemaphoreProvider)), f)))

const self = fileURLToPath(import.meta.url)

/**
 * `tries` kills of a holder of `kind` (PostgreSQL database URL or Redis URL `target`, deadline or lease
 * `deadlineMs`): ms from each SIGKILL until this process was granted the slot.
 */
export const slotAfterKill = (kind: Exclude<Kind, "pg-tcp">, target: string, deadlineMs: number, tries: number): Promise<Array<number>> => {
  const figures: Array<number> = []
  return withProvider(kind, target, deadlineMs, (p) =>
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
  ).then(() => figures)
}

if (process.argv[2] === "hold") {
  // the child: take the slot, say so, hold it until killed. With "watch": when the slot is lost, say
  // "LOST", then ask for a slot of another name every 20 ms until granted, and say "AGAIN" (the holder
  // works again) — for a cut holder whose network comes back (scripts/direct-cut.ts)
  const [kind, target, name, deadline, watch] = process.argv.slice(3) as [Kind, string, string, string, string | undefined]
  await withProvider(kind, target, Number(deadline), (p) =>
    Effect.gen(function* () {
      const slot = yield* p.tryAcquire(name, 1, "10 seconds")
      if (Option.isNone(slot)) return yield* Effect.die("no slot")
      process.stdout.write("HELD\n")
      if (watch !== "watch") return yield* Effect.never
      yield* slot.value.lost
      process.stdout.write("LOST\n")
      const again = Effect.scoped(Effect.flatMap(p.tryAcquire(`${name}-again`, 1, 0), (s) => (Option.isSome(s) ? Effect.void : Effect.fail("full"))))
      yield* again.pipe(Effect.retry({ schedule: Schedule.spaced("20 millis") }))
      process.stdout.write("AGAIN\n")
      return yield* Effect.never
    })
  )
}
