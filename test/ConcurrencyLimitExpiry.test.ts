/**
 * Admin overrides with an expiry (issue 17, item 3a): the manager's `get`/`list` on memory (driven by
 * TestClock) and PostgreSQL, input checks, and — through a real worker counting live holders — the
 * override's limit in force before the expiry and the declared limit after it. On PostgreSQL the
 * manager's `get` is counted to show the limit comes from the claim statement, not from a lookup.
 */
import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/testing/TestClock"
import {
  Concurrency,
  Contract,
  Handler,
  JobStoreMemory,
  JobStorePg,
  Publisher,
  Registry,
  Semaphore,
  SemaphoreProviderMemory,
  SemaphoreProviderPg,
  Worker
} from "warp-effect"
import { requeuedText } from "../src/internal/concurrency/ConcurrencyBehavior.js"
import * as ConcurrencyLimitManager from "../src/internal/concurrency/ConcurrencyLimitManager.js"
import * as ConcurrencyLimitResolver from "../src/internal/concurrency/ConcurrencyLimitResolver.js"
import * as Pages from "../src/internal/dashboard/Pages.js"
import { JobStore } from "../src/internal/store/JobStore.js"
import { freshPgLayer } from "./support/db.js"
import { HolderCounter } from "./support/holders.js"
import { counting } from "./support/limits.js"
import { detail, drained } from "./support/runtime.js"

const { ConcurrencyLimitManager: Limits } = ConcurrencyLimitManager

describe("admin overrides with an expiry, memory (TestClock)", () => {
  it.effect("applies until expiresIn has passed on the Clock, then get/list no longer return it and the declared limit resolves", () =>
    Effect.gen(function* () {
      const limits = yield* Limits
      yield* limits.addOrUpdateLimit("api", 2, { expiresIn: "1 minute" })
      yield* limits.addOrUpdateLimit("sticky", 7)
      const row = Option.getOrThrow(yield* limits.get("api"))
      expect(row.slots).toBe(2)
      expect(row.expiresAt?.getTime()).toBe(60_000)
      expect(Option.getOrThrow(yield* limits.get("sticky")).expiresAt).toBeUndefined()
      const before = yield* ConcurrencyLimitResolver.make(limits)
      expect(yield* before.limitFor("api", 5)).toBe(2)
      yield* TestClock.adjust("59999 millis")
      expect(Option.isSome(yield* limits.get("api"))).toBe(true)
      yield* TestClock.adjust("1 millis")
      expect(yield* limits.get("api")).toEqual(Option.none())
      expect((yield* limits.list).map((l) => l.key)).toEqual(["sticky"])
      const after = yield* ConcurrencyLimitResolver.make(limits)
      expect(yield* after.limitFor("api", 5)).toBe(5)
      expect(yield* after.limitFor("sticky", 5)).toBe(7)
      // the expired row was purged by list: removing it finds nothing
      expect(yield* limits.removeLimit("api")).toBe(false)
    }).pipe(Effect.provide(ConcurrencyLimitManager.layerMemory)))

  it.effect("expiresAt is an instant; a write without an expiry makes the override sticky again", () =>
    Effect.gen(function* () {
      const limits = yield* Limits
      yield* limits.addOrUpdateLimit("api", 3, { expiresAt: new Date(10_000) })
      expect(Option.getOrThrow(yield* limits.get("api")).expiresAt).toEqual(new Date(10_000))
      yield* limits.addOrUpdateLimit("api", 4)
      yield* TestClock.adjust("1 hour")
      expect(Option.getOrThrow(yield* limits.get("api")).slots).toBe(4)
    }).pipe(Effect.provide(ConcurrencyLimitManager.layerMemory)))
})

const managerLayers = [
  ["memory", () => ConcurrencyLimitManager.layerMemory],
  ["postgres", () => ConcurrencyLimitManager.layerPg.pipe(Layer.provideMerge(freshPgLayer(4)))]
] as const

for (const [name, layer] of managerLayers) {
  describe(`admin overrides with an expiry on ${name}`, () => {
    it.live("an expiry in the past is never returned; a future one is; bad expiries are InvalidPolicy", () =>
      Effect.gen(function* () {
        const limits = yield* Limits
        yield* limits.addOrUpdateLimit("past", 2, { expiresAt: new Date(Date.now() - 60_000) })
        yield* limits.addOrUpdateLimit("future", 3, { expiresAt: new Date(Date.now() + 3_600_000) })
        yield* limits.addOrUpdateLimit("later", 4, { expiresIn: "1 hour" })
        expect(yield* limits.get("past")).toEqual(Option.none())
        // removing an expired (not yet purged) override: no override was in force
        expect(yield* limits.removeLimit("past")).toBe(false)
        yield* limits.addOrUpdateLimit("past", 2, { expiresAt: new Date(Date.now() - 60_000) })
        const future = Option.getOrThrow(yield* limits.get("future"))
        expect(future.slots).toBe(3)
        expect(future.expiresAt).toBeInstanceOf(Date)
        expect((yield* limits.list).map((l) => [l.key, l.slots])).toEqual([
          ["future", 3],
          ["later", 4]
        ])
        const bad: ReadonlyArray<ConcurrencyLimitManager.LimitExpiry> = [
          { expiresAt: new Date(Number.NaN) },
          { expiresIn: "0 millis" },
          { expiresIn: -5 },
          { expiresIn: "soon" as any },
          { expiresAt: new Date(), expiresIn: "1 minute" }
        ]
        for (const expiry of bad) {
          const error = yield* Effect.flip(limits.addOrUpdateLimit("bad", 2, expiry))
          expect(error._tag).toBe("InvalidPolicy")
        }
        expect(yield* limits.get("bad")).toEqual(Option.none())
        // an existing override set again with an expiry already past is no longer in force
        yield* limits.addOrUpdateLimit("future", 3, { expiresAt: new Date(Date.now() - 1) })
        expect(yield* limits.get("future")).toEqual(Option.none())
      }).pipe(Effect.provide(layer())))
  })
}

describe("admin overrides with an expiry on PostgreSQL: purge", () => {
  it.live("list purges expired rows from the table", () =>
    Effect.gen(function* () {
      const limits = yield* Limits
      const sql = yield* SqlClient.SqlClient
      yield* limits.addOrUpdateLimit("gone", 2, { expiresAt: new Date(Date.now() - 1000) })
      yield* limits.addOrUpdateLimit("kept", 2)
      expect((yield* sql`SELECT key FROM warp_concurrency_limits ORDER BY key`).map((r: any) => r.key)).toEqual(["gone", "kept"])
      expect((yield* limits.list).map((l) => l.key)).toEqual(["kept"])
      expect((yield* sql`SELECT key FROM warp_concurrency_limits ORDER BY key`).map((r: any) => r.key)).toEqual(["kept"])
    }).pipe(Effect.provide(ConcurrencyLimitManager.layerPg.pipe(Layer.provideMerge(freshPgLayer(4))))))
})

// ---- through a worker: the override before its expiry, the declared limit after -----------------

const Work = Contract.job("ExpiryWork", Schema.Struct({ i: Schema.Number }))
const JOBS = 8


type Handlers = ReadonlyArray<Handler.JobHandler<any, any, never>>

const runtimes = [
  [
    "memory",
    (handlers: Handlers, calls: Map<string, number>) =>
      Publisher.layer.pipe(
        Layer.provideMerge(Registry.layer({ handlers })),
        Layer.provideMerge(counting(ConcurrencyLimitManager.layerMemory, calls)),
        Layer.provideMerge(SemaphoreProviderMemory.layer),
        Layer.provideMerge(JobStoreMemory.layer)
      )
  ],
  [
    "postgres",
    // the addon's migration runs before the store is built, so the store's claims read the override
    (handlers: Handlers, calls: Map<string, number>) =>
      Publisher.layer.pipe(
        Layer.provideMerge(Registry.layer({ handlers })),
        Layer.provideMerge(SemaphoreProviderPg.layer()),
        Layer.provideMerge(JobStorePg.layer),
        Layer.provideMerge(counting(ConcurrencyLimitManager.layerPg, calls)),
        Layer.provideMerge(freshPgLayer(30))
      )
  ]
] as const

/**
 * Waits until exactly `limit` handlers hold `key` and a surplus job was requeued with the audit text
 * naming `limit`. Dies if more than `bound` ever held it at once.
 */
const holdingAt = (key: string, limit: number, bound: number, holders: HolderCounter, timeoutMs = 20_000) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const start = Date.now()
    const text = requeuedText(key, limit)
    while (true) {
      const max = holders.max.get(key) ?? 0
      if (max > bound) return yield* Effect.die(new Error(`'${key}' had ${max} holders at once; at most ${bound} expected`))
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

for (const [name, env] of runtimes) {
  describe(`an expiring override at pickup on ${name}`, () => {
    it.live("admin 2 until its expiry, then the declared 5 from the next pickup", () => {
      const holders = new HolderCounter()
      const calls = new Map<string, number>()
      return Effect.gen(function* () {
        const release = yield* Deferred.make<void>()
        const handler = Handler.job(Work, () => holders.hold("api", Deferred.await(release)), { policy: [Semaphore("api", 5)] })
        yield* Effect.gen(function* () {
          const limits = yield* Limits
          // long enough that two holders are seen before it ends, short enough for a test
          yield* limits.addOrUpdateLimit("api", 2, { expiresIn: "3 seconds" })
          const p = yield* Publisher.Publisher
          const ids = yield* Effect.forEach(Array.from({ length: JOBS }, (_, i) => i), (i) => p.enqueue(Work, { i }))
          yield* Effect.scoped(
            Effect.gen(function* () {
              yield* Worker.make({ addons: [Concurrency.addon], concurrency: JOBS, pollInterval: "10 millis", gracePeriod: "1 second" })
              yield* holdingAt("api", 2, 2, holders)
              expect(holders.max.get("api")).toBe(2)
              // after the expiry, the claim (PostgreSQL) or the lookup (memory) no longer sees the override
              yield* holdingAt("api", 5, 5, holders)
              expect(yield* limits.get("api")).toEqual(Option.none())
              yield* Deferred.succeed(release, undefined)
              yield* drained(30_000)
            })
          )
          expect(holders.max.get("api")).toBe(5)
          for (const id of ids) expect((yield* detail(id)).job.state).toBe("Succeeded")
          if (name === "postgres") {
            // a row's first claim carries no key (its policy is not stamped yet), so each job's first
            // attempt asks `get` once; every later admission — all those after the expiry among them —
            // took the override from the claim statement (plus the test's own call above)
            expect(calls.get("api")).toBe(JOBS + 1)
          }
        }).pipe(Effect.provide(env([handler], calls)))
      })
    }, 60_000)
  })
}

describe("the dashboard's concurrency page", () => {
  it("shows each override's expiry ('never' for a sticky one), of keys and of groups", () => {
    const at = new Date("2030-01-02T03:04:05Z")
    const page = Pages.concurrencyPage(
      { prefix: "/warp", concurrency: true },
      {
        limits: [
          new ConcurrencyLimitManager.ConcurrencyLimit({ key: "a", slots: 2, updatedAt: new Date(0), expiresAt: at }),
          new ConcurrencyLimitManager.ConcurrencyLimit({ key: "b", slots: 3, updatedAt: new Date(0) })
        ],
        groups: [new ConcurrencyLimitManager.ConcurrencyGroupLimit({ group: "g", slots: 4, updatedAt: new Date(0), expiresAt: at })],
        token: undefined,
        fieldName: "csrf"
      }
    ).toString()
    expect(page).toContain("<th>Expires</th>")
    const cells = [...page.matchAll(/data-testid="expires">([^<]*)</g)].map((m) => m[1])
    expect(cells).toEqual([Pages.time(at), "never", Pages.time(at)])
    expect(page).toContain('data-group="g"')
  })
})
