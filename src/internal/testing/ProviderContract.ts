/**
 * The semaphore provider contract, as a vitest suite. Every built-in provider runs it; run it
 * against your own `SemaphoreProvider` Layer:
 *
 * ```ts
 * import { ProviderContract } from "warp-effect/testing/vitest"
 * ProviderContract.suite("my provider", () => MyProvider.layer)
 * ```
 *
 * The factory is called once per test, so each test gets a fresh provider; keys are unique per
 * test as well, so a provider over shared storage (one database, one Redis) is fine. Checked:
 * at most N holders at every instant under many concurrent fibers; limit 1 and N; release when
 * the holder's scope closes (success, failure, defect, interruption, timeout); zero timeout =
 * one try; a waiting acquisition gets a slot freed meanwhile and stops at an outer timeout;
 * invalid limits fail with `SemaphoreError`; the slot-pool rule (`Mutex(k)` and
 * `Semaphore(k, N)` share one pool of N); distinct names are independent; for a provider that offers
 * them, a held slot has not lapsed and fencing tokens only grow per name (a provider that cannot
 * fence leaves `Slot.fence` undefined, which the type allows).
 *
 * Requires `vitest` and `@effect/vitest` (test-time dependencies of the caller).
 *
 * @since 0.1.0
 */
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import { SemaphoreError, SemaphoreProvider, type Slot } from "../semaphore/SemaphoreProvider.js"

/**
 * Options of the contract suite.
 *
 * @since 0.1.0
 * @category models
 */
export interface SuiteOptions {
  /** Per-test timeout in milliseconds (default 30 000). */
  readonly testTimeout?: number
  /** Concurrent fibers in the stress tests (default 16). Each may hold a slot, so size pools accordingly. */
  readonly fibers?: number
  /** Acquisitions per fiber in the stress tests (default 6). */
  readonly rounds?: number
}

/** Counts live holders at every instant; keeps the maximum. */
class Live {
  now = 0
  max = 0
  total = 0
  enter() {
    this.now++
    this.total++
    this.max = Math.max(this.max, this.now)
  }
  exit() {
    this.now--
  }
}

let keys = 0
const freshKey = (label: string) => `contract:${Date.now().toString(36)}:${Math.random().toString(36).slice(2, 8)}:${keys++}:${label}`

const acquire = (name: string, limit: number, timeout: import("effect/Duration").Input = 0) =>
  Effect.flatMap(SemaphoreProvider, (p) => p.tryAcquire(name, limit, timeout))

/** Acquires in a scope of its own; returns the slot and the effect that closes that scope. */
const holdOpen = (name: string, limit: number) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const slot = yield* Scope.provide(acquire(name, limit), scope)
    return { slot, close: Scope.close(scope, Exit.void) }
  })

/** True when one zero-timeout try on `name` gets a slot (released again at once). */
const isFree = (name: string, limit = 1) => Effect.scoped(Effect.map(acquire(name, limit), Option.isSome))

/** Runs `fibers` x `rounds` holders on `name`, each picking its limit and timeout; counts live holders. */
const stress = (
  name: string,
  fibers: number,
  rounds: number,
  pick: (fiber: number, round: number) => { readonly limit: number; readonly timeout: number },
  onHold: (limit: number, enter: boolean) => void = () => {}
) =>
  Effect.gen(function* () {
    const live = new Live()
    yield* Effect.forEach(
      Array.from({ length: fibers }, (_, f) => f),
      (f) =>
        Effect.forEach(
          Array.from({ length: rounds }, (_, r) => r),
          (r) => {
            const { limit, timeout } = pick(f, r)
            return Effect.scoped(
              Effect.gen(function* () {
                const slot = yield* acquire(name, limit, timeout)
                if (Option.isNone(slot)) return
                expect(slot.value.index).toBeGreaterThanOrEqual(0)
                expect(slot.value.index).toBeLessThan(limit)
                live.enter()
                onHold(limit, true)
                yield* Effect.sleep("1 millis")
                onHold(limit, false)
                live.exit()
              })
            )
          },
          { discard: true }
        ),
      { concurrency: "unbounded", discard: true }
    )
    return live
  })

/**
 * Registers the provider contract tests for `makeLayer` (called once per test) under a vitest
 * `describe` named after `name`.
 *
 * @since 0.1.0
 * @category testing
 */
export const suite = <E>(name: string, makeLayer: () => Layer.Layer<SemaphoreProvider, E, never>, options: SuiteOptions = {}): void => {
  const timeout = options.testTimeout ?? 30_000
  const fibers = options.fibers ?? 16
  const rounds = options.rounds ?? 6
  const test = <A, E2>(title: string, body: () => Effect.Effect<A, E2, SemaphoreProvider>) =>
    it.live(title, () => Effect.provide(body(), makeLayer()), timeout)

  describe(`SemaphoreProvider contract: ${name}`, () => {
    test("limit 1: one holder, on slot 0; a second try gets None until it is released", () =>
      Effect.gen(function* () {
        const k = freshKey("mutex")
        const first = yield* holdOpen(k, 1)
        expect(Option.map(first.slot, (s) => [s.name, s.index])).toEqual(Option.some([k, 0]))
        expect(yield* isFree(k)).toBe(false)
        yield* first.close
        expect(yield* isFree(k)).toBe(true)
      }))

    test("limit N: exactly N holders on distinct slots 0..N-1; the next try gets None", () =>
      Effect.gen(function* () {
        const k = freshKey("sem")
        const held = yield* Effect.forEach([0, 1, 2, 3], () => holdOpen(k, 4))
        const indexes = held.map((h) => Option.getOrThrow(h.slot).index).sort()
        expect(indexes).toEqual([0, 1, 2, 3])
        expect(yield* isFree(k, 4)).toBe(false)
        yield* held[2]!.close
        const again = yield* holdOpen(k, 4)
        expect(Option.map(again.slot, (s) => s.index)).toEqual(Option.some(Option.getOrThrow(held[2]!.slot).index))
        yield* Effect.forEach([...held.slice(0, 2), held[3]!, again], (h) => h.close)
        expect(yield* isFree(k, 4)).toBe(true)
      }))

    for (const limit of [1, 3]) {
      test(`at most ${limit} holder(s) at every instant under ${fibers} concurrent fibers; all slots free afterwards`, () =>
        Effect.gen(function* () {
          const k = freshKey(`stress${limit}`)
          const live = yield* stress(k, fibers, rounds, (f, r) => ({ limit, timeout: (f + r) % 2 === 0 ? 0 : 2_000 }))
          expect(live.max).toBeLessThanOrEqual(limit)
          expect(live.max).toBeGreaterThanOrEqual(1)
          expect(live.total).toBeGreaterThanOrEqual(fibers)
          // every slot is free again: `limit` holders fit at once
          const again = yield* Effect.forEach(Array.from({ length: limit }, () => 0), () => holdOpen(k, limit))
          expect(again.every((h) => Option.isSome(h.slot))).toBe(true)
          yield* Effect.forEach(again, (h) => h.close)
        }))
    }

    const endings: ReadonlyArray<readonly [string, Effect.Effect<unknown, unknown>]> = [
      ["success", Effect.void],
      ["failure", Effect.fail("boom")],
      ["defect", Effect.die(new Error("bug"))]
    ]
    for (const [ending, body] of endings) {
      test(`releases when the holder's scope closes: ${ending}`, () =>
        Effect.gen(function* () {
          const k = freshKey(ending)
          const acquired = yield* Deferred.make<void>()
          const exit = yield* Effect.exit(
            Effect.scoped(
              Effect.gen(function* () {
                const slot = yield* acquire(k, 1)
                expect(Option.isSome(slot)).toBe(true)
                expect(yield* isFree(k)).toBe(false)
                yield* Deferred.succeed(acquired, undefined)
                return yield* body
              })
            )
          )
          expect(Exit.isSuccess(exit)).toBe(ending === "success")
          expect(yield* Deferred.isDone(acquired)).toBe(true)
          expect(yield* isFree(k)).toBe(true)
        }))
    }

    test("releases when the holder's scope closes: interruption", () =>
      Effect.gen(function* () {
        const k = freshKey("interrupt")
        const acquired = yield* Deferred.make<void>()
        const holder = yield* Effect.forkChild(
          Effect.scoped(Effect.andThen(acquire(k, 1), Effect.andThen(Deferred.succeed(acquired, undefined), Effect.never)))
        )
        yield* Deferred.await(acquired)
        expect(yield* isFree(k)).toBe(false)
        yield* Fiber.interrupt(holder)
        const exit = yield* Fiber.await(holder)
        expect(Exit.hasInterrupts(exit)).toBe(true)
        expect(yield* isFree(k)).toBe(true)
      }))

    test("releases when the holder's scope closes: Effect.timeout around the holder", () =>
      Effect.gen(function* () {
        const k = freshKey("timeout")
        // warm up (connections, scripts) so the holder acquires well within its timeout
        expect(yield* isFree(k)).toBe(true)
        const acquired = yield* Deferred.make<void>()
        const holder = Effect.scoped(
          Effect.gen(function* () {
            expect(Option.isSome(yield* acquire(k, 1))).toBe(true)
            yield* Deferred.succeed(acquired, undefined)
            return yield* Effect.never
          })
        )
        const exit = yield* Effect.exit(Effect.timeout(holder, "500 millis"))
        expect(Exit.isFailure(exit) && Cause.isTimeoutError(Cause.squash(exit.cause))).toBe(true)
        expect(yield* Deferred.isDone(acquired)).toBe(true)
        expect(yield* isFree(k)).toBe(true)
      }))

    test("zero timeout is one try: None at once while full", () =>
      Effect.gen(function* () {
        const k = freshKey("zero")
        const held = yield* holdOpen(k, 2)
        const other = yield* holdOpen(k, 2)
        const start = Date.now()
        expect(Option.isNone(yield* Effect.scoped(acquire(k, 2, 0)))).toBe(true)
        expect(Date.now() - start).toBeLessThan(1_000)
        yield* held.close
        yield* other.close
      }))

    test("a non-zero timeout gives up with None after waiting it out", () =>
      Effect.gen(function* () {
        const k = freshKey("giveup")
        const held = yield* holdOpen(k, 1)
        const start = Date.now()
        expect(Option.isNone(yield* Effect.scoped(acquire(k, 1, "150 millis")))).toBe(true)
        expect(Date.now() - start).toBeGreaterThanOrEqual(140)
        yield* held.close
      }))

    test("a non-zero timeout waits and gets the slot freed meanwhile", () =>
      Effect.gen(function* () {
        const k = freshKey("wait")
        const held = yield* holdOpen(k, 1)
        const started = yield* Deferred.make<void>()
        const released = yield* Deferred.make<void>()
        const waiter = yield* Effect.forkChild(
          Effect.scoped(
            Effect.gen(function* () {
              yield* Deferred.succeed(started, undefined)
              const slot = yield* acquire(k, 1, "20 seconds")
              // ordered by the Deferred: the slot was handed over only after the holder released it
              return { got: Option.isSome(slot), afterRelease: yield* Deferred.isDone(released) }
            })
          )
        )
        yield* Deferred.await(started)
        // while the waiter waits, a probe of our own also finds the key full (and lets time pass)
        expect(Option.isNone(yield* Effect.scoped(acquire(k, 1, "200 millis")))).toBe(true)
        expect(waiter.pollUnsafe()).toBeUndefined()
        yield* Deferred.succeed(released, undefined)
        yield* held.close
        expect(yield* Fiber.join(waiter)).toEqual({ got: true, afterRelease: true })
        expect(yield* isFree(k)).toBe(true)
      }))

    test("a waiting acquisition stops at an outer timeout and leaves no slot taken", () =>
      Effect.gen(function* () {
        const k = freshKey("outer")
        const held = yield* holdOpen(k, 1)
        const start = Date.now()
        const exit = yield* Effect.exit(Effect.timeout(Effect.scoped(acquire(k, 1, "30 seconds")), "200 millis"))
        expect(Exit.isFailure(exit) && Cause.isTimeoutError(Cause.squash(exit.cause))).toBe(true)
        expect(Date.now() - start).toBeLessThan(10_000)
        yield* held.close
        expect(yield* isFree(k)).toBe(true)
      }))

    test("invalid limits fail with SemaphoreError", () =>
      Effect.gen(function* () {
        for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
          const exit = yield* Effect.exit(Effect.scoped(acquire(freshKey("bad"), bad)))
          expect(Exit.isFailure(exit)).toBe(true)
          if (Exit.isFailure(exit)) {
            const failure = Cause.findErrorOption(exit.cause)
            expect(Option.isSome(failure) && failure.value instanceof SemaphoreError).toBe(true)
          }
        }
      }))

    test("Mutex(k) and Semaphore(k, N) share one pool: the cap is N, never N + 1", () =>
      Effect.gen(function* () {
        const k = freshKey("pool")
        const mutex = yield* holdOpen(k, 1)
        expect(Option.map(mutex.slot, (s) => s.index)).toEqual(Option.some(0))
        const sems = yield* Effect.forEach([0, 1, 2], () => holdOpen(k, 3))
        expect(sems.map((h) => Option.isSome(h.slot))).toEqual([true, true, false])
        expect(sems.flatMap((h) => Option.toArray(Option.map(h.slot, (s) => s.index))).sort()).toEqual([1, 2])
        yield* Effect.forEach(sems, (h) => h.close)
        yield* mutex.close
        // the other way round: N semaphore holders leave no room for the mutex
        const full = yield* Effect.forEach([0, 1, 2], () => holdOpen(k, 3))
        expect(full.every((h) => Option.isSome(h.slot))).toBe(true)
        expect(yield* isFree(k, 1)).toBe(false)
        yield* Effect.forEach(full, (h) => h.close)
        expect(yield* isFree(k, 1)).toBe(true)
      }))

    test("Mutex(k) and Semaphore(k, 3) mixed under concurrent fibers: at most 3 holders, at most 1 mutex holder", () =>
      Effect.gen(function* () {
        const k = freshKey("mixed")
        let mutexNow = 0
        let mutexMax = 0
        const live = yield* stress(
          k,
          fibers,
          rounds,
          (f, r) => ({ limit: (f + r) % 3 === 0 ? 1 : 3, timeout: f % 2 === 0 ? 0 : 2_000 }),
          (limit, enter) => {
            if (limit !== 1) return
            mutexNow += enter ? 1 : -1
            mutexMax = Math.max(mutexMax, mutexNow)
          }
        )
        expect(live.max).toBeLessThanOrEqual(3)
        expect(mutexMax).toBeLessThanOrEqual(1)
        expect(live.total).toBeGreaterThanOrEqual(fibers)
      }))

    test("distinct names are independent (including names that look like slot names)", () =>
      Effect.gen(function* () {
        const a = freshKey("a")
        const held = yield* Effect.forEach([a, `${a}:0`, `${a}:1`, `${a}b`], (n) => holdOpen(n, 1))
        expect(held.every((h) => Option.isSome(h.slot))).toBe(true)
        const wide = yield* holdOpen(a, 2)
        expect(Option.map(wide.slot, (s) => s.index)).toEqual(Option.some(1))
        yield* Effect.forEach([...held, wide], (h) => h.close)
      }))

    test("slot.lost does not complete while the slot is held", () =>
      Effect.gen(function* () {
        const k = freshKey("lost")
        const held = yield* holdOpen(k, 1)
        const slot: Slot = Option.getOrThrow(held.slot)
        expect(Option.isNone(yield* Effect.timeoutOption(slot.lost, "100 millis"))).toBe(true)
        yield* held.close
      }))

    test("a slot held and renewed normally has not lapsed (when the provider checks lapses)", () =>
      Effect.gen(function* () {
        const k = freshKey("lapse")
        const held = yield* holdOpen(k, 1)
        const slot: Slot = Option.getOrThrow(held.slot)
        if (slot.lapsed !== undefined) {
          expect(yield* slot.lapsed).toBe(false)
          yield* Effect.sleep("300 millis")
          expect(yield* slot.lapsed).toBe(false)
        }
        yield* held.close
      }))

    test("fencing tokens (when the provider gives them) only grow per name, whichever slot", () =>
      Effect.gen(function* () {
        const k = freshKey("fence")
        const tokens: Array<bigint | undefined> = []
        for (let i = 0; i < 6; i++) {
          // limit 2: consecutive acquisitions may land on either slot
          const held = yield* holdOpen(k, 2)
          tokens.push(Option.getOrThrow(held.slot).fence)
          yield* held.close
        }
        // a provider fences every acquisition or none
        expect(tokens.every((t) => t === undefined) || tokens.every((t) => t !== undefined)).toBe(true)
        for (let i = 1; i < tokens.length; i++) if (tokens[i] !== undefined) expect(tokens[i]! > tokens[i - 1]!).toBe(true)
      }))
  })
}
