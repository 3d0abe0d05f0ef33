/**
 * The PostgreSQL store batches the finalizing writes of attempts that end together: one write that
 * PostgreSQL refuses fails only its own attempt, and the others of its batch are written.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import { Job, JobStorePg } from "warp-effect"
import { JobStore } from "../src/internal/store/JobStore.js"
import { freshPgLayer } from "./support/db.js"

describe("PostgreSQL batched finalizing writes", () => {
  it.live("a write PostgreSQL refuses fails alone; the rest of its batch is written", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      const at = new Date(Date.now() - 1000)
      yield* store.insert(Array.from({ length: 20 }, (_, i) => ({ id: `b-${i}`, type: "T", handler: null, payload: {}, state: "Enqueued" as const, scheduleTime: at, metadata: {} })))
      const claimed = yield* store.fetch("w1", 20, Duration.seconds(30))
      expect(claimed).toHaveLength(20)
      // jsonb refuses a NUL character: the metadata of job 7 cannot be stored
      const results = yield* Effect.forEach(
        claimed,
        (job) =>
          Effect.result(store.finalize({ job, workerId: "w1", outcome: Job.Outcome.Succeeded(), metadata: job.id === "b-7" ? { bad: "a\u0000b" } : { ok: job.id } })),
        { concurrency: "unbounded" }
      )
      const failed = claimed.filter((_, i) => Result.isFailure(results[i]!)).map((j) => j.id)
      expect(failed).toEqual(["b-7"])
      expect(results.filter(Result.isSuccess).every((r) => r.success === true)).toBe(true)
      for (const job of claimed) {
        const d = Option.getOrThrow(yield* store.get(job.id))
        expect(d.job.state).toBe(job.id === "b-7" ? "Processing" : "Succeeded")
      }
      expect((yield* store.counters).get("stats:succeeded")).toBe(19)
    }).pipe(Effect.provide(JobStorePg.layer.pipe(Layer.provide(freshPgLayer())))))
})
