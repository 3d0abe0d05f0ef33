import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import { SemaphoreProvider } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { SemaphoreProviderRedis } from "warp-effect/redis"
import { ProviderContract } from "warp-effect/testing/vitest"
import { redisReachable, redisUrl, runPrefix } from "./redis.js"

const reachable = await redisReachable()

if (!reachable && process.env.CI) {
  describe("SemaphoreProviderRedis", () => {
    it(`needs Redis at ${redisUrl} (CI is set, so an unreachable server fails the run)`, () => {
      throw new Error(`Redis unreachable at ${redisUrl}`)
    })
  })
} else if (!reachable) {
  console.warn(`Redis unreachable at ${redisUrl}: Redis provider tests skipped (set REDIS_URL, or start Redis locally)`)
  describe("SemaphoreProviderRedis", () => {
    it.skip(`skipped: Redis unreachable at ${redisUrl}`, () => {})
  })
} else {
  const prefixes = runPrefix()

  ProviderContract.suite("redis", () => SemaphoreProviderRedis.layer({ redis: redisUrl, prefix: prefixes.next() }))

  /** A provider with its own client (another process, as far as Redis sees it), closed with the scope. */
  const provider = (prefix: string, options: SemaphoreProviderRedis.RedisProviderOptions = {}) =>
    Effect.map(Layer.build(SemaphoreProviderRedis.layer({ redis: redisUrl, prefix, ...options })), Context.get(SemaphoreProvider))

  const admin = Effect.acquireRelease(
    Effect.sync(() => new Redis(redisUrl)),
    (r) => Effect.sync(() => r.disconnect())
  )

  const holdOpen = (p: SemaphoreProvider["Service"], name: string, limit: number, timeout: Duration.Input = 0) =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const slot = yield* Scope.provide(p.tryAcquire(name, limit, timeout), scope)
      return { slot, close: Scope.close(scope, Exit.void) }
    })

  describe("SemaphoreProviderRedis: leases", () => {
    it.live("a holder whose process stops (no release, no heartbeat) loses the slot when its lease expires", () =>
      Effect.gen(function* () {
        const prefix = prefixes.next()
        const other = yield* provider(prefix)
        // the holder's provider lives in a scope we close without closing the slot's scope: a dead process
        const holderScope = yield* Scope.make()
        const holder = yield* Scope.provide(provider(prefix, { lease: "400 millis" }), holderScope)
        const held = yield* holdOpen(holder, "k", 1)
        expect(Option.isSome(held.slot)).toBe(true)
        yield* Scope.close(holderScope, Exit.void)
        expect(Option.isNone((yield* holdOpen(other, "k", 1)).slot)).toBe(true)
        const t0 = Date.now()
        const taken = yield* holdOpen(other, "k", 1, "5 seconds")
        expect(Option.isSome(taken.slot)).toBe(true)
        expect(Date.now() - t0).toBeLessThan(5_000)
        // the dead holder's late release (its client is gone) does not touch the new lease
        yield* held.close
        expect(Option.isNone((yield* holdOpen(other, "k", 1)).slot)).toBe(true)
        yield* taken.close
      }).pipe(Effect.scoped))

    it.live("the heartbeat keeps a held slot's lease alive across several lease lengths", () =>
      Effect.gen(function* () {
        const prefix = prefixes.next()
        const holder = yield* provider(prefix, { lease: "300 millis", heartbeat: "50 millis" })
        const other = yield* provider(prefix)
        const held = yield* holdOpen(holder, "k", 1)
        const slot = Option.getOrThrow(held.slot)
        // time passing is the subject here: four lease lengths
        yield* Effect.sleep("1200 millis")
        expect(Option.isNone((yield* holdOpen(other, "k", 1)).slot)).toBe(true)
        expect(Option.isNone(yield* Effect.timeoutOption(slot.lost, "10 millis"))).toBe(true)
        yield* held.close
        expect(Option.isSome((yield* holdOpen(other, "k", 1)).slot)).toBe(true)
      }).pipe(Effect.scoped))

    it.live("slot.lost completes when the heartbeat finds the lease gone, or taken over", () =>
      Effect.gen(function* () {
        const prefix = prefixes.next()
        const redis = yield* admin
        const holder = yield* provider(prefix, { lease: "5 seconds", heartbeat: "50 millis" })
        const a = yield* holdOpen(holder, "gone", 1)
        const b = yield* holdOpen(holder, "taken", 1)
        yield* Effect.promise(() => redis.del(`${prefix}gone`))
        yield* Effect.promise(() => redis.hset(`${prefix}taken`, "0", `someone-else|${Date.now() + 60_000}`))
        yield* Effect.timeout(Option.getOrThrow(a.slot).lost, "5 seconds")
        yield* Effect.timeout(Option.getOrThrow(b.slot).lost, "5 seconds")
        // releasing a lost slot leaves the new owner's lease alone
        yield* b.close
        expect(yield* Effect.promise(() => redis.hget(`${prefix}taken`, "0"))).toMatch(/^someone-else\|/)
        yield* a.close
      }).pipe(Effect.scoped))

    it.live("keys live under the prefix and expire: a hash outlives its newest lease by at most one lease", () =>
      Effect.gen(function* () {
        const prefix = prefixes.next()
        const redis = yield* admin
        const holder = yield* provider(prefix, { lease: "2 seconds" })
        const held = yield* holdOpen(holder, "k", 3)
        const ttl = yield* Effect.promise(() => redis.pttl(`${prefix}k`))
        expect(ttl).toBeGreaterThan(0)
        expect(ttl).toBeLessThanOrEqual(2_000)
        yield* held.close
        // no slot field is left; the name's last fencing token stays until the hash expires
        expect(yield* Effect.promise(() => redis.hkeys(`${prefix}k`))).toEqual(["fence"])
        const left = yield* Effect.promise(() => redis.pttl(`${prefix}k`))
        expect(left).toBeGreaterThan(0)
        expect(left).toBeLessThanOrEqual(2_000)
      }).pipe(Effect.scoped))
  })
}
