/**
 * The live keys view of the PostgreSQL store at scale (issue 16): the ranking of every live key by
 * pressure is reused for a few seconds when it is costly, and refreshed behind the requests that use
 * it; the rows of a page are read live. Here reuse is forced on a small table (`reuseRankingFromMs:
 * 0`), on the TestClock: the ranking is kept 2 s (its floor), whatever it cost.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import * as TestClock from "effect/testing/TestClock"
import { Job } from "warp-effect"
import * as JobId from "../src/internal/job/JobId.js"
import * as KeyInsightPg from "../src/internal/store/KeyInsightPg.js"
import { JobStore } from "../src/internal/store/JobStore.js"
import * as JobStorePg from "../src/internal/store/JobStorePg.js"
import { freshPgLayer } from "./support/db.js"

const keyed = (key: string, ageMs: number): Job.NewJob => ({
  id: JobId.make(),
  type: "T",
  handler: null,
  payload: {},
  state: "Enqueued",
  scheduleTime: new Date(Date.now() - ageMs),
  metadata: { policies: { concurrency: { source: "enqueue", value: { key, limit: 1, mode: "Wait" } } } }
})

describe("KeyInsightPg: the ranking of live keys", () => {
  it.effect("is reused within its window (figures live), then refreshed behind the request that finds it old", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      const sql = yield* SqlClient.SqlClient
      const { service } = KeyInsightPg.makeWithStatements(sql, { reuseRankingFromMs: 0 })
      // created_at sets the age of a wait: "a" waits longer than "b"
      yield* store.insert([keyed("a", 0), keyed("b", 0)])
      yield* sql`UPDATE warp_jobs SET created_at = now() - CASE WHEN metadata #>> '{policies,concurrency,value,key}' = 'a' THEN interval '1 hour' ELSE interval '1 minute' END`
      const first = yield* service.liveKeys({ overrides: [], limit: 10, offset: 0 })
      expect(first.rows.map((r) => r.key)).toEqual(["a", "b"])
      expect(first.rankedAt).toBeUndefined()

      // "b" now has far more waiting than "a": by pressure it would come first
      yield* store.insert(Array.from({ length: 100 }, () => keyed("b", 0)))
      yield* sql`UPDATE warp_jobs SET created_at = now() - interval '1 minute' WHERE metadata #>> '{policies,concurrency,value,key}' = 'b'`
      const reused = yield* service.liveKeys({ overrides: [{ key: "admin-only", slots: 3 }], limit: 10, offset: 0 })
      // the order is the kept ranking's (admin-only keys rank with pressure 0), the figures are live
      expect(reused.rows.map((r) => r.key)).toEqual(["a", "b", "admin-only"])
      expect(reused.rows[1]!.waiting).toBe(101)
      expect(reused.rankedAt).toEqual(new Date(0))
      expect(reused.total).toBe(3)

      // past the window: this request still gets the kept ranking, and starts a new one behind it
      yield* TestClock.adjust(Duration.millis(2_001))
      const stale = yield* service.liveKeys({ overrides: [], limit: 10, offset: 0 })
      expect(stale.rows.map((r) => r.key)).toEqual(["a", "b"])
      expect(stale.rankedAt).toEqual(new Date(0))
      // the new ranking lands (it runs against the real database: poll for it, without moving the clock)
      let fresh = stale
      for (let i = 0; i < 500 && fresh.rankedAt?.getTime() !== 2_001; i++) {
        yield* Effect.yieldNow
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 10)))
        fresh = yield* service.liveKeys({ overrides: [], limit: 10, offset: 0 })
      }
      expect(fresh.rankedAt).toEqual(new Date(2_001))
      expect(fresh.rows.map((r) => r.key)).toEqual(["b", "a"])
    }).pipe(Effect.provide(JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer())))), 60_000)

  it("reuses only a costly ranking", () => {
    expect(KeyInsightPg.rankReuseMs(20)).toBe(0)
    expect(KeyInsightPg.rankReuseMs(KeyInsightPg.RANK_REUSE_FROM_MS)).toBe(2_000)
    expect(KeyInsightPg.rankReuseMs(1_500)).toBe(7_500)
    expect(KeyInsightPg.rankReuseMs(60_000)).toBe(30_000)
  })
})
