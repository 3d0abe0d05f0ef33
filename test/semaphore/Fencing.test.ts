/**
 * Fencing tokens: every acquisition yields a number that only grows per slot name, across provider
 * restarts too, and the handler of a keyed job gets it. A resource that keeps the highest token it has
 * seen refuses a stale holder — the one answer to a holder paused longer than any lease.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { Contract, Handler, Mutex, Publisher, SemaphoreProviderMemory, SemaphoreProviderPg, Warp } from "warp-effect"
import { SemaphoreProviderRedis } from "warp-effect/redis"
import { SemaphoreProvider } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { sharedDatabase } from "./pg.js"
import { redisReachable, redisUrl, runPrefix } from "./redis.js"

const db = sharedDatabase()
const prefixes = runPrefix()
const reachable = await redisReachable()

type ProviderLayer = Layer.Layer<SemaphoreProvider, unknown>
const providers: ReadonlyArray<readonly [string, () => ProviderLayer]> = [
  ["postgres", () => SemaphoreProviderPg.layer().pipe(Layer.provide(db.pool(4)))],
  ...(reachable ? [["redis", () => SemaphoreProviderRedis.layer({ redis: redisUrl, prefix: prefixes.next() })] as const] : [])
]

/** A provider built in the current scope ("a process"; a second build is the process restarted). */
const build = (layer: ProviderLayer): Effect.Effect<SemaphoreProvider["Service"], unknown, Scope.Scope> =>
  Effect.map(Layer.build(layer), Context.get(SemaphoreProvider))

const fenceOf = (p: SemaphoreProvider["Service"], name: string) =>
  Effect.scoped(Effect.map(p.tryAcquire(name, 1, 0), (slot) => Option.getOrThrow(slot).fence!))

describe("fencing tokens", () => {
  for (const [name, layerOf] of providers) {
    it.live(`${name}: grow with every acquisition of a name, and across a provider restart`, () =>
      Effect.gen(function* () {
        const layer = layerOf()
        const key = `fence:${Math.random().toString(36).slice(2)}`
        const first = yield* Effect.scoped(Effect.flatMap(build(layer), (p) => Effect.all([fenceOf(p, key), fenceOf(p, key), fenceOf(p, key)])))
        expect(typeof first[0]).toBe("bigint")
        expect(first[0] < first[1] && first[1] < first[2]).toBe(true)
        // the process restarts: a new provider on the same database / server
        const after = yield* Effect.scoped(Effect.flatMap(build(layer), (p) => fenceOf(p, key)))
        expect(after > first[2]!).toBe(true)
      })
    )
  }

  it.live("postgres: a resource keeping the highest token refuses the write of a holder whose slot was granted again", () =>
    Effect.gen(function* () {
      const c = yield* db.client
      const table = `fenced_${Math.random().toString(36).slice(2, 8)}`
      yield* Effect.promise(() => c.query(`CREATE TABLE ${table} (id int PRIMARY KEY, value text, fence bigint NOT NULL DEFAULT 0)`))
      yield* Effect.promise(() => c.query(`INSERT INTO ${table} (id, value) VALUES (1, 'initial')`))
      /** The README's pattern: the write lands only with a token newer than the last one seen. */
      const write = (value: string, token: bigint) =>
        Effect.promise(() => c.query(`UPDATE ${table} SET value = $1, fence = $2 WHERE id = 1 AND fence < $2`, [value, token.toString()])).pipe(
          Effect.map((r) => r.rowCount)
        )
      const p = yield* build(SemaphoreProviderPg.layer().pipe(Layer.provide(db.pool(4))))
      const key = `fence:${Math.random().toString(36).slice(2)}`
      // a holder takes the slot, then stalls (a long pause) ...
      const stale = yield* fenceOf(p, key)
      // ... its slot is granted again meanwhile, and the new holder writes
      const fresh = yield* fenceOf(p, key)
      expect(yield* write("from the new holder", fresh)).toBe(1)
      // the stale holder wakes up and writes: refused
      expect(yield* write("from the paused holder", stale)).toBe(0)
      const row = yield* Effect.promise(() => c.query(`SELECT value FROM ${table} WHERE id = 1`))
      expect(row.rows[0].value).toBe("from the new holder")
    }).pipe(Effect.scoped)
  )

  it.live("a keyed job's handler gets its slot and fencing token; a keyless one gets none", () =>
    Effect.gen(function* () {
      const Keyed = Contract.job("FenceKeyed", Schema.Struct({}), { policy: [Mutex("fence-key")] })
      const Plain = Contract.job("FencePlain", Schema.Struct({}))
      const keyed = yield* Deferred.make<Handler.AttemptInfo>()
      const plain = yield* Deferred.make<Handler.AttemptInfo>()
      const handlers = [Handler.job(Keyed, (_, info) => Deferred.succeed(keyed, info)), Handler.job(Plain, (_, info) => Deferred.succeed(plain, info))]
      yield* Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        yield* p.enqueue(Keyed, {})
        yield* p.enqueue(Plain, {})
        const k = yield* Deferred.await(keyed)
        expect(k.slot?.key).toBe("fence-key")
        expect(k.slot?.index).toBe(0)
        expect(typeof k.slot?.fence).toBe("bigint")
        expect((yield* Deferred.await(plain)).slot).toBeUndefined()
      }).pipe(
        Effect.provide(Warp.layerMemory({ handlers, worker: { pollInterval: "5 millis" }, semaphoreProvider: SemaphoreProviderMemory.layer }))
      )
    })
  )
})
