import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as JobId from "../src/job/JobId.js"
import type { NewJob } from "../src/job/Job.js"
import { Outcome } from "../src/job/Outcome.js"
import { JobStore } from "../src/store/JobStore.js"
import { stores } from "./support/stores.js"

const newJob = (over: Partial<NewJob> = {}): NewJob => ({
  id: JobId.make(),
  type: "T",
  handler: null,
  payload: { n: 1 },
  state: "Enqueued",
  scheduleTime: new Date(Date.now() - 1000),
  metadata: { policies: {} },
  ...over
})

const lease = Duration.seconds(30)

// One contract, run against every store implementation.
for (const [name, makeLayer] of stores) {
  describe(`JobStore contract: ${name}`, () => {
    it.live("insert then get returns the row with an Enqueued audit entry", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const j = newJob()
        yield* store.insert([j])
        const d = Option.getOrThrow(yield* store.get(j.id))
        expect(d.job.state).toBe("Enqueued")
        expect(d.job.payload).toEqual({ n: 1 })
        expect(d.job.attempt).toBe(0)
        expect(d.logs.map((l) => l.kind)).toEqual(["Enqueued"])
      }).pipe(Effect.provide(makeLayer())))

    it.live("fetch claims only due rows, marks Processing and bumps attempt", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const due = newJob()
        const later = newJob({ state: "Scheduled", scheduleTime: new Date(Date.now() + 3_600_000) })
        yield* store.insert([due, later])
        const got = yield* store.fetch("w1", 10, lease)
        expect(got.map((j) => j.id)).toEqual([due.id])
        expect(got[0]!.state).toBe("Processing")
        expect(got[0]!.attempt).toBe(1)
        expect(got[0]!.lockedBy).toBe("w1")
        expect(yield* store.fetch("w2", 10, lease)).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("concurrent fetches never hand one row to two workers", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const rows = Array.from({ length: 60 }, () => newJob())
        yield* store.insert(rows)
        const claims = yield* Effect.all(
          Array.from({ length: 12 }, (_, w) =>
            Effect.gen(function* () {
              const mine: Array<string> = []
              while (true) {
                const got = yield* store.fetch(`w${w}`, 2, lease)
                if (got.length === 0) return mine
                mine.push(...got.map((j) => j.id))
              }
            })
          ),
          { concurrency: "unbounded" }
        )
        const all = claims.flat()
        expect(all.length).toBe(60)
        expect(new Set(all).size).toBe(60)
      }).pipe(Effect.provide(makeLayer())))

    it.live("finalize writes state, metadata, one audit entry and counters once", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const j = newJob({ type: "Mail" })
        yield* store.insert([j])
        const [claimed] = yield* store.fetch("w1", 1, lease)
        const meta = { policies: {}, stampedAt: "2026-01-01T00:00:00.000Z" }
        expect(yield* store.finalize({ job: claimed!, workerId: "w1", outcome: Outcome.Succeeded(), metadata: meta })).toBe(true)
        // a second finalize of the same claim writes nothing
        expect(yield* store.finalize({ job: claimed!, workerId: "w1", outcome: Outcome.Succeeded(), metadata: meta })).toBe(false)
        const d = Option.getOrThrow(yield* store.get(j.id))
        expect(d.job.state).toBe("Succeeded")
        expect(d.job.metadata).toEqual(meta)
        expect(d.job.lockedBy).toBeNull()
        expect(d.logs.map((l) => l.kind)).toEqual(["Enqueued", "Processing", "Succeeded"])
        const c = yield* store.counters
        expect(c.get("stats:succeeded")).toBe(1)
        expect(c.get("stats:succeeded:Mail")).toBe(1)
      }).pipe(Effect.provide(makeLayer())))

    it.live("finalize by a worker that lost its claim writes nothing", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const j = newJob()
        yield* store.insert([j])
        const [claimed] = yield* store.fetch("w1", 1, lease)
        expect(yield* store.finalize({ job: claimed!, workerId: "other", outcome: Outcome.Failed({ error: "x" }), metadata: {} })).toBe(false)
        expect(Option.getOrThrow(yield* store.get(j.id)).job.state).toBe("Processing")
      }).pipe(Effect.provide(makeLayer())))

    it.live("Requeued goes back to Enqueued now (or Scheduled later) with the reason in the audit trail", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const a = newJob()
        const b = newJob()
        yield* store.insert([a, b])
        const got = yield* store.fetch("w1", 2, lease)
        const byId = new Map(got.map((j) => [j.id, j]))
        yield* store.finalize({ job: byId.get(a.id)!, workerId: "w1", outcome: Outcome.Requeued({ reason: "Requeued — 'k' full (1 slots)" }), metadata: {} })
        yield* store.finalize({
          job: byId.get(b.id)!,
          workerId: "w1",
          outcome: Outcome.Requeued({ reason: "retry", at: new Date(Date.now() + 3_600_000) }),
          metadata: {}
        })
        const da = Option.getOrThrow(yield* store.get(a.id))
        expect(da.job.state).toBe("Enqueued")
        expect(da.logs.at(-1)).toMatchObject({ kind: "Requeued", message: "Requeued — 'k' full (1 slots)" })
        expect(Option.getOrThrow(yield* store.get(b.id)).job.state).toBe("Scheduled")
        // a is due again, b is not
        expect((yield* store.fetch("w2", 10, lease)).map((j) => j.id)).toEqual([a.id])
        expect((yield* store.counters).get("stats:requeued")).toBe(2)
      }).pipe(Effect.provide(makeLayer())))

    it.live("an expired lease is recovered by the next fetch; the old claim can no longer finalize", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const j = newJob()
        yield* store.insert([j])
        const [first] = yield* store.fetch("dead", 1, Duration.millis(1))
        yield* Effect.sleep("20 millis")
        const [again] = yield* store.fetch("alive", 1, lease)
        expect(again!.id).toBe(j.id)
        expect(again!.attempt).toBe(2)
        expect(yield* store.finalize({ job: first!, workerId: "dead", outcome: Outcome.Succeeded(), metadata: {} })).toBe(false)
        expect(yield* store.finalize({ job: again!, workerId: "alive", outcome: Outcome.Succeeded(), metadata: {} })).toBe(true)
        const d = Option.getOrThrow(yield* store.get(j.id))
        expect(d.logs.map((l) => l.kind)).toEqual(["Enqueued", "Processing", "Recovered", "Succeeded"])
      }).pipe(Effect.provide(makeLayer())))

    it.live("heartbeat keeps a lease alive", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const j = newJob()
        yield* store.insert([j])
        yield* store.fetch("w1", 1, Duration.millis(50))
        yield* store.heartbeat("w1", [j.id], Duration.seconds(30))
        yield* Effect.sleep("80 millis")
        expect(yield* store.fetch("w2", 1, lease)).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("list pages newest first and counts by state", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const rows = Array.from({ length: 5 }, () => newJob())
        yield* store.insert(rows)
        yield* store.fetch("w", 1, lease)
        const page = yield* store.list({ limit: 2, offset: 0 })
        expect(page.total).toBe(5)
        expect(page.rows.map((r) => r.id)).toEqual([rows[4]!.id, rows[3]!.id])
        const enq = yield* store.list({ state: "Enqueued", limit: 10, offset: 0 })
        expect(enq.total).toBe(4)
        const counts = yield* store.countByState
        expect(counts.Enqueued).toBe(4)
        expect(counts.Processing).toBe(1)
      }).pipe(Effect.provide(makeLayer())))
  })
}
