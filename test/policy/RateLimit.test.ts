import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/testing/TestClock"
import * as SqlClient from "effect/sql/SqlClient"
import {
  Contract,
  Handler,
  JobStoreMemory,
  JobStorePg,
  Policy,
  Publisher,
  RateLimit,
  RateLimitAddon,
  Worker
} from "warp-effect"
import { limitedText } from "../../src/internal/ratelimit/RateLimitBehavior.js"
import * as RateLimiter from "../../src/internal/ratelimit/RateLimiter.js"
import type { JobStore } from "../../src/internal/store/JobStore.js"
import { freshPgLayer } from "../support/db.js"
import { deploy, until, withWorker } from "./env.js"

const policy = (key: string, limit: number, windowMs: number) => new Policy.RateLimitPolicy({ key, limit, windowMs })

describe("rate limiter (memory, TestClock)", () => {
  it.effect("admits `limit` starts per fixed window and points the surplus at the next window's opening", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter.makeMemory
      const p = policy("api", 3, 1000)
      yield* TestClock.adjust("2500 millis") // t = 2500: inside the window [2000, 3000)
      const first = yield* Effect.forEach([1, 2, 3, 4, 5], () => limiter.tryStart(p))
      expect(first.map((a) => a._tag)).toEqual(["Admitted", "Admitted", "Admitted", "Limited", "Limited"])
      expect(first.slice(0, 3).map((a) => (a._tag === "Admitted" ? a.count : 0))).toEqual([1, 2, 3])
      expect(first[3]).toEqual(RateLimiter.Admission.Limited({ key: "api", limit: 3, windowStart: new Date(2000), nextWindow: new Date(3000) }))
      // another key has its own windows
      expect((yield* limiter.tryStart(policy("other", 1, 1000)))._tag).toBe("Admitted")
      yield* TestClock.adjust("499 millis") // t = 2999: still full
      expect((yield* limiter.tryStart(p))._tag).toBe("Limited")
      expect(yield* limiter.current("api", 1000)).toBe(3)
      yield* TestClock.adjust("1 millis") // t = 3000: the next window opens
      const next = yield* limiter.tryStart(p)
      expect(next).toEqual(RateLimiter.Admission.Admitted({ key: "api", limit: 3, count: 1, windowStart: new Date(3000) }))
    }))
})

describe("rate limiter (PostgreSQL)", () => {
  it.live("concurrent starts from many fibers: exactly `limit` admitted per window (atomic upsert)", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter.makePg
      const p = policy("shared-api", 5, 60_000)
      const results = yield* Effect.all(Array.from({ length: 24 }, () => limiter.tryStart(p)), { concurrency: "unbounded" })
      const windows = new Map<number, { admitted: Array<number>; limited: number }>()
      for (const r of results) {
        const w = windows.get(r.windowStart.getTime()) ?? { admitted: [], limited: 0 }
        windows.set(r.windowStart.getTime(), w)
        if (r._tag === "Admitted") w.admitted.push(r.count)
        else {
          w.limited++
          expect(r.nextWindow.getTime()).toBe(r.windowStart.getTime() + 60_000)
        }
        expect(r.windowStart.getTime() % 60_000).toBe(0)
      }
      // (a window boundary may fall inside the burst: each window is checked on its own)
      for (const [, w] of windows) {
        expect(w.admitted.length).toBe(Math.min(5, w.admitted.length + w.limited))
        expect(w.admitted.sort((a, b) => a - b)).toEqual(Array.from({ length: w.admitted.length }, (_, i) => i + 1))
      }
      expect(yield* limiter.current("shared-api", 60_000)).toBeLessThanOrEqual(5)
    }).pipe(Effect.provide(JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer(30))))))
})

/** A limiter that records what it answered (and who asked), around a real one. */
const spying = (admitted: Array<{ key: string; windowStart: number }>, calls: Array<string>) => (real: RateLimiter.RateLimiterService): RateLimiter.RateLimiterService => ({
  ...real,
  tryStart: (p) =>
    Effect.tap(real.tryStart(p), (a) =>
      Effect.sync(() => {
        calls.push(p.key)
        if (a._tag === "Admitted") admitted.push({ key: a.key, windowStart: a.windowStart.getTime() })
      })
    )
})

const setups: ReadonlyArray<
  readonly [string, Effect.Effect<RateLimiter.RateLimiterService, never, SqlClient.SqlClient>, () => Layer.Layer<JobStore | SqlClient.SqlClient, unknown>]
> = [
  ["memory", RateLimiter.makeMemory, () => Layer.merge(JobStoreMemory.layer, Layer.succeed(SqlClient.SqlClient, undefined as never))],
  ["postgres", RateLimiter.makePg, () => JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer(20))) as Layer.Layer<JobStore | SqlClient.SqlClient, unknown>]
]

for (const [name, makeLimiter, store] of setups) {
  describe(`rate-limit addon on ${name}`, () => {
    it.live("N starts per window across two workers; surplus requeued to the next window with an audit reason; keyless jobs never ask", () => {
      const Call = Contract.job("Call", Schema.Struct({ i: Schema.Number }), { policy: [RateLimit("partner-api", 3, "500 millis")] })
      const Free = Contract.job("Free", Schema.Struct({}))
      const admitted: Array<{ key: string; windowStart: number }> = []
      const calls: Array<string> = []
      let runs = 0
      const handlers = [Handler.job(Call, () => Effect.sync(() => runs++)), Handler.job(Free, () => Effect.void)]
      const addon = Layer.effect(RateLimiter.RateLimiter, Effect.map(makeLimiter, spying(admitted, calls)))
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const ids = yield* Effect.forEach([1, 2, 3, 4, 5, 6, 7], (i) => p.enqueue(Call, { i }))
        const free = yield* p.enqueue(Free, {})
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* Worker.make({ concurrency: 2, pollInterval: "5 millis", workerId: "w1", addons: [RateLimitAddon.addon] })
            yield* Worker.make({ concurrency: 2, pollInterval: "5 millis", workerId: "w2", addons: [RateLimitAddon.addon] })
            yield* Effect.forEach([...ids, free], (id) => until(id, (d) => d.job.state === "Succeeded"))
          })
        )
        expect(runs).toBe(7)
        // every job was admitted exactly once, never more than 3 in one window
        expect(admitted.length).toBe(7)
        const perWindow = new Map<number, number>()
        for (const a of admitted) perWindow.set(a.windowStart, (perWindow.get(a.windowStart) ?? 0) + 1)
        expect(Math.max(...perWindow.values())).toBeLessThanOrEqual(3)
        expect(perWindow.size).toBeGreaterThanOrEqual(3)
        expect(calls.every((k) => k === "partner-api")).toBe(true)
        // the surplus waited for the next window: Requeued with the reason, claimed again no earlier than it
        let requeued = 0
        for (const id of ids) {
          const logs = (yield* until(id, () => true)).logs
          logs.forEach((l, i) => {
            if (l.kind !== "Requeued") return
            requeued++
            const at = new Date(l.message.slice(l.message.lastIndexOf(" ") + 1))
            expect(at.getTime() % 500).toBe(0)
            expect(l.message).toBe(limitedText("partner-api", 3, 500, at))
            expect(l.message).toMatch(/^Rate limited — 'partner-api' at 3 starts per 500ms; requeued to the next window at /)
            expect(logs[i + 1]!.at.getTime()).toBeGreaterThanOrEqual(at.getTime())
          })
        }
        // (whether any job had to wait depends on how fast the workers claimed: the next test forces it)
      }).pipe(Effect.provide(deploy({ handlers })), Effect.provide(addon.pipe(Layer.provideMerge(store()))))
    })

    it.live("over the limit: Requeued with `at` = the next window's opening, the audit reason, and the handler not run", () => {
      const Call = Contract.job("Hourly", Schema.Struct({ i: Schema.Number }), { policy: [RateLimit("partner-api", 3, "1 minute")] })
      const admitted: Array<{ key: string; windowStart: number }> = []
      let runs = 0
      const addon = Layer.effect(RateLimiter.RateLimiter, Effect.map(makeLimiter, spying(admitted, [])))
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const ids = yield* Effect.forEach([1, 2, 3, 4], (i) => p.enqueue(Call, { i }))
        yield* withWorker(
          Effect.forEach(ids, (id) => until(id, (d) => d.job.state === "Succeeded" || (d.job.state === "Scheduled" && d.logs.some((l) => l.kind === "Requeued")))),
          { concurrency: 2, addons: [RateLimitAddon.addon] }
        )
        const windows = new Set(admitted.map((a) => a.windowStart))
        if (admitted.length === 4) {
          // the burst straddled a minute boundary: still never 4 in one window
          expect(windows.size).toBe(2)
          return
        }
        expect(runs).toBe(3)
        const [waiting] = yield* Effect.filter(ids, (id) => Effect.map(until(id, () => true), (d) => d.job.state === "Scheduled"))
        const d = yield* until(waiting!, () => true)
        const next = [...windows][0]! + 60_000
        expect(d.job.scheduleTime.getTime()).toBe(next)
        expect(d.logs.at(-1)!.message).toBe(limitedText("partner-api", 3, 60_000, new Date(next)))
        expect(d.logs.at(-1)!.message).toBe(
          `Rate limited — 'partner-api' at 3 starts per 1m; requeued to the next window at ${new Date(next).toISOString()}`
        )
      }).pipe(
        Effect.provide(deploy({ handlers: [Handler.job(Call, () => Effect.sync(() => runs++))] })),
        Effect.provide(addon.pipe(Layer.provideMerge(store())))
      )
    })
  })
}
