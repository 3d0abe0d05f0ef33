/**
 * Model-based test of the concurrency gate's primitive, `SemaphoreProvider.tryAcquire`, on the
 * in-memory provider and on PostgreSQL.
 *
 * fast-check generates short programs of commands over a few keys and limits:
 * - `acquire(key, limit)`: one holder asks for a slot (zero timeout, as the gate does);
 * - `burst(key, limit, n)`: n holders ask at the same time (on PostgreSQL: n connections racing);
 * - `end(holder, how)`: a holder's scope closes by `release` (success), `fail`, `die` or `interrupt`;
 * - `abandon(key, limit)`: an acquire with a wait is interrupted right away (must not leak a slot).
 *
 * The model keeps the held slot indexes of every key (`name:0 .. name:{limit-1}` is one pool per
 * name, whatever the limit). It predicts exactly: an acquire at `limit` succeeds iff one of the
 * indexes `0 .. limit-1` is free, and returns a free one; a burst of n gets exactly
 * min(n, free) slots (no slot frees during a burst, so a scan that failed saw every slot held);
 * every end frees exactly its slot. On PostgreSQL the server is asked too: after every command the
 * number of advisory locks held in the database equals the model's number of held slots.
 *
 * fast-check prints the seed and the shrunk counterexample when a property fails.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import * as SqlClient from "effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as fc from "fast-check"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { SemaphoreProvider, type SemaphoreProviderService } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { SemaphoreProviderMemory, SemaphoreProviderPg } from "warp-effect"
import { freshPgLayer } from "../support/db.js"
import { property } from "./fastCheck.js"

type How = "release" | "fail" | "die" | "interrupt"
type Command =
  | { readonly _tag: "acquire"; readonly key: number; readonly limit: number }
  | { readonly _tag: "burst"; readonly key: number; readonly limit: number; readonly n: number }
  | { readonly _tag: "end"; readonly holder: number; readonly how: How }
  | { readonly _tag: "abandon"; readonly key: number; readonly limit: number }

const key = fc.integer({ min: 0, max: 2 })
const limit = fc.integer({ min: 1, max: 4 })
const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ _tag: fc.constant("acquire" as const), key, limit }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("burst" as const), key, limit, n: fc.integer({ min: 2, max: 4 }) }) },
  { weight: 4, arbitrary: fc.record({ _tag: fc.constant("end" as const), holder: fc.nat(), how: fc.constantFrom<How>("release", "fail", "die", "interrupt") }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("abandon" as const), key, limit }) }
)

interface Holder {
  readonly name: string
  readonly index: number
  readonly end: Deferred.Deferred<How>
  readonly fiber: Fiber.Fiber<unknown, unknown>
}

/** One holder asking for a slot; its scope stays open until told how to end. */
const ask = (provider: SemaphoreProviderService, name: string, lim: number) =>
  Effect.gen(function* () {
    const got = yield* Deferred.make<Option.Option<number>, unknown>()
    const end = yield* Deferred.make<How>()
    const fiber = yield* Effect.forkDetach(
      Effect.scoped(
        Effect.gen(function* () {
          const slot = yield* provider.tryAcquire(name, lim, 0)
          yield* Deferred.succeed(got, Option.map(slot, (s) => s.index))
          if (Option.isNone(slot)) return
          const how = yield* Deferred.await(end)
          if (how === "fail") return yield* Effect.fail("holder failed")
          if (how === "die") return yield* Effect.die("holder died")
        })
      ).pipe(Effect.tapCause((c) => Deferred.failCause(got, c)))
    )
    const index = yield* Deferred.await(got)
    return Option.map(index, (i): Holder => ({ name, index: i, end, fiber }))
  })

let caseNo = 0

/** Runs one generated program against `provider`; `serverHeld` (PostgreSQL) reports the locks the server holds. */
const runProgram = (provider: SemaphoreProviderService, commands: ReadonlyArray<Command>, serverHeld?: Effect.Effect<number, unknown>) =>
  Effect.gen(function* () {
    const prefix = `gate-model:${process.pid}:${caseNo++}`
    const nameOf = (k: number) => `${prefix}:k${k}`
    const held = new Map<string, Set<number>>()
    const holders: Array<Holder> = []
    const setOf = (name: string) => held.get(name) ?? held.set(name, new Set()).get(name)!
    const free = (name: string, lim: number) => Array.from({ length: lim }, (_, i) => i).filter((i) => !setOf(name).has(i))
    const take = (h: Holder, lim: number, context: string) => {
      expect(h.index, context).toBeLessThan(lim)
      expect(setOf(h.name).has(h.index), `${context}: slot ${h.index} handed out twice`).toBe(false)
      setOf(h.name).add(h.index)
      holders.push(h)
    }
    const finish = (h: Holder, how: How) =>
      Effect.gen(function* () {
        if (how === "interrupt") yield* Fiber.interrupt(h.fiber)
        else {
          yield* Deferred.succeed(h.end, how)
          const exit = yield* Fiber.await(h.fiber)
          expect(how === "release" ? Exit.isSuccess(exit) : Exit.isFailure(exit)).toBe(true)
        }
        setOf(h.name).delete(h.index)
      })
    const check = Effect.gen(function* () {
      if (serverHeld === undefined) return
      const expected = [...held.values()].reduce((n, s) => n + s.size, 0)
      expect(yield* serverHeld, "advisory locks held on the server").toBe(expected)
    })

    for (const [step, c] of commands.entries()) {
      const context = `step ${step} ${JSON.stringify(c)}`
      switch (c._tag) {
        case "acquire": {
          const name = nameOf(c.key)
          const before = free(name, c.limit)
          const got = yield* ask(provider, name, c.limit)
          expect(Option.isSome(got), `${context}: free slots ${JSON.stringify(before)}`).toBe(before.length > 0)
          if (Option.isSome(got)) take(got.value, c.limit, context)
          break
        }
        case "burst": {
          const name = nameOf(c.key)
          const before = free(name, c.limit).length
          const got = yield* Effect.forEach(Array.from({ length: c.n }), () => ask(provider, name, c.limit), { concurrency: "unbounded" })
          const winners = got.filter(Option.isSome).map((o) => o.value)
          expect(winners.length, `${context}: ${before} free`).toBe(Math.min(c.n, before))
          for (const h of winners) take(h, c.limit, context)
          break
        }
        case "end": {
          if (holders.length === 0) break
          const [h] = holders.splice(c.holder % holders.length, 1)
          yield* finish(h!, c.how)
          break
        }
        case "abandon": {
          const fiber = yield* Effect.forkDetach(Effect.scoped(Effect.andThen(provider.tryAcquire(nameOf(c.key), c.limit, "50 millis"), Effect.never)))
          yield* Effect.yieldNow
          yield* Fiber.interrupt(fiber)
          break
        }
      }
      yield* check
    }
    // every slot comes back
    for (const h of holders.splice(0)) yield* finish(h, "release")
    yield* check
    for (const name of held.keys()) {
      const all = yield* ask(provider, name, 4)
      expect(Option.isSome(all), `${name}: a slot is free at the end`).toBe(true)
      if (Option.isSome(all)) yield* Fiber.interrupt(all.value.fiber)
    }
  })

const program = fc.array(command, { minLength: 1, maxLength: 14 })

describe("gate model: SemaphoreProviderMemory", () => {
  property(it.live,
    "tryAcquire matches the slot model (1,000 programs)",
    [program],
    ([commands]) => Effect.flatMap(SemaphoreProviderMemory.make, (provider) => runProgram(provider, commands)),
    { fastCheck: { numRuns: 1000 }, timeout: 120_000 }
  )
})

const pgEnv = Layer.provideMerge(SemaphoreProviderPg.layer({ pingInterval: "1 second" }), freshPgLayer(24))

layer(pgEnv, { excludeTestServices: true, timeout: "60 seconds" })("gate model: SemaphoreProviderPg", (it) => {
  property(it.effect,
    "tryAcquire matches the slot model, and the server holds exactly the model's locks (1,000 programs)",
    [fc.array(command, { minLength: 1, maxLength: 8 })],
    ([commands]) =>
      Effect.gen(function* () {
        const provider = yield* SemaphoreProvider
        const sql = yield* SqlClient.SqlClient
        const serverHeld = Effect.map(
          sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted
                             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
          (r) => r[0]!.n
        )
        yield* runProgram(provider, commands, serverHeld)
      }),
    { fastCheck: { numRuns: 1000 }, timeout: 170_000 }
  )
})
