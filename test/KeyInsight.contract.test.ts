/**
 * The key views (`JobStoreService.insight`), one contract against the memory and PostgreSQL stores:
 * live keys with holders, waiting counts, declared and admin limits, windowed outcomes, the pressure
 * sort and paging, and a job's position in its key's waiting line.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as JobId from "../src/internal/job/JobId.js"
import { Job } from "warp-effect"
import { JobStore } from "../src/internal/store/JobStore.js"
import { stores } from "./support/stores.js"

const lease = Duration.seconds(30)

const keyed = (key: string, limit: number, over: Partial<Job.NewJob> = {}): Job.NewJob => ({
  id: JobId.make(),
  type: "T",
  handler: null,
  payload: {},
  state: "Enqueued",
  scheduleTime: new Date(Date.now() - 60_000),
  metadata: { policies: { concurrency: { source: "enqueue", value: { key, limit, mode: "Wait" } } } },
  ...over
})
const plain = (): Job.NewJob => ({ ...keyed("x", 1), metadata: { policies: {} } })

/** Inserts rows one at a time (distinct creation times, in order). */
const submit = (rows: ReadonlyArray<Job.NewJob>) => Effect.flatMap(JobStore, (store) => Effect.forEach(rows, (r) => store.insert([r]), { discard: true }))

/**
 * Lets the clock move past the last insert: the memory store reads time in whole milliseconds, and a
 * pressure (waiting × age) is 0 at age 0. This is not synchronization; nothing runs concurrently.
 */
const tick = Effect.sleep("3 millis")

/**
 * Claims `n` rows for `workerId`, one claim at a time: a claim takes at most one keyed Wait row (the
 * claim's admission), and a row of a full key only when nothing admissible is due.
 */
const claimN = (workerId: string, n: number) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const out: Array<Job.Job> = []
    while (out.length < n) {
      const got = yield* store.fetch(workerId, 1, lease)
      if (got.length === 0) break
      out.push(...got)
    }
    return out
  })

for (const [name, makeLayer] of stores) {
  describe(`KeyInsight contract: ${name}`, () => {
    it.live("lists live keys with holders, waiting counts, limits and overrides, by pressure", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        // "zz-hot": 2 running (claimed first: earliest ScheduleTime), 3 waiting, older than every "aa-cool" row
        const hotRunning = [keyed("zz-hot", 2, { scheduleTime: new Date(Date.now() - 120_000) }), keyed("zz-hot", 2, { scheduleTime: new Date(Date.now() - 119_000) })]
        yield* submit(hotRunning)
        const claimed = yield* claimN("worker-A", 2)
        expect(claimed.map((j) => j.id).sort()).toEqual(hotRunning.map((j) => j.id).sort())
        const hotWaiting = [keyed("zz-hot", 2), keyed("zz-hot", 3), keyed("zz-hot", 2)]
        yield* submit(hotWaiting)
        yield* tick
        // "aa-cool": 1 waiting, and one Scheduled tomorrow (live, not waiting)
        yield* submit([keyed("aa-cool", 5), keyed("aa-cool", 5, { state: "Scheduled", scheduleTime: new Date(Date.now() + 86_400_000) }), plain()])
        yield* tick
        const page = yield* store.insight.liveKeys({ overrides: [{ key: "mm-admin-only", slots: 7 }, { key: "aa-cool", slots: 9 }], limit: 10, offset: 0 })
        expect(page.total).toBe(3)
        expect(page.rows.map((r) => r.key)).toEqual(["zz-hot", "aa-cool", "mm-admin-only"])
        const [hot, cool, adminOnly] = page.rows
        expect(hot!.running).toBe(2)
        expect(hot!.waiting).toBe(3)
        expect(hot!.declared).toEqual({ min: 2, max: 3 })
        expect(hot!.adminSlots).toBeNull()
        expect(hot!.holders.map((h) => h.id).sort()).toEqual(hotRunning.map((j) => j.id).sort())
        expect(hot!.holders.every((h) => h.workerId === "worker-A" && h.type === "T")).toBe(true)
        expect(hot!.holders[0]!.since.getTime()).toBe(claimed.find((j) => j.id === hot!.holders[0]!.id)!.updatedAt.getTime())
        expect(hot!.waitingSince).not.toBeNull()
        expect(hot!.pressure).toBeGreaterThan(cool!.pressure)
        expect(cool!.running).toBe(0)
        expect(cool!.waiting).toBe(1)
        expect(cool!.adminSlots).toBe(9)
        expect(cool!.pressure).toBeGreaterThan(0)
        expect(adminOnly).toMatchObject({ key: "mm-admin-only", running: 0, waiting: 0, adminSlots: 7, declared: null, pressure: 0, waitingSince: null })

        // paging: the same order, one row at a time, each key once
        const one = yield* Effect.forEach([0, 1, 2, 3], (offset) => store.insight.liveKeys({ overrides: [{ key: "mm-admin-only", slots: 7 }], limit: 1, offset }))
        expect(one.map((p) => p.rows.map((r) => r.key))).toEqual([["zz-hot"], ["aa-cool"], ["mm-admin-only"], []])
        expect(one.map((p) => p.total)).toEqual([3, 3, 3, 3])
        expect((yield* store.insight.liveKeys({ overrides: [], limit: -1, offset: 0 })).rows).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("counts requeued, succeeded and deleted outcomes of a key's jobs in the last windows", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const rows = [keyed("k", 1), keyed("k", 1), keyed("k", 1), keyed("k", 1), keyed("other", 1)]
        yield* submit(rows)
        const claimed = yield* claimN("w", 5)
        const byId = new Map(claimed.map((j) => [j.id, j]))
        const fin = (i: number, outcome: Job.Outcome) => store.finalize({ job: byId.get(rows[i]!.id)!, workerId: "w", outcome, metadata: rows[i]!.metadata })
        yield* fin(0, Job.Outcome.Succeeded())
        yield* fin(1, Job.Outcome.Deleted({ reason: "'k' full (1 slots)" }))
        yield* fin(2, Job.Outcome.Requeued({ reason: "'k' full (1 slots)" }))
        yield* fin(3, Job.Outcome.Requeued({ reason: "'k' full (1 slots)" }))
        yield* fin(4, Job.Outcome.Requeued({ reason: "'other' full (1 slots)" }))
        // the requeued job runs again and succeeds
        const again = yield* store.fetch("w", 1, lease)
        yield* store.finalize({ job: again[0]!, workerId: "w", outcome: Job.Outcome.Succeeded(), metadata: again[0]!.metadata })
        const page = yield* store.insight.liveKeys({ overrides: [], limit: 10, offset: 0 })
        const k = page.rows.find((r) => r.key === "k")!
        for (const w of ["5m", "1h", "24h"] as const) {
          expect(k.windows[w], w).toEqual({ requeued: 2, succeeded: 2, deleted: 0 + 1 })
        }
        expect(page.rows.find((r) => r.key === "other")!.windows["5m"]).toEqual({ requeued: 1, succeeded: 0, deleted: 0 })
      }).pipe(Effect.provide(makeLayer())))

    it.live("a running job whose row does not carry its key yet counts as a holder from its worker's report", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const first = plain()
        const stamped = keyed("rep-other", 1)
        yield* submit([first, stamped])
        const claimed = yield* store.fetch("rep-worker", 2, lease)
        expect(claimed).toHaveLength(2)
        // the report names both; only the row without a key counts (the other carries its own key)
        yield* store.reportWorker({
          workerId: "rep-worker", host: "h", pid: 1, lanes: 2, inFlight: 2, heartbeatMs: 1000,
          slots: [{ key: "rep-k", held: 2, jobs: [{ id: first.id, limit: 2, source: "contract" }, { id: stamped.id, limit: 1, source: "handler" }] }]
        })
        // a report by another worker than the row's claimant counts for nothing
        yield* store.reportWorker({ workerId: "rep-liar", host: "h", pid: 2, lanes: 1, inFlight: 0, heartbeatMs: 1000, slots: [{ key: "rep-lie", held: 1, jobs: [{ id: first.id, limit: 1, source: "handler" }] }] })
        const page = yield* store.insight.liveKeys({ overrides: [], limit: 10, offset: 0 })
        const rep = page.rows.find((r) => r.key === "rep-k")
        expect(rep?.running).toBe(1)
        expect(rep?.holders.map((h) => [h.id, h.workerId])).toEqual([[first.id, "rep-worker"]])
        expect(page.rows.map((r) => r.key)).not.toContain("rep-lie")
        expect((yield* store.insight.line("rep-k", { id: first.id, override: null })).summary.running).toBe(1)
        // once the attempt ends, the report no longer counts (the row is not Processing)
        yield* store.finalize({ job: claimed.find((j) => j.id === first.id)!, workerId: "rep-worker", outcome: Job.Outcome.Succeeded(), metadata: first.metadata })
        const after = yield* store.insight.liveKeys({ overrides: [], limit: 10, offset: 0 })
        expect(after.rows.map((r) => r.key)).not.toContain("rep-k")
      }).pipe(Effect.provide(makeLayer())))

    it.live("a job's line: its key's holders and limit, and how many waiting rows are ahead of it", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const t = Date.now() - 60_000
        const holder = keyed("line", 1, { scheduleTime: new Date(t - 10_000) })
        yield* submit([holder])
        yield* store.fetch("w-hold", 1, lease)
        const waiting = [0, 1, 2, 3].map((i) => keyed("line", 1, { scheduleTime: new Date(t + i * 1000) }))
        // inserted out of order: the position follows ScheduleTime, not insertion
        yield* submit([waiting[2]!, waiting[0]!, waiting[3]!, waiting[1]!, keyed("elsewhere", 1, { scheduleTime: new Date(t - 5000) })])
        const lines = yield* Effect.forEach(waiting, (j) => store.insight.line("line", { id: j.id, override: 3 }))
        expect(lines.map((l) => l.ahead)).toEqual([0, 1, 2, 3])
        const s = lines[2]!.summary
        expect(s).toMatchObject({ key: "line", running: 1, waiting: 4, adminSlots: 3, declared: { min: 1, max: 1 } })
        expect(s.holders.map((h) => [h.id, h.workerId])).toEqual([[holder.id, "w-hold"]])
        // a key with no rows at all
        const none = yield* store.insight.line("nobody", { id: "missing", override: null })
        expect(none).toMatchObject({ ahead: 0, summary: { key: "nobody", running: 0, waiting: 0, declared: null, holders: [] } })
      }).pipe(Effect.provide(makeLayer())))
  })
}
