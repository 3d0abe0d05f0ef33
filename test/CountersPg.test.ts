/**
 * PostgreSQL counters are sharded: finalizing writes spread over the rows of a counter, and the store
 * reads a counter as the sum of its rows.
 */
import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { JobStorePg, Outcome } from "warp-effect"
import { JobStore } from "../src/internal/store/JobStore.js"
import { COUNTER_SHARDS } from "../src/internal/store/JobStorePg.js"
import { freshPgLayer } from "./support/db.js"

describe("PostgreSQL counters", () => {
  it.live("concurrent finalizes spread over shards; each counter reads as the sum of its rows", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      const sql = yield* SqlClient.SqlClient
      const n = 64
      const at = new Date(Date.now() - 1000)
      yield* store.insert(
        Array.from({ length: n }, (_, i) => ({ id: `c-${i}`, type: i % 2 === 0 ? "Even" : "Odd", handler: null, payload: {}, state: "Enqueued" as const, scheduleTime: at, metadata: {} }))
      )
      const claimed = yield* store.fetch("w1", n, Duration.seconds(30))
      expect(claimed).toHaveLength(n)
      yield* Effect.forEach(
        claimed,
        (job, i) =>
          store.finalize({ job, workerId: "w1", outcome: i % 4 === 0 ? Outcome.Requeued({ reason: "again" }) : Outcome.Succeeded(), metadata: {} }),
        { concurrency: 8 }
      )
      const counters = yield* store.counters
      const requeued = claimed.filter((_, i) => i % 4 === 0)
      expect(counters.get("stats:requeued")).toBe(requeued.length)
      expect(counters.get("stats:succeeded")).toBe(n - requeued.length)
      expect(counters.get("stats:succeeded:Even")).toBe(claimed.filter((j, i) => i % 4 !== 0 && j.type === "Even").length)
      expect(counters.get("stats:succeeded:Odd")).toBe(claimed.filter((j, i) => i % 4 !== 0 && j.type === "Odd").length)
      // 48 writes on one of 16 shards each: more than one row holds the counter
      const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM warp_counters WHERE key = 'stats:succeeded'`
      expect(rows[0]!.n).toBeGreaterThan(1)
      expect(rows[0]!.n).toBeLessThanOrEqual(COUNTER_SHARDS)
    }).pipe(Effect.provide(Layer.provideMerge(JobStorePg.layer, freshPgLayer()))))
})
