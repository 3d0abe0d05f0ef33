/**
 * Admin overrides of concurrency limits: the ConcurrencyLimitManager on memory and PostgreSQL, input
 * validation, precedence at every pickup (admin row > declared > 1), stickiness across a redeploy, and
 * the per-attempt ConcurrencyLimitResolver.
 *
 * Limits are observed, not inferred: handlers block on a Deferred while the test counts live holders
 * (HolderCounter) and waits until exactly the expected number hold the key AND a surplus job has been
 * requeued with the audit text naming that limit. Then it releases them.
 */
import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  Concurrency,
  Contract,
  Handler,
  Job,
  JobMetadata,
  JobParameters,
  JobStoreMemory,
  JobStorePg,
  Policy,
  Publisher,
  Registry,
  Semaphore,
  SemaphoreProviderMemory,
  SemaphoreProviderPg,
  Worker
} from "warp-effect"
import * as ConcurrencyBehavior from "../src/internal/concurrency/ConcurrencyBehavior.js"
import { requeuedText } from "../src/internal/concurrency/ConcurrencyBehavior.js"
import * as ConcurrencyLimitManager from "../src/internal/concurrency/ConcurrencyLimitManager.js"
import * as ConcurrencyLimitResolver from "../src/internal/concurrency/ConcurrencyLimitResolver.js"
import { ConcurrencyPolicy } from "../src/internal/policy/PolicyValues.js"
import { JobStore } from "../src/internal/store/JobStore.js"
import { freshDatabaseUrl, freshPgLayer, pgLayer } from "./support/db.js"
import { HolderCounter } from "./support/holders.js"
import { counting } from "./support/limits.js"
import { detail, drained } from "./support/runtime.js"

const { ConcurrencyLimitManager: Limits } = ConcurrencyLimitManager


/** The rows as the storage holds them (the table itself on PostgreSQL). */
const stored = Effect.gen(function* () {
  const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
  if (Option.isSome(sql)) {
    const rows = yield* sql.value<{ key: string; slots: number }>`SELECT key, slots FROM warp_concurrency_limits ORDER BY key`
    return rows.map((r) => ({ key: r.key, slots: Number(r.slots) }))
  }
  return (yield* (yield* Limits).list).map((l) => ({ key: l.key, slots: l.slots }))
})

const managerLayers = [
  ["memory", () => ConcurrencyLimitManager.layerMemory],
  ["postgres", () => ConcurrencyLimitManager.layerPg.pipe(Layer.provideMerge(freshPgLayer(4)))]
] as const

for (const [name, layer] of managerLayers) {
  describe(`ConcurrencyLimitManager on ${name}`, () => {
    it.live("adds, updates, gets, lists (by key) and removes limits", () =>
      Effect.gen(function* () {
        const limits = yield* Limits
        expect(yield* limits.list).toEqual([])
        expect(yield* limits.get("payment-api")).toEqual(Option.none())
        yield* limits.addOrUpdateLimit("payment-api", 10)
        yield* limits.addOrUpdateLimit("cache-refresh", 1)
        const first = Option.getOrThrow(yield* limits.get("payment-api"))
        expect(first.slots).toBe(10)
        expect(first.updatedAt).toBeInstanceOf(Date)
        expect((yield* limits.list).map((l) => [l.key, l.slots])).toEqual([
          ["cache-refresh", 1],
          ["payment-api", 10]
        ])
        yield* limits.addOrUpdateLimit("payment-api", 3)
        const second = Option.getOrThrow(yield* limits.get("payment-api"))
        expect(second.slots).toBe(3)
        expect(second.updatedAt.getTime()).toBeGreaterThanOrEqual(first.updatedAt.getTime())
        expect((yield* limits.list).length).toBe(2)
        expect(yield* stored).toEqual([
          { key: "cache-refresh", slots: 1 },
          { key: "payment-api", slots: 3 }
        ])
        // keys are exact: case, unicode and the longest accepted key
        const long = "k".repeat(Policy.MAX_KEY_LENGTH)
        yield* limits.addOrUpdateLimit("Payment-API", 4)
        yield* limits.addOrUpdateLimit("ключ:🙂", 2)
        yield* limits.addOrUpdateLimit(long, 2_147_483_647)
        expect(Option.getOrThrow(yield* limits.get("ключ:🙂")).slots).toBe(2)
        expect(Option.getOrThrow(yield* limits.get(long)).slots).toBe(2_147_483_647)
        expect(Option.getOrThrow(yield* limits.get("payment-api")).slots).toBe(3)
        expect(Option.getOrThrow(yield* limits.get("Payment-API")).slots).toBe(4)

        expect(yield* limits.removeLimit("payment-api")).toBe(true)
        expect(yield* limits.get("payment-api")).toEqual(Option.none())
        expect(yield* limits.removeLimit("payment-api")).toBe(false)
        expect((yield* limits.list).map((l) => l.key)).toEqual(["Payment-API", "cache-refresh", long, "ключ:🙂"].sort())
      }).pipe(Effect.provide(layer())))

    it.live("refuses slots that are not an integer >= 1 and blank or oversized keys with InvalidPolicy, writing nothing", () =>
      Effect.gen(function* () {
        const limits = yield* Limits
        yield* limits.addOrUpdateLimit("existing", 4)
        const before = yield* stored
        const badSlots: ReadonlyArray<unknown> = [0, -1, 1.5, Number.NaN, Number("abc"), "abc", "5", Number.POSITIVE_INFINITY, 2_147_483_648, null]
        const badKeys: ReadonlyArray<unknown> = ["", "   ", "\t\n", "k".repeat(10 * 1024), "k".repeat(Policy.MAX_KEY_LENGTH + 1), "nul\u0000key", null, undefined]
        const attempts: Array<[unknown, unknown]> = [
          ...badSlots.flatMap((slots): Array<[unknown, unknown]> => [
            ["fresh", slots],
            ["existing", slots]
          ]),
          ...badKeys.map((key): [unknown, unknown] => [key, 3])
        ]
        for (const [key, slots] of attempts) {
          const error = yield* Effect.flip(limits.addOrUpdateLimit(key as string, slots as number))
          const label = `${String(key).slice(0, 20)} / ${String(slots)}`
          expect(error._tag, label).toBe("InvalidPolicy")
          if (error._tag === "InvalidPolicy") expect(error.family, label).toBe("concurrency")
        }
        expect(yield* stored).toEqual(before)
        expect(Option.getOrThrow(yield* limits.get("existing")).slots).toBe(4)
        expect(yield* limits.get("fresh")).toEqual(Option.none())
        // a key no layer can hold is simply absent (PostgreSQL text cannot contain NUL)
        expect(yield* limits.get("nul\u0000key")).toEqual(Option.none())
        expect(yield* limits.removeLimit("nul\u0000key")).toBe(false)
      }).pipe(Effect.provide(layer())))
  })
}

// ---- precedence at every pickup, through a worker ----------------------------------------------

const Work = Contract.job("LimitWork", Schema.Struct({ i: Schema.Number }))
const JOBS = 8

type Handlers = ReadonlyArray<Handler.JobHandler<any, any, never>>

const runtimes = [
  [
    "memory",
    (handlers: Handlers, calls = new Map<string, number>()) =>
      Publisher.layer.pipe(
        Layer.provideMerge(Registry.layer({ handlers })),
        Layer.provideMerge(counting(ConcurrencyLimitManager.layerMemory, calls)),
        Layer.provideMerge(SemaphoreProviderMemory.layer),
        Layer.provideMerge(JobStoreMemory.layer)
      )
  ],
  [
    "postgres",
    (handlers: Handlers, calls = new Map<string, number>()) =>
      Publisher.layer.pipe(
        Layer.provideMerge(Registry.layer({ handlers })),
        Layer.provideMerge(counting(ConcurrencyLimitManager.layerPg, calls)),
        Layer.provideMerge(SemaphoreProviderPg.layer()),
        Layer.provideMerge(JobStorePg.layer),
        Layer.provideMerge(freshPgLayer(30))
      )
  ]
] as const

/** A handler that holds `key` (counted) until `release` completes. */
const blocking = (key: string, holders: HolderCounter, release: Deferred.Deferred<void>, declared: ReadonlyArray<ReturnType<typeof Semaphore>> = []) =>
  Handler.job(Work, () => holders.hold(key, Deferred.await(release)), { policy: declared })

/**
 * Waits until exactly `limit` handlers hold `key` and a surplus job was requeued with the audit text
 * naming `limit` — the limit the gate resolved. Fails at once if more than `limit` ever held it.
 */
const holdingAt = (key: string, limit: number, holders: HolderCounter, timeoutMs = 20_000) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const start = Date.now()
    const text = requeuedText(key, limit)
    while (true) {
      const max = holders.max.get(key) ?? 0
      if (max > limit) return yield* Effect.die(new Error(`'${key}' had ${max} holders at once; the limit in force should be ${limit}`))
      if (holders.current(key) === limit) {
        const page = yield* store.list({ limit: 100, offset: 0 })
        const logs = yield* Effect.forEach(page.rows, (j) => store.get(j.id))
        if (logs.some((d) => Option.isSome(d) && d.value.logs.some((l) => l.message === text))) return
      }
      if (Date.now() - start > timeoutMs) {
        return yield* Effect.die(new Error(`waited ${timeoutMs} ms for ${limit} holders of '${key}' and a requeue "${text}"; saw ${holders.current(key)} (max ${max})`))
      }
      yield* Effect.sleep("15 millis")
    }
  })

/** Enqueues `JOBS` jobs, starts a worker with more fibers than jobs, and checks `key` runs at `limit`. */
const observeLimit = (key: string, limit: number, holders: HolderCounter, release: Deferred.Deferred<void>, params?: JobParameters.JobParameters) =>
  Effect.gen(function* () {
    const p = yield* Publisher.Publisher
    const ids = yield* Effect.forEach(Array.from({ length: JOBS }, (_, i) => i), (i) => p.enqueue(Work, { i }, params))
    yield* Effect.scoped(
      Effect.gen(function* () {
        yield* Worker.make({ addons: [Concurrency.addon], concurrency: JOBS, pollInterval: "10 millis", gracePeriod: "1 second" })
        yield* holdingAt(key, limit, holders)
        yield* Deferred.succeed(release, undefined)
        yield* drained(30_000)
      })
    )
    expect(holders.max.get(key)).toBe(limit)
    for (const id of ids) expect((yield* detail(id)).job.state).toBe("Succeeded")
    return ids
  })

for (const [name, env] of runtimes) {
  describe(`limit precedence at pickup on ${name}`, () => {
    it.live("the declared limit applies without an admin row", () => {
      const holders = new HolderCounter()
      return Effect.gen(function* () {
        const release = yield* Deferred.make<void>()
        yield* observeLimit("api", 3, holders, release).pipe(Effect.provide(env([blocking("api", holders, release, [Semaphore("api", 3)])])))
      })
    })

    it.live("a key with no declared limit runs at 1", () => {
      const holders = new HolderCounter()
      const params = JobParameters.make().configure(Concurrency.ConcurrencyMetadata, (m) => {
        m.key = "solo"
        m.mode = "Wait"
      })
      return Effect.gen(function* () {
        const release = yield* Deferred.make<void>()
        yield* observeLimit("solo", 1, holders, release, params).pipe(Effect.provide(env([blocking("solo", holders, release)])))
      })
    })

    it.live("an admin row below the declared limit wins (admin 2, declared 5)", () => {
      const holders = new HolderCounter()
      return Effect.gen(function* () {
        const release = yield* Deferred.make<void>()
        yield* Effect.gen(function* () {
          yield* (yield* Limits).addOrUpdateLimit("payment-api", 2)
          yield* observeLimit("payment-api", 2, holders, release)
        }).pipe(Effect.provide(env([blocking("payment-api", holders, release, [Semaphore("payment-api", 5)])])))
      })
    })

    it.live("an admin row above an enqueue-time limit wins (admin 4, withSemaphore 2)", () => {
      const holders = new HolderCounter()
      return Effect.gen(function* () {
        const release = yield* Deferred.make<void>()
        yield* Effect.gen(function* () {
          yield* (yield* Limits).addOrUpdateLimit("exports", 4)
          yield* observeLimit("exports", 4, holders, release, JobParameters.make().withSemaphore("exports", 2))
        }).pipe(Effect.provide(env([blocking("exports", holders, release)])))
      })
    })

    it.live("an admin change is seen at the next pickup, and removing it restores the declared limit", () => {
      const holders = new HolderCounter()
      return Effect.gen(function* () {
        const release = yield* Deferred.make<void>()
        yield* Effect.gen(function* () {
          const limits = yield* Limits
          yield* limits.addOrUpdateLimit("api", 2)
          const p = yield* Publisher.Publisher
          yield* Effect.forEach(Array.from({ length: JOBS }, (_, i) => i), (i) => p.enqueue(Work, { i }))
          yield* Effect.scoped(
            Effect.gen(function* () {
              yield* Worker.make({ addons: [Concurrency.addon], concurrency: JOBS, pollInterval: "10 millis", gracePeriod: "1 second" })
              yield* holdingAt("api", 2, holders)
              yield* limits.addOrUpdateLimit("api", 3)
              yield* holdingAt("api", 3, holders)
              expect(holders.max.get("api")).toBe(3)
              expect(yield* limits.removeLimit("api")).toBe(true)
              yield* holdingAt("api", 5, holders)
              yield* Deferred.succeed(release, undefined)
              yield* drained(30_000)
            })
          )
          expect(holders.max.get("api")).toBe(5)
        }).pipe(Effect.provide(env([blocking("api", holders, release, [Semaphore("api", 5)])])))
      })
    })

    it.live("a worker looks the admin row up at most once per attempt of a keyed job, never for a keyless one", () => {
      const calls = new Map<string, number>()
      const Plain = Contract.job("LimitPlain", Schema.Struct({ i: Schema.Number }))
      const holders = new HolderCounter()
      const handlers = [
        Handler.job(Work, () => holders.hold("api", Effect.sleep("5 millis")), { policy: [Semaphore("api", 2)] }),
        Handler.job(Plain, () => Effect.void)
      ]
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        yield* (yield* Limits).addOrUpdateLimit("api", 1)
        const keyed = yield* Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) => p.enqueue(Work, { i }))
        yield* Effect.forEach(Array.from({ length: 5 }, (_, i) => i), (i) => p.enqueue(Plain, { i }))
        yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 4, pollInterval: "5 millis" }), drained(30_000)))
        let attempts = 0
        let requeues = 0
        for (const id of keyed) {
          const d = yield* detail(id)
          expect(d.job.state).toBe("Succeeded")
          attempts += d.job.attempt
          requeues += d.logs.filter((l) => l.message === requeuedText("api", 1)).length
        }
        expect(holders.max.get("api")).toBe(1)
        // every gate refusal was one lookup; no pickup (a handler run or a refusal, which takes no
        // attempt) looked up twice; keyless jobs never looked up
        const lookups = calls.get("api") ?? 0
        expect(lookups).toBeGreaterThanOrEqual(Math.max(1, requeues))
        expect(lookups).toBeLessThanOrEqual(attempts + requeues)
        expect([...calls.keys()]).toEqual(["api"])
      }).pipe(Effect.provide(env(handlers, calls)))
    })
  })
}

describe("admin rows are sticky across a redeploy (PostgreSQL)", () => {
  it.live("a new Registry declaring Semaphore('payment-api', 5) runs with the admin's 2 until removeLimit", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const url = yield* freshDatabaseUrl
        const deploy = (handlers: Handlers) =>
          Publisher.layer.pipe(
            Layer.provideMerge(Registry.layer({ handlers })),
            Layer.provideMerge(Concurrency.layer),
            Layer.provideMerge(SemaphoreProviderPg.layer()),
            Layer.provideMerge(JobStorePg.layer),
            Layer.provideMerge(pgLayer(url, 30))
          )

        // Deploy 1 (declares 3): an operator sets the admin limit.
        const first = new HolderCounter()
        const r1 = yield* Deferred.make<void>()
        yield* Effect.gen(function* () {
          yield* (yield* Limits).addOrUpdateLimit("payment-api", 2)
        }).pipe(Effect.provide(deploy([blocking("payment-api", first, r1, [Semaphore("payment-api", 3)])])))

        // Deploy 2 (declares 5), over the same database: still 2 until the row is removed.
        const holders = new HolderCounter()
        const r2 = yield* Deferred.make<void>()
        yield* Effect.gen(function* () {
          const ids = yield* observeLimit("payment-api", 2, holders, r2)
          const stamp = JobMetadata.decode((yield* detail(ids[0]!)).job.metadata)
          // the row carries the declared policy; the admin limit is resolved live, never stamped
          expect(stamp._tag === "Success" && stamp.success.policies.concurrency).toMatchObject({ source: "handler", value: { key: "payment-api", limit: 5 } })
        }).pipe(Effect.provide(deploy([blocking("payment-api", holders, r2, [Semaphore("payment-api", 5)])])))

        // Deploy 3 (declares 5 again) after the operator removed the row: 5.
        const after = new HolderCounter()
        const r3 = yield* Deferred.make<void>()
        yield* Effect.gen(function* () {
          expect(yield* (yield* Limits).removeLimit("payment-api")).toBe(true)
          yield* observeLimit("payment-api", 5, after, r3)
        }).pipe(Effect.provide(deploy([blocking("payment-api", after, r3, [Semaphore("payment-api", 5)])])))
      })
    ))
})

describe("ConcurrencyLimitResolver", () => {
  const attemptWith = (concurrency?: ConcurrencyPolicy): Job.Attempt =>
    ({ job: { id: "job", scheduleTime: new Date() }, policies: concurrency === undefined ? {} : { concurrency } }) as unknown as Job.Attempt

  it.effect("the gate resolves the limit with exactly one lookup per attempt, and none for a keyless attempt", () => {
    const calls = new Map<string, number>()
    return Effect.gen(function* () {
      const limits = yield* Limits
      const gate = ConcurrencyBehavior.make(yield* SemaphoreProviderMemory.make, limits, yield* JobStoreMemory.make)
      const keyed = attemptWith(new ConcurrencyPolicy({ key: "a", limit: 3, mode: "Wait" }))
      const ran = Effect.succeed(Job.Outcome.Succeeded())
      for (let i = 1; i <= 3; i++) {
        expect((yield* Effect.scoped(gate.wrap(keyed, ran)))._tag).toBe("Succeeded")
        expect(calls.get("a")).toBe(i)
      }
      // admin 1: an attempt running inside another attempt of the key finds it full; one lookup each
      yield* limits.addOrUpdateLimit("a", 1)
      const nested = yield* Effect.scoped(gate.wrap(keyed, Effect.scoped(gate.wrap(keyed, ran))))
      expect(nested).toEqual(Job.Outcome.Requeued({ reason: requeuedText("a", 1) }))
      expect(calls.get("a")).toBe(5)
      expect((yield* Effect.scoped(gate.wrap(attemptWith(), ran)))._tag).toBe("Succeeded")
      expect([...calls.keys()]).toEqual(["a"])
    }).pipe(Effect.provide(counting(ConcurrencyLimitManager.layerMemory, calls)))
  })

  it.effect("admin row > declared > 1, each key looked up at most once per resolver (one attempt)", () => {
    const calls = new Map<string, number>()
    return Effect.gen(function* () {
      const limits = yield* Limits
      yield* limits.addOrUpdateLimit("a", 2)
      const attempt1 = yield* ConcurrencyLimitResolver.make(limits)
      expect(yield* attempt1.limitFor("a", 5)).toBe(2)
      expect(yield* attempt1.limitFor("a", 5)).toBe(2)
      expect(yield* attempt1.limitFor("b", 4)).toBe(4)
      expect(yield* attempt1.limitFor("b", 4)).toBe(4)
      expect(yield* attempt1.limitFor("c", undefined)).toBe(1)
      expect(yield* attempt1.limitFor("c", undefined)).toBe(1)
      expect(Object.fromEntries(calls)).toEqual({ a: 1, b: 1, c: 1 })

      // an admin change: the running attempt keeps what it resolved; the next attempt sees it
      yield* limits.addOrUpdateLimit("a", 7)
      yield* limits.addOrUpdateLimit("b", 9)
      expect(yield* attempt1.limitFor("a", 5)).toBe(2)
      const attempt2 = yield* ConcurrencyLimitResolver.make(limits)
      expect(yield* attempt2.limitFor("a", 5)).toBe(7)
      expect(yield* attempt2.limitFor("b", 4)).toBe(9)
      yield* limits.removeLimit("a")
      const attempt3 = yield* ConcurrencyLimitResolver.make(limits)
      expect(yield* attempt3.limitFor("a", 5)).toBe(5)
      expect(Object.fromEntries(calls)).toEqual({ a: 3, b: 2, c: 1 })
    }).pipe(Effect.provide(counting(ConcurrencyLimitManager.layerMemory, calls)))
  })

  it.effect("a failed lookup is an error, not a silent fallback to the declared limit", () => {
    const failing = Layer.succeed(Limits, {
      addOrUpdateLimit: () => Effect.void,
      removeLimit: () => Effect.succeed(false),
      list: Effect.succeed([]),
      get: () => Effect.fail(new ConcurrencyLimitManager.LimitStoreError({ operation: "get", cause: "down" })),
      addOrUpdateGroupLimit: () => Effect.void,
      removeGroupLimit: () => Effect.succeed(false),
      listGroupLimits: Effect.succeed([]),
      getGroupLimit: () => Effect.succeed(Option.none())
    })
    return Effect.gen(function* () {
      const resolver = yield* ConcurrencyLimitResolver.make(yield* Limits)
      const error = yield* Effect.flip(resolver.limitFor("a", 5))
      expect(error._tag).toBe("LimitStoreError")
    }).pipe(Effect.provide(failing))
  })
})
