/**
 * The worker's view of its job store (issue 21): calls waiting to retry after an outage retry as soon
 * as any call of the worker gets through again, not at their next back-off tick (up to 500 ms later).
 * On the TestClock: the clock never moves after the return, so only the return can wake the waiter.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as TestClock from "effect/testing/TestClock"
import { isOutage, StoreError } from "../src/internal/store/StoreError.js"
import * as StoreHealth from "../src/internal/worker/StoreHealth.js"

const settle = Effect.repeat(Effect.yieldNow, { times: 50 })

/** The fiber's exit, if it has ended. */
const poll = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.sync(() => Option.fromUndefinedOr(fiber.pollUnsafe()))

describe("StoreHealth", () => {
  it.effect("a call waiting to retry retries at once when another call sees the store back", () =>
    Effect.gen(function* () {
      const health = StoreHealth.make("w")
      let down = true
      let tries = 0
      const call = Effect.suspend(() => {
        tries++
        return down ? Effect.fail(new Error("connection refused")) : Effect.succeed("ok")
      })
      const waiter = yield* Effect.forkChild(health.retrying(call))
      // a second of outage: the waiter backs off to 500 ms between tries
      yield* settle
      yield* TestClock.adjust("1 second")
      yield* settle
      const before = tries
      expect(health.downSince()).toBeDefined()
      down = false
      // nothing else has reached the store yet: the waiter sleeps on (the clock does not move)
      yield* settle
      expect(Option.isNone(yield* poll(waiter))).toBe(true)
      expect(tries).toBe(before)
      // another call gets through: the store is back, and the waiter retries at once
      expect(yield* health.observe(Effect.succeed(1))).toBe(1)
      expect(health.downSince()).toBeUndefined()
      yield* settle
      expect(yield* poll(waiter)).toEqual(Option.some(expect.objectContaining({ _tag: "Success", value: "ok" })))
      expect(tries).toBe(before + 1)
    }))

  it.effect("with the store up, a failing call backs off on the clock (no busy loop)", () =>
    Effect.gen(function* () {
      const health = StoreHealth.make("w")
      let tries = 0
      const call = Effect.suspend(() => (++tries < 4 ? Effect.fail(new Error("rejected")) : Effect.succeed("ok")))
      const waiter = yield* Effect.forkChild(health.retrying(call))
      yield* settle
      expect(tries).toBe(1)
      yield* TestClock.adjust("50 millis")
      yield* settle
      expect(tries).toBe(2)
      yield* TestClock.adjust("100 millis")
      yield* settle
      expect(tries).toBe(3)
      yield* TestClock.adjust("200 millis")
      expect(yield* Fiber.join(waiter)).toBe("ok")
    }))
})

describe("isOutage", () => {
  it("tells a server out of reach from a statement it rejected, through the store error and its cause", () => {
    const wrapped = (cause: unknown) => Cause.squash(Cause.fail(new StoreError({ operation: "finalize", cause: { message: "sql failed", cause } })))
    expect(isOutage(wrapped({ code: "ECONNREFUSED" }))).toBe(true)
    expect(isOutage(wrapped({ code: "57P01", message: "terminating connection due to administrator command" }))).toBe(true)
    expect(isOutage(wrapped(new Error("Connection terminated unexpectedly")))).toBe(true)
    // a value jsonb refuses, a constraint: rejections, not outages
    expect(isOutage(wrapped({ code: "22P05", message: "unsupported Unicode escape sequence" }))).toBe(false)
    expect(isOutage(wrapped({ code: "23505", message: "duplicate key value violates unique constraint" }))).toBe(false)
    expect(StoreHealth.isOutage).toBe(isOutage)
  })
})
