/**
 * The PostgreSQL provider's lock-delay rule against a model, on generated sequences of operations by
 * three holders (each a provider on a pool of its own: another process, as PostgreSQL sees it) on one
 * key of limit 1 or 2:
 * - `acquire(h)`: the model grants iff fewer slots are *occupied* than the limit, where a slot is
 *   occupied by a holder that holds it, and also by a holder whose connection died (its backend was
 *   terminated) and that has not released it yet — it may still be running;
 * - `kill(h)`: the backend holding one of `h`'s slots is terminated (`slot.lost` then completes); the
 *   slot stays occupied;
 * - `release(h)`: `h` closes the scope of one of its slots (clean, or after its connection died: then
 *   its handler has stopped); the slot is free.
 * The deadline is long (60 s), so no marker expires inside a case: expiry is tested on its own in
 * `test/semaphore/PgConnections.test.ts`. An acquisition the model grants may wait up to 5 s (a dead
 * holder's marker is removed in the background); one the model refuses gets a single try, and any
 * grant is a violation.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as fc from "fast-check"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { SemaphoreProvider, type Slot, slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import * as SemaphoreProviderPg from "../../src/internal/semaphore/SemaphoreProviderPg.js"
import { sharedDatabase } from "../semaphore/pg.js"
import { property } from "./fastCheck.js"

const db = sharedDatabase()

type Op = { readonly _tag: "acquire" | "kill" | "release"; readonly holder: number }

const ops = fc.array(
  fc.record({ _tag: fc.constantFrom("acquire", "acquire", "kill", "release"), holder: fc.integer({ min: 0, max: 2 }) }),
  { minLength: 1, maxLength: 10 }
) as fc.Arbitrary<ReadonlyArray<Op>>

interface Held {
  readonly slot: Slot
  readonly scope: Scope.Closeable
  dead: boolean
}

const sqlOf = <A>(text: string, params: ReadonlyArray<unknown>) =>
  Effect.flatMap(db.client, (c) => Effect.promise(() => c.query(text, params as Array<unknown>))).pipe(
    Effect.map((r) => r.rows as Array<A>),
    Effect.scoped
  )

let cases = 0

describe("lock-delay against a model (PostgreSQL provider)", () => {
  property(it.live,
    "a slot whose holder's connection died is granted again only once that holder released it",
    [ops, fc.integer({ min: 1, max: 2 })],
    ([sequence, limit]) =>
      Effect.gen(function* () {
        const key = `lockdelay:${process.pid}:${cases++}`
        const providers = yield* Effect.forEach([0, 1, 2], () =>
          Effect.map(
            Layer.build(SemaphoreProviderPg.layer({ deadline: "60 seconds", pingInterval: "200 millis" }).pipe(Layer.provide(db.pool(6)))),
            Context.get(SemaphoreProvider)
          )
        )
        const held: Array<Array<Held>> = [[], [], []]
        const occupied = () => held.reduce((n, h) => n + h.length, 0)
        const trace: Array<string> = []
        for (const op of sequence) {
          const mine = held[op.holder]!
          if (op._tag === "acquire") {
            const expected = occupied() < limit
            const scope = yield* Scope.make()
            const got = yield* Scope.provide(providers[op.holder]!.tryAcquire(key, limit, expected ? "5 seconds" : 0), scope)
            trace.push(`acquire(${op.holder}) expected ${expected ? "granted" : "full"}, got ${Option.isSome(got) ? "granted" : "full"}`)
            expect(Option.isSome(got), trace.join("\n")).toBe(expected)
            if (Option.isSome(got)) mine.push({ slot: got.value, scope, dead: false })
            else yield* Scope.close(scope, Exit.void)
          } else if (op._tag === "kill") {
            const victim = mine.find((h) => !h.dead)
            if (victim === undefined) continue
            const [row] = yield* sqlOf<{ pid: number }>(
              `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
                 AND ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
              [lockId(slotName(key, victim.slot.index))]
            )
            expect(row, "the victim's lock is held").toBeDefined()
            yield* sqlOf("SELECT pg_terminate_backend($1)", [row!.pid])
            yield* Effect.timeoutOrElse(victim.slot.lost, { duration: "10 seconds", orElse: () => Effect.fail("slot.lost did not complete") })
            victim.dead = true
            trace.push(`kill(${op.holder})`)
          } else {
            const h = mine.shift()
            if (h === undefined) continue
            yield* Scope.close(h.scope, Exit.void)
            trace.push(`release(${op.holder})${h.dead ? " after its connection died" : ""}`)
          }
        }
        for (const mine of held) for (const h of mine) yield* Scope.close(h.scope, Exit.void)
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 12 }, timeout: 240_000 }
  )
})
