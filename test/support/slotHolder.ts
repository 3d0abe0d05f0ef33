/**
 * A process that holds one slot of the PostgreSQL provider, driven line by line on stdin, for tests
 * that stop it (SIGSTOP) or kill it while it holds:
 * `node --import tsx test/support/slotHolder.ts '<json: url, name, deadlineMs, deadlineBy>'`.
 *
 * Prints `HELD` once it holds slot 0 of `name` (limit 1); on `check` prints
 * `CHECK lost=<bool> lapsed=<bool>`; on `release` releases and prints `RELEASED`.
 */
import { createInterface } from "node:readline"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import { SemaphoreProviderPg } from "warp-effect"

interface HolderConfig {
  readonly url: string
  readonly name: string
  readonly deadlineMs: number
  readonly deadlineBy: "idle-session-timeout" | "tcp"
}

const config = JSON.parse(process.argv[2]!) as HolderConfig

const program = Effect.gen(function* () {
  const commands = yield* Queue.unbounded<string>()
  const lines = createInterface({ input: process.stdin })
  lines.on("line", (l) => Queue.offerUnsafe(commands, l.trim()))
  const provider = yield* SemaphoreProviderPg.make({ deadline: `${config.deadlineMs} millis`, deadlineBy: config.deadlineBy, pingInterval: "100 millis" })
  const scope = yield* Scope.make()
  const slot = yield* Scope.provide(provider.tryAcquire(config.name, 1, 0), scope)
  if (Option.isNone(slot)) return yield* Effect.die(new Error(`slot of ${config.name} not free`))
  const lost = yield* Deferred.make<void>()
  yield* Effect.forkDetach(Effect.andThen(slot.value.lost, Deferred.succeed(lost, undefined)))
  console.log("HELD")
  while (true) {
    const command = yield* Queue.take(commands)
    if (command === "check") {
      const lapsed = slot.value.lapsed === undefined ? false : yield* slot.value.lapsed
      console.log(`CHECK lost=${yield* Deferred.isDone(lost)} lapsed=${lapsed}`)
    } else if (command === "release") {
      yield* Scope.close(scope, Exit.void)
      console.log("RELEASED")
      return
    }
  }
})

Effect.runPromise(
  program.pipe(
    Effect.provide(PgClient.layer({ url: Redacted.make(config.url), maxConnections: 4 })),
    Effect.scoped
  )
).then(
  () => process.exit(0),
  (e) => {
    console.error(e)
    process.exit(1)
  }
)
