import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { SemaphoreProvider, slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { SemaphoreProviderPg } from "warp-effect"
import { sharedDatabase } from "./pg.js"

const db = sharedDatabase()

/** Builds a provider on a pool of its own (a separate "process" as far as PostgreSQL sees it). */
const provider = (layer: Layer.Layer<SemaphoreProvider, never, import("effect/sql/SqlClient").SqlClient>) =>
  Effect.map(Layer.build(layer.pipe(Layer.provide(db.pool(4)))), Context.get(SemaphoreProvider))

const ROUNDS = 120

/**
 * Limit N with two holes, slots 0 and X = N/2: another session holds every other slot for the
 * whole test. Each round, a mover M (its own pool) takes slot X; a scanner S (limit N, its own pool) starts one zero-timeout try; after a
 * random delay within S's call M releases X and then takes slot 0 (as a Mutex: one step),
 * holding it until S has answered. M holds at most one slot at any instant, so at every instant
 * of S's call at least one of 0 and X is free: S must get a slot in every round. An unguarded
 * scan fails this whenever S passes X while M holds it and M moves to 0 while S walks the other
 * half of the slots (measured while writing this test, with N = 6400: 9 to 22 false "full"
 * answers in 150 rounds against the unguarded scan; none with the guard).
 */
const race = (N: number, layer: () => Layer.Layer<SemaphoreProvider, never, import("effect/sql/SqlClient").SqlClient>) =>
  Effect.gen(function* () {
    const name = `race:${Math.random().toString(36).slice(2)}`
    const X = N / 2
    const ids = Array.from({ length: N }, (_, i) => lockId(slotName(name, i)))
    const others = yield* db.client
    yield* Effect.promise(() =>
      others.query("SELECT count(pg_advisory_lock(x)) FROM unnest($1::bigint[]) AS x", [`{${ids.filter((_, i) => i !== 0 && i !== X).join(",")}}`])
    )
    const m = yield* provider(layer())
    const s = yield* provider(layer())
    const scan = Effect.scoped(Effect.map(s.tryAcquire(name, N, 0), Option.isSome))
    // how long one call of S takes here (connections warmed up first)
    expect(yield* scan).toBe(true)
    const t0 = Date.now()
    for (let i = 0; i < 5; i++) expect(yield* scan).toBe(true)
    const scanMs = (Date.now() - t0) / 5
    /** Acquires in a scope of its own: the slot index and the effect that releases it. */
    const hold = (limit: number) =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const slot = yield* Scope.provide(m.tryAcquire(name, limit, 0), scope)
        // whether M lost the slot (its connection declared dead, e.g. a ping late on a loaded machine):
        // lock-delay then keeps the slot from S until M has released it, so the round's premise is gone
        const lost = Option.match(slot, { onNone: () => Effect.succeed(false), onSome: (x) => Effect.map(Effect.timeoutOption(x.lost, 0), Option.isSome) })
        return { index: Option.getOrElse(Option.map(slot, (x) => x.index), () => -1), release: Scope.close(scope, Exit.void), lost }
      })
    let full = 0
    let moved = 0
    let lostRounds = 0
    for (let round = 0; round < ROUNDS; round++) {
      // between S's calls M may hold two slots: with 0 taken, limit X+1 leaves only X free
      const zero = yield* hold(1)
      const onX = yield* hold(X + 1)
      yield* zero.release
      expect([zero.index, onX.index]).toEqual([0, X])
      const answer = yield* Effect.forkChild(scan)
      // pacing, not synchronization: spreads M's move over S's call
      yield* Effect.sleep(Duration.millis(Math.random() * 2 * scanMs))
      yield* onX.release
      const onZero = yield* hold(1)
      if (onZero.index === 0) moved++
      const got = yield* Fiber.join(answer)
      // read after S answered: a lane declared dead at any point of the round counts (one that died while
      // releasing X leaves X's marker to a background delete, so X stays closed to S meanwhile)
      if ((yield* onX.lost) || (yield* onZero.lost)) lostRounds++
      else if (!got) full++
      yield* onZero.release
    }
    if (lostRounds > 0) console.log(`scan race: ${lostRounds} of ${ROUNDS} rounds had a slot of M lost (not counted)`)
    return { full, moved, lostRounds }
  }).pipe(Effect.scoped)

describe("PostgreSQL scan under release/acquire races", () => {
  for (const [label, layer] of [
    ["one connection per slot", () => SemaphoreProviderPg.layer()],
    ["multiplexed", () => SemaphoreProviderPg.layer({ multiplex: { connections: 1 } })]
  ] as const) {
    it.live(`${label}: never reports full while a slot is free throughout the call`, () =>
      Effect.gen(function* () {
        const others = yield* db.client
        const capacity = yield* Effect.promise(() =>
          others.query<{ c: number }>(
            "SELECT current_setting('max_locks_per_transaction')::int * (current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int) AS c"
          )
        )
        // the unguarded window grows with N: as many slots as a third of the server's lock table allows
        const N = Math.min(8000, Math.floor(capacity.rows[0]!.c / 6) * 2)
        const { full, lostRounds, moved } = yield* race(N, layer)
        expect(moved).toBeGreaterThan(ROUNDS / 10)
        expect(lostRounds).toBeLessThan(ROUNDS / 10)
        expect(full).toBe(0)
      }).pipe(Effect.scoped)
    )
  }
})
