import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/testing/TestClock"
import { Contract, Handler, JobStoreMemory, JobStorePg, Mutex, Registry, Retry } from "warp-effect"
import { cancelledText } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import * as Recurring from "../../src/internal/job/Recurring.js"
import * as Scheduler from "../../src/internal/publisher/Scheduler.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { freshDatabaseUrl, pgLayer } from "../support/db.js"
import { backends, deploy, metadataOf, until, withWorker } from "./env.js"

const Report = Contract.job("Report", Schema.Struct({ kind: Schema.String, since: Schema.DateFromString }))
const payload = { kind: "daily", since: new Date("2030-01-01T00:00:00.000Z") }

describe("recurring declarations", () => {
  it("reject a bad cron or id at declaration; ticks and firing ids are deterministic", () => {
    expect(() => Recurring.make("r", Report, "not a cron", payload)).toThrow(/invalid cron expression 'not a cron'/)
    expect(() => Recurring.make("r", Report, "61 * * * *", payload)).toThrow(/InvalidRecurring|invalid cron/)
    expect(() => Recurring.make("  ", Report, "* * * * *", payload)).toThrow(/must not be empty/)
    const r = Recurring.make("every-10s", Report, "*/10 * * * * *", payload)
    expect(Recurring.nextTick(r, 0).getTime()).toBe(10_000)
    expect(Recurring.nextTick(r, 10_000).getTime()).toBe(20_000)
    expect(Recurring.nextTick(Recurring.make("m", Report, "0 3 * * *", payload), Date.parse("2030-01-01T05:00:00Z")).toISOString()).toBe(
      "2030-01-02T03:00:00.000Z"
    )
    const id = Recurring.firingId("every-10s", new Date(10_000))
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(Recurring.firingId("every-10s", new Date(10_000))).toBe(id)
    expect(Recurring.firingId("other", new Date(10_000))).not.toBe(id)
    // time-ordered like every job id: a later tick sorts after
    expect(Recurring.firingId("every-10s", new Date(20_000)) > id).toBe(true)
  })
})

describe("scheduler", () => {
  it.effect("fires every entry on its cron (TestClock); two scheduler fibers fire each tick once, with empty metadata", () =>
    Effect.gen(function* () {
      const every10s = Recurring.make("every-10s", Report, "*/10 * * * * *", payload)
      const everyMinute = Recurring.make("every-minute", Report, "0 * * * * *", { ...payload, kind: "minutely" })
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Scheduler.make
          yield* Scheduler.make
          for (let s = 0; s < 65; s++) yield* TestClock.adjust("1 second")
        })
      )
      const store = yield* JobStore
      const rows = (yield* store.list({ limit: 100, offset: 0 })).rows
      const fired = rows.map((j) => `${j.payload && (j.payload as any).kind}@${j.scheduleTime.getTime() / 1000}`).sort()
      expect(fired).toEqual(["daily@10", "daily@20", "daily@30", "daily@40", "daily@50", "daily@60", "minutely@60"].sort())
      for (const j of rows) {
        const r = (j.payload as any).kind === "daily" ? every10s : everyMinute
        expect(j.id).toBe(Recurring.firingId(r.id, j.scheduleTime))
        expect(j.type).toBe("Report")
        expect(j.handler).toBeNull()
        expect(j.metadata).toEqual({ policies: {} })
        // the payload went through the contract's schema
        expect((j.payload as any).since).toBe("2030-01-01T00:00:00.000Z")
      }
    }).pipe(
      Effect.provide(
        Layer.merge(
          JobStoreMemory.layer,
          Registry.layer({
            handlers: [],
            recurring: [
              Recurring.make("every-10s", Report, "*/10 * * * * *", payload),
              Recurring.make("every-minute", Report, "0 * * * * *", { ...payload, kind: "minutely" })
            ]
          })
        )
      )
    ))

  it.live("two schedulers on one PostgreSQL database (separate pools) fire each tick once", () => {
    const r = Recurring.make("every-second", Report, "* * * * * *", payload)
    return Effect.scoped(
      Effect.gen(function* () {
        const url = yield* freshDatabaseUrl
        const a = yield* Layer.build(JobStorePg.layer.pipe(Layer.provide(pgLayer(url, 3))))
        const b = yield* Layer.build(JobStorePg.layerWithoutMigrations.pipe(Layer.provide(pgLayer(url, 3))))
        const registry = yield* Layer.build(Registry.layer({ handlers: [], recurring: [r] }))
        // a firing a second scheduler finds already made is skipped, not an error
        const tick = new Date(Math.floor(Date.now() / 1000) * 1000 - 5000)
        expect(yield* Scheduler.fire(r, tick).pipe(Effect.provide(a))).toBe(true)
        expect(yield* Scheduler.fire(r, tick).pipe(Effect.provide(b))).toBe(false)
        yield* Scheduler.make.pipe(Effect.provide(Context.merge(a, registry)))
        yield* Scheduler.make.pipe(Effect.provide(Context.merge(b, registry)))
        const store = Context.get(a, JobStore)
        let rows = (yield* store.list({ limit: 100, offset: 0 })).rows
        const start = Date.now()
        while (new Set(rows.map((j) => j.scheduleTime.getTime())).size < 3 && Date.now() - start < 10_000) {
          yield* Effect.sleep("50 millis")
          rows = (yield* store.list({ limit: 100, offset: 0 })).rows
        }
        const ticks = rows.map((j) => j.scheduleTime.getTime())
        expect(new Set(ticks).size).toBeGreaterThanOrEqual(3)
        expect(ticks.length).toBe(new Set(ticks).size)
        for (const j of rows) expect(j.id).toBe(Recurring.firingId("every-second", j.scheduleTime))
      })
    )
  })
})

for (const [name, infra] of backends) {
  describe(`recurring firings on ${name}`, () => {
    it.live("bypass the publisher yet honour the contract's declared policy at execution", () => {
      const Nightly = Contract.job("Nightly", Schema.Struct({ region: Schema.String }), {
        policy: [Mutex("nightly", { mode: "Skip" }), Retry(2)]
      })
      const r1 = Recurring.make("nightly-eu", Nightly, "0 3 * * *", { region: "eu" })
      const r2 = Recurring.make("nightly-us", Nightly, "0 3 * * *", { region: "us" })
      return Effect.gen(function* () {
        const inside = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        let runs = 0
        const handler = Handler.job(Nightly, () =>
          Effect.sync(() => runs++).pipe(Effect.andThen(Deferred.succeed(inside, undefined)), Effect.andThen(Deferred.await(release)))
        )
        const tick = new Date(Date.now() - 1000)
        yield* Effect.gen(function* () {
          expect(yield* Scheduler.fire(r1, tick)).toBe(true)
          expect(yield* Scheduler.fire(r2, tick)).toBe(true)
          const ids = [Recurring.firingId(r1.id, tick), Recurring.firingId(r2.id, tick)]
          for (const id of ids) expect((yield* metadataOf(id)).policies).toEqual({})
          yield* withWorker(
            Effect.gen(function* () {
              yield* Deferred.await(inside)
              // the contract's Mutex (Skip) holds: the other firing is cancelled while the first runs
              yield* Effect.raceFirst(until(ids[0]!, (d) => d.job.state === "Deleted"), until(ids[1]!, (d) => d.job.state === "Deleted"))
              yield* Deferred.succeed(release, undefined)
              yield* Effect.forEach(ids, (id) => until(id, (d) => d.job.state === "Succeeded" || d.job.state === "Deleted"))
            })
          )
          expect(runs).toBe(1)
          const details = yield* Effect.forEach(ids, (id) => until(id, () => true))
          expect(details.map((d) => d.job.state).sort()).toEqual(["Deleted", "Succeeded"])
          expect(details.find((d) => d.job.state === "Deleted")!.logs.at(-1)!.message).toBe(cancelledText("nightly", 1))
          for (const id of ids) {
            expect((yield* metadataOf(id)).policies).toEqual({
              concurrency: { source: "contract", value: Mutex("nightly", { mode: "Skip" }).value },
              retry: { source: "contract", value: Retry(2).value }
            })
          }
        }).pipe(Effect.provide(deploy({ handlers: [handler], recurring: [r1, r2] })))
      }).pipe(Effect.provide(infra()))
    })
  })
}
