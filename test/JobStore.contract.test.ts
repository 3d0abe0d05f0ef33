import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as JobId from "../src/internal/job/JobId.js"
import { Job } from "warp-effect"
import { JobStore } from "../src/internal/store/JobStore.js"
import { stores } from "./support/stores.js"

const newJob = (over: Partial<Job.NewJob> = {}): Job.NewJob => ({
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

/** A row of a Fifo-mode key, as `withSemaphore(key, limit, "Fifo")` stores it at publish. */
const fifoJob = (key: string, limit: number, over: Partial<Job.NewJob> = {}): Job.NewJob =>
  newJob({ metadata: { policies: { concurrency: { source: "enqueue", value: { key, limit, mode: "Fifo" } } } }, ...over })

/** A row of a weighted (fair-share) key, as `withSemaphore(key, limit, "Wait", { weight })` stores it at publish. */
const fairJob = (key: string, weight: number, over: Partial<Job.NewJob> = {}): Job.NewJob =>
  newJob({ metadata: { policies: { concurrency: { source: "enqueue", value: { key, limit: 100, mode: "Wait", weight } } } }, ...over })

/** The flow (concurrency key) of a claimed row, or "plain". */
const flowOf = (j: { readonly metadata: unknown }): string => (j.metadata as any)?.policies?.concurrency?.value?.key ?? "plain"

/** Claims one row at a time until none is due, finalizing each as Succeeded; the claim sequence. */
const claimAll = (limit = 1) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const seq: Array<Job.Job> = []
    while (true) {
      const got = yield* store.fetch("w", limit, lease)
      if (got.length === 0) return seq
      for (const j of got) {
        seq.push(j)
        yield* store.finalize({ job: j, workerId: "w", outcome: Job.Outcome.Succeeded(), metadata: j.metadata })
      }
    }
  })

/** Inserts rows one at a time, so each gets its own creation time (submission order). */
const submit = (rows: ReadonlyArray<Job.NewJob>) => Effect.flatMap(JobStore, (store) => Effect.forEach(rows, (r) => store.insert([r]), { discard: true }))

const ids = (jobs: ReadonlyArray<{ readonly id: string }>) => jobs.map((j) => j.id)

/**
 * The rows of the fair-merge tests, inserted: hot (weight 1) tags 1..6 at -6000 .. -1000 ms; c (weight 3),
 * inserted after, tags 1.33 and 1.67 at -500, -400 ms; three rows without a weight at -5500, -2500, -50 ms.
 */
const mergeRows = Effect.gen(function* () {
  const store = yield* JobStore
  const t = Date.now()
  const at = (ms: number) => new Date(t - ms)
  const hot = [6000, 5000, 4000, 3000, 2000, 1000].map((ms) => fairJob("hot", 1, { scheduleTime: at(ms) }))
  const c = [500, 400].map((ms) => fairJob("c", 3, { scheduleTime: at(ms) }))
  const plain = [5500, 2500, 50].map((ms) => newJob({ scheduleTime: at(ms) }))
  yield* store.insert(hot)
  yield* store.insert(c)
  yield* store.insert(plain)
  return { hot, c, plain }
})

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
        expect(yield* store.finalize({ job: claimed!, workerId: "w1", outcome: Job.Outcome.Succeeded(), metadata: meta })).toBe(true)
        // a second finalize of the same claim writes nothing
        expect(yield* store.finalize({ job: claimed!, workerId: "w1", outcome: Job.Outcome.Succeeded(), metadata: meta })).toBe(false)
        const d = Option.getOrThrow(yield* store.get(j.id))
        expect(d.job.state).toBe("Succeeded")
        expect(d.job.metadata).toEqual(meta)
        expect(d.job.lockedBy).toBeNull()
        expect(d.logs.map((l) => l.kind)).toEqual(["Enqueued", "Processing", "Succeeded"])
        const c = yield* store.counters
        expect(c.get("stats:succeeded")).toBe(1)
        expect(c.get("stats:succeeded:Mail")).toBe(1)
      }).pipe(Effect.provide(makeLayer())))

    it.live("finalizes of many attempts at once (batched by the PostgreSQL store) each write their own outcome", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const rows = Array.from({ length: 48 }, (_, i) => newJob({ type: i % 2 === 0 ? "A" : "B" }))
        yield* store.insert(rows)
        const claimed = yield* store.fetch("w1", 48, lease)
        expect(claimed.length).toBe(48)
        const later = new Date(Date.now() + 3_600_000)
        // six kinds of ending, one per job in turn; the sixth is finalized by a worker that does not own it
        const ending = (i: number) => {
          switch (i % 6) {
            case 0:
              return { outcome: Job.Outcome.Succeeded(), workerId: "w1" }
            case 1:
              return { outcome: Job.Outcome.Failed({ error: `boom ${i}` }), workerId: "w1" }
            case 2:
              return { outcome: Job.Outcome.Requeued({ reason: `back ${i}`, at: later }), workerId: "w1" }
            case 3:
              return { outcome: Job.Outcome.Requeued({ reason: `kept ${i}`, keepsPlace: true }), workerId: "w1", handlerRan: false }
            case 4:
              return { outcome: Job.Outcome.Deleted({ reason: `gone ${i}` }), workerId: "w1" }
            default:
              return { outcome: Job.Outcome.Succeeded(), workerId: "someone-else" }
          }
        }
        const written = yield* Effect.forEach(
          claimed,
          (j, i) => store.finalize({ job: j, metadata: { policies: {}, n: i }, ...ending(i) }),
          { concurrency: "unbounded" }
        )
        expect(written).toEqual(claimed.map((_, i) => i % 6 !== 5))
        for (const [i, j] of claimed.entries()) {
          const d = Option.getOrThrow(yield* store.get(j.id))
          const last = d.logs.at(-1)!
          switch (i % 6) {
            case 0:
              expect([d.job.state, last.kind, d.job.metadata]).toEqual(["Succeeded", "Succeeded", { policies: {}, n: i }])
              break
            case 1:
              expect([d.job.state, last.message]).toEqual(["Failed", `boom ${i}`])
              break
            case 2:
              expect([d.job.state, last.message, d.job.scheduleTime.getTime()]).toEqual(["Scheduled", `back ${i}`, later.getTime()])
              break
            case 3:
              // keeps its place and gives back the attempt number the claim took
              expect([d.job.state, d.job.attempt, d.job.scheduleTime.getTime()]).toEqual(["Enqueued", 0, j.scheduleTime.getTime()])
              break
            case 4:
              expect([d.job.state, last.message]).toEqual(["Deleted", `gone ${i}`])
              break
            default:
              expect([d.job.state, d.job.lockedBy]).toEqual(["Processing", "w1"])
          }
          expect(d.logs.filter((l) => l.kind !== "Enqueued" && l.kind !== "Processing").length).toBe(i % 6 === 5 ? 0 : 1)
        }
        const c = yield* store.counters
        expect([c.get("stats:succeeded"), c.get("stats:succeeded:A"), c.get("stats:failed"), c.get("stats:deleted")]).toEqual([8, 8, 8, 8])
        expect(c.get("stats:requeued")).toBe(16)
      }).pipe(Effect.provide(makeLayer())))

    it.live("finalize by a worker that lost its claim writes nothing", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const j = newJob()
        yield* store.insert([j])
        const [claimed] = yield* store.fetch("w1", 1, lease)
        expect(yield* store.finalize({ job: claimed!, workerId: "other", outcome: Job.Outcome.Failed({ error: "x" }), metadata: {} })).toBe(false)
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
        yield* store.finalize({ job: byId.get(a.id)!, workerId: "w1", outcome: Job.Outcome.Requeued({ reason: "Requeued — 'k' full (1 slots)" }), metadata: {} })
        yield* store.finalize({
          job: byId.get(b.id)!,
          workerId: "w1",
          outcome: Job.Outcome.Requeued({ reason: "retry", at: new Date(Date.now() + 3_600_000) }),
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

    it.live("a run lost to the runtime (keepsPlace) goes back ahead of the jobs queued behind it; a policy's requeue goes to the back", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const t = Date.now()
        const lost = newJob({ scheduleTime: new Date(t - 3000) })
        const sent = newJob({ scheduleTime: new Date(t - 2000) })
        const behind = newJob({ scheduleTime: new Date(t - 1000) })
        yield* store.insert([lost, sent])
        const got = new Map((yield* store.fetch("w1", 2, lease)).map((j) => [j.id, j]))
        yield* store.insert([behind])
        yield* store.finalize({
          job: got.get(lost.id)!,
          workerId: "w1",
          outcome: Job.Outcome.Requeued({ reason: "Slot of 'k' lost while running (connection to the semaphore provider died); requeued", keepsPlace: true }),
          metadata: {}
        })
        yield* store.finalize({ job: got.get(sent.id)!, workerId: "w1", outcome: Job.Outcome.Requeued({ reason: "Requeued — 'k' full (1 slots)" }), metadata: {} })
        const row = Option.getOrThrow(yield* store.get(lost.id)).job
        expect(row.state).toBe("Enqueued")
        expect(row.scheduleTime.getTime()).toBe(lost.scheduleTime.getTime())
        expect((yield* store.fetch("w2", 10, lease)).map((j) => j.id)).toEqual([lost.id, behind.id, sent.id])
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
        expect(yield* store.finalize({ job: first!, workerId: "dead", outcome: Job.Outcome.Succeeded(), metadata: {} })).toBe(false)
        expect(yield* store.finalize({ job: again!, workerId: "alive", outcome: Job.Outcome.Succeeded(), metadata: {} })).toBe(true)
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

    it.live("Fifo: only the head of a key is claimable, whatever the ScheduleTimes say", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const t = Date.now()
        // the second and third rows are due earlier than the head: submission order still wins
        const rows = [fifoJob("k", 1, { scheduleTime: new Date(t - 1000) }), fifoJob("k", 1, { scheduleTime: new Date(t - 5000) }), fifoJob("k", 1, { scheduleTime: new Date(t - 9000) })]
        yield* submit(rows)
        expect(ids(yield* store.fetch("w1", 10, lease))).toEqual([rows[0]!.id])
        expect(yield* store.fetch("w2", 10, lease)).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("Fifo: with limit 2 the two oldest are claimable, then the next once one finishes", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const rows = Array.from({ length: 4 }, () => fifoJob("k2", 2))
        yield* submit(rows)
        // one Fifo row per fetch
        const first = [...(yield* store.fetch("w1", 10, lease)), ...(yield* store.fetch("w1", 10, lease))]
        expect(ids(first)).toEqual([rows[0]!.id, rows[1]!.id])
        expect(yield* store.fetch("w2", 10, lease)).toEqual([])
        expect(yield* store.finalize({ job: first[1]!, workerId: "w1", outcome: Job.Outcome.Succeeded(), metadata: first[1]!.metadata })).toBe(true)
        expect(ids(yield* store.fetch("w2", 10, lease))).toEqual([rows[2]!.id])
        expect(yield* store.fetch("w3", 10, lease)).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("Fifo: after the head is finalized the next one is claimable", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const rows = Array.from({ length: 3 }, () => fifoJob("k", 1))
        yield* submit(rows)
        for (let i = 0; i < 3; i++) {
          const got = yield* store.fetch(`w${i}`, 10, lease)
          expect(ids(got)).toEqual([rows[i]!.id])
          expect(yield* store.fetch("other", 10, lease)).toEqual([])
          yield* store.finalize({ job: got[0]!, workerId: `w${i}`, outcome: i === 1 ? Job.Outcome.Failed({ error: "x" }) : Job.Outcome.Succeeded(), metadata: got[0]!.metadata })
        }
        expect(yield* store.fetch("w", 10, lease)).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("Fifo: a requeued head stays first (creation order, not ScheduleTime), also while backing off", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const rows = Array.from({ length: 3 }, () => fifoJob("k", 1))
        yield* submit(rows)
        const head = (yield* store.fetch("w1", 10, lease))[0]!
        expect(head.id).toBe(rows[0]!.id)
        // requeued now: its ScheduleTime is now the latest of the three, and it is still the head
        yield* store.finalize({ job: head, workerId: "w1", outcome: Job.Outcome.Requeued({ reason: "again" }), metadata: head.metadata })
        const again = yield* store.fetch("w2", 10, lease)
        expect(ids(again)).toEqual([rows[0]!.id])
        // requeued for later (a retry backoff): nobody may overtake it meanwhile
        yield* store.finalize({ job: again[0]!, workerId: "w2", outcome: Job.Outcome.Requeued({ reason: "later", at: new Date(Date.now() + 3_600_000) }), metadata: again[0]!.metadata })
        expect(yield* store.fetch("w3", 10, lease)).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("Fifo: a fetch claims at most one Fifo row and hands it out first; a requeued head stays first at limit 2", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const t = Date.now()
        const rows = Array.from({ length: 2 }, () => fifoJob("k2", 2, { scheduleTime: new Date(t - 1000) }))
        const plain = newJob({ scheduleTime: new Date(t - 5000) })
        yield* submit([...rows, plain])
        const batch = yield* store.fetch("w1", 10, lease)
        expect(ids(batch)).toEqual([rows[0]!.id, plain.id])
        yield* store.finalize({ job: batch[0]!, workerId: "w1", outcome: Job.Outcome.Requeued({ reason: "again" }), metadata: batch[0]!.metadata })
        // the requeued head is due last now, and still comes before the second row
        expect(ids(yield* store.fetch("w2", 10, lease))).toEqual([rows[0]!.id])
        expect(ids(yield* store.fetch("w3", 10, lease))).toEqual([rows[1]!.id])
      }).pipe(Effect.provide(makeLayer())))

    it.live("Fifo: a row scheduled for later joins its key's line only when it is due", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const later = fifoJob("k", 1, { state: "Scheduled", scheduleTime: new Date(Date.now() + 3_600_000) })
        const now = fifoJob("k", 1)
        yield* submit([later, now])
        expect(ids(yield* store.fetch("w1", 10, lease))).toEqual([now.id])
      }).pipe(Effect.provide(makeLayer())))

    /** A row of a keyed Wait policy as `withSemaphore(key, limit, "Wait", options)` stores it at publish. */
    const keyed = (key: string, limit: number, at: number, extra: Record<string, unknown> = {}) =>
      newJob({ scheduleTime: new Date(at), metadata: { policies: { concurrency: { source: "enqueue", value: { key, limit, mode: "Wait", ...extra } } } } })

    it.live("Admission: a row whose group is full is never claimed, rows whose key has room go first, in ScheduleTime order", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const t = Date.now()
        const g = { total: { group: "g", limit: 2 } }
        const [r1, r2, r3, r4] = [keyed("k1", 1, t - 5000, g), keyed("k1", 1, t - 4000, g), keyed("k2", 1, t - 3000, g), keyed("k3", 1, t - 2000, g)]
        const r5 = newJob({ scheduleTime: new Date(t - 1000) })
        yield* submit([r1!, r2!, r3!, r4!, r5])
        // one constrained row (keyed Wait, or under a total cap) per claim (a lane runs its rows one after another)
        const first = yield* store.fetch("w1", 10, lease)
        expect(ids(first)).toEqual([r1!.id, r5.id])
        // r2: its key is full; r3 takes the group's second slot
        const second = yield* store.fetch("w2", 10, lease)
        expect(ids(second)).toEqual([r3!.id])
        // the group is full: neither r2 (whose key is full too) nor r4 is taken, not even as a last resort
        expect(yield* store.fetch("w2", 10, lease)).toEqual([])
        const done = first.find((j) => j.id === r1!.id)!
        expect(yield* store.finalize({ job: done, workerId: "w1", outcome: Job.Outcome.Succeeded(), metadata: done.metadata })).toBe(true)
        // one group slot free, and k1 has room again: r2, the older of the two
        expect(ids(yield* store.fetch("w3", 10, lease))).toEqual([r2!.id])
        expect(yield* store.fetch("w4", 10, lease)).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("Admission: a Wait row of a full key is claimed only when nothing admissible is due (one), never when declared requeue: false", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const t = Date.now()
        const [a1, a2, a3] = [keyed("a", 1, t - 5000), keyed("a", 1, t - 4000), keyed("a", 1, t - 3500)]
        const [h1, h2] = [keyed("h", 1, t - 3000, { requeue: false }), keyed("h", 1, t - 2500, { requeue: false })]
        const skip = newJob({ scheduleTime: new Date(t - 2000), metadata: { policies: { concurrency: { source: "enqueue", value: { key: "a", limit: 1, mode: "Skip" } } } } })
        yield* submit([a1!, a2!, a3!, h1!, h2!, skip])
        // a Skip row is claimed as before, its key full or not (its gate drops it: the spec's Skip); one
        // keyed Wait row per claim
        expect(ids(yield* store.fetch("w1", 10, lease))).toEqual([a1!.id, skip.id])
        expect(ids(yield* store.fetch("w2", 10, lease))).toEqual([h1!.id])
        // nothing admissible: one Wait row of the full key "a" (its gate requeues it), never "h"'s
        expect(ids(yield* store.fetch("w3", 10, lease))).toEqual([a2!.id])
        expect(ids(yield* store.fetch("w4", 10, lease))).toEqual([a3!.id])
        expect(yield* store.fetch("w5", 10, lease)).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("Fifo: keys are independent, and rows of other modes and keyless rows are fetched as before", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const t = Date.now()
        const a = [fifoJob("a", 1, { scheduleTime: new Date(t - 4000) }), fifoJob("a", 1, { scheduleTime: new Date(t - 4000) })]
        const b = [fifoJob("b", 1, { scheduleTime: new Date(t - 3000) }), fifoJob("b", 1, { scheduleTime: new Date(t - 3000) })]
        // a Wait row of key "a", which has room (the admission, see below, takes one such row per claim)
        const wait = (key: string, at: number) =>
          newJob({ scheduleTime: new Date(at), metadata: { policies: { concurrency: { source: "enqueue", value: { key, limit: 2, mode: "Wait" } } } } })
        const others = [wait("a", t - 2000), newJob({ scheduleTime: new Date(t - 1900) }), newJob({ scheduleTime: new Date(t - 1000) })]
        yield* submit([...a, ...b, ...others])
        const got = yield* store.fetch("w1", 10, lease)
        expect(ids(got)).toEqual([a[0]!.id, ...ids(others)])
        expect(ids(yield* store.fetch("w2", 10, lease))).toEqual([b[0]!.id])
        expect(yield* store.fetch("w3", 10, lease)).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("Fifo: a due scheduled row takes its place by submission, ahead of rows submitted after it", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        // due in 1 s: the first fetch must come before that, even on a loaded machine
        const later = fifoJob("k", 1, { state: "Scheduled", scheduleTime: new Date(Date.now() + 1000) })
        const rows = [fifoJob("k", 1), fifoJob("k", 1)]
        yield* submit([later, ...rows])
        const first = yield* store.fetch("w1", 10, lease)
        expect(ids(first)).toEqual([rows[0]!.id])
        yield* store.finalize({ job: first[0]!, workerId: "w1", outcome: Job.Outcome.Succeeded(), metadata: first[0]!.metadata })
        // the wall clock (PostgreSQL's now()) must pass the ScheduleTime
        yield* Effect.sleep("1100 millis")
        expect(ids(yield* store.fetch("w2", 10, lease))).toEqual([later.id])
        expect(yield* store.fetch("w3", 10, lease)).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("Fifo: a row whose lease expired keeps its place: it is recovered, and the next waits", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const rows = [fifoJob("k", 1), fifoJob("k", 1)]
        yield* submit(rows)
        const [dead] = yield* store.fetch("dead", 10, Duration.millis(1))
        expect(dead!.id).toBe(rows[0]!.id)
        yield* Effect.sleep("20 millis")
        const again = yield* store.fetch("alive", 10, lease)
        expect(ids(again)).toEqual([rows[0]!.id])
        expect(again[0]!.attempt).toBe(2)
        expect(yield* store.fetch("other", 10, lease)).toEqual([])
        yield* store.finalize({ job: again[0]!, workerId: "alive", outcome: Job.Outcome.Succeeded(), metadata: again[0]!.metadata })
        expect(ids(yield* store.fetch("other", 10, lease))).toEqual([rows[1]!.id])
      }).pipe(Effect.provide(makeLayer())))

    it.live("Fifo: a key's line holds only its Fifo rows; a Wait row of the same key neither blocks nor is blocked", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const fifo = [fifoJob("mixed", 1), fifoJob("mixed", 1)]
        const wait = newJob({ metadata: { policies: { concurrency: { source: "enqueue", value: { key: "mixed", limit: 1, mode: "Wait" } } } } })
        yield* submit([fifo[0]!, wait, fifo[1]!])
        const got = yield* store.fetch("w1", 10, lease)
        expect(new Set(ids(got))).toEqual(new Set([fifo[0]!.id, wait.id]))
        expect(got[0]!.id).toBe(fifo[0]!.id)
        expect(yield* store.fetch("w2", 10, lease)).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("Fifo: a row with a corrupt Fifo limit neither breaks the fetch nor stays stuck: it is claimed in turn as if at limit 1", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const corrupt = (limit: unknown) =>
          newJob({ metadata: { policies: { concurrency: { source: "enqueue", value: { key: "bad", limit, mode: "Fifo" } } } } })
        const rows = [corrupt("lots"), corrupt(99999999999), corrupt(1.5)]
        const plain = newJob()
        yield* submit([...rows, plain])
        // the worker fails such a row ("Job metadata is invalid"), and the next one's turn comes
        for (const [i, row] of rows.entries()) {
          const got = yield* store.fetch(`w${i}`, 10, lease)
          expect(ids(got)).toEqual(i === 0 ? [row.id, plain.id] : [row.id])
          yield* store.finalize({ job: got[0]!, workerId: `w${i}`, outcome: Job.Outcome.Failed({ error: "invalid metadata" }), metadata: got[0]!.metadata })
        }
      }).pipe(Effect.provide(makeLayer())))

    it.live("Fifo: concurrent fetches never claim more rows of a key than its limit", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        yield* submit(Array.from({ length: 20 }, () => fifoJob("hot", 2)))
        const claims = yield* Effect.all(
          Array.from({ length: 12 }, (_, w) => store.fetch(`w${w}`, 1 + (w % 3), lease)),
          { concurrency: "unbounded" }
        )
        expect(claims.flat().length).toBe(2)
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

    it.live("list filters by id, type, key prefix (wildcards are characters), state(s) and creation window", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const keyed = (key: string, over: Partial<Job.NewJob> = {}) =>
          newJob({ metadata: { policies: { concurrency: { source: "enqueue", value: { key, limit: 2, mode: "Wait" } } } }, ...over })
        const a = keyed("payment-api", { type: "Charge" })
        const b = keyed("payment-eu", { type: "Charge", state: "Scheduled", scheduleTime: new Date(Date.now() + 3_600_000) })
        const c = keyed("pay%_x", { type: "Refund" })
        const d = keyed("payXXx", { type: "Refund" })
        const e = newJob({ type: "Plain" })
        yield* submit([a, b, c, d, e])
        const all = { limit: 100, offset: 0 }
        const found = (filter: Parameters<typeof store.list>[0]) => Effect.map(store.list(filter), (p) => [...ids(p.rows)].sort())
        const sorted = (...js: ReadonlyArray<Job.NewJob>) => ids(js).sort()
        expect(yield* found({ ...all, id: a.id })).toEqual([a.id])
        expect(yield* found({ ...all, id: "no-such-id" })).toEqual([])
        expect(yield* found({ ...all, type: "Charge" })).toEqual(sorted(a, b))
        expect(yield* found({ ...all, keyPrefix: "payment-" })).toEqual(sorted(a, b))
        expect(yield* found({ ...all, keyPrefix: "pay" })).toEqual(sorted(a, b, c, d))
        // % and _ are plain characters: "pay%_" matches only the key that starts with them
        expect(yield* found({ ...all, keyPrefix: "pay%_" })).toEqual(sorted(c))
        expect(yield* found({ ...all, keyPrefix: "pay_" })).toEqual([])
        expect(yield* found({ ...all, keyPrefix: "%" })).toEqual([])
        expect(yield* found({ ...all, state: "Scheduled" })).toEqual(sorted(b))
        expect(yield* found({ ...all, states: ["Scheduled", "Enqueued"], type: "Refund" })).toEqual(sorted(c, d))
        expect(yield* found({ ...all, state: "Enqueued", states: ["Scheduled"] })).toEqual([])
        expect(yield* found({ ...all, type: "Charge", keyPrefix: "payment-eu" })).toEqual(sorted(b))
        // text no row can hold matches nothing (no StoreError)
        expect(yield* found({ ...all, id: "a\u0000b" })).toEqual([])
        expect(yield* found({ ...all, keyPrefix: "p\u0000" })).toEqual([])
        // the creation window: [createdAfter, createdBefore)
        const at = Option.getOrThrow(yield* store.get(c.id)).job.createdAt
        const from = yield* found({ ...all, createdAfter: at })
        const before = yield* found({ ...all, createdBefore: at })
        expect(from).toContain(c.id)
        expect(before).not.toContain(c.id)
        expect([...from, ...before].sort()).toEqual(sorted(a, b, c, d, e))
        expect(yield* found({ ...all, createdAfter: new Date(Date.now() + 3_600_000) })).toEqual([])
        expect(yield* found({ ...all, createdBefore: new Date(Date.now() - 3_600_000) })).toEqual([])
        // the total counts every match, not only the page
        const page = yield* store.list({ keyPrefix: "pay", limit: 1, offset: 1 })
        expect(page.total).toBe(4)
        expect(page.rows.length).toBe(1)
      }).pipe(Effect.provide(makeLayer())))

    it.live("operate: retry, delete and requeue change only rows in an allowed state, each with its audit entry; Processing is never touched", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const failed = newJob()
        const running = newJob()
        yield* submit([failed])
        const [claimed] = yield* store.fetch("w", 1, lease)
        expect(claimed!.id).toBe(failed.id)
        expect(yield* store.finalize({ job: claimed!, workerId: "w", outcome: Job.Outcome.Failed({ error: "boom" }), metadata: claimed!.metadata })).toBe(true)
        yield* submit([running])
        const [held] = yield* store.fetch("w", 1, lease)
        expect(held!.id).toBe(running.id)
        const scheduled = newJob({ state: "Scheduled", scheduleTime: new Date(Date.now() + 3_600_000) })
        const enqueued = newJob({ scheduleTime: new Date(Date.now() + 60_000) })
        yield* submit([scheduled, enqueued])
        const state = (id: string) => Effect.map(store.get(id), (d) => Option.getOrThrow(d).job)
        const lastLog = (id: string) => Effect.map(store.get(id), (d) => Option.getOrThrow(d).logs.at(-1)!)

        // no action touches the Processing row, whatever is asked
        for (const action of ["retry", "delete", "requeue"] as const) {
          expect(yield* store.operate(action, [running.id])).toEqual({ changed: 0, skipped: 1 })
        }
        const stillHeld = yield* state(running.id)
        expect(stillHeld.state).toBe("Processing")
        expect(stillHeld.lockedBy).toBe("w")
        expect((yield* lastLog(running.id)).kind).toBe("Processing")

        // retry: only Failed/Deleted; a Failed job is Enqueued and due now
        expect(yield* store.operate("retry", [scheduled.id, enqueued.id])).toEqual({ changed: 0, skipped: 2 })
        const t0 = Date.now()
        expect(yield* store.operate("retry", [failed.id, failed.id, "no-such-id", "a\u0000b"])).toEqual({ changed: 1, skipped: 2 })
        const retried = yield* state(failed.id)
        expect(retried.state).toBe("Enqueued")
        expect(retried.scheduleTime.getTime()).toBeGreaterThanOrEqual(t0 - 1000)
        expect(retried.scheduleTime.getTime()).toBeLessThanOrEqual(Date.now() + 1000)
        expect(yield* lastLog(failed.id)).toMatchObject({ kind: "Retried", message: "Retried by an operator" })
        // ... and is claimable again
        const [again] = yield* store.fetch("w2", 1, lease)
        expect(again!.id).toBe(failed.id)
        expect(yield* store.finalize({ job: again!, workerId: "w2", outcome: Job.Outcome.Failed({ error: "boom" }), metadata: again!.metadata })).toBe(true)

        // requeue: only Scheduled/Enqueued; due now
        expect(yield* store.operate("requeue", [failed.id])).toEqual({ changed: 0, skipped: 1 })
        expect(yield* store.operate("requeue", [scheduled.id, enqueued.id])).toEqual({ changed: 2, skipped: 0 })
        for (const id of [scheduled.id, enqueued.id]) {
          const j = yield* state(id)
          expect(j.state).toBe("Enqueued")
          expect(j.scheduleTime.getTime()).toBeLessThanOrEqual(Date.now() + 1000)
          expect(yield* lastLog(id)).toMatchObject({ kind: "Requeued", message: "Requeued by an operator" })
        }

        // delete: pending or Failed; a Deleted job can be retried
        expect(yield* store.operate("delete", [failed.id, scheduled.id, running.id])).toEqual({ changed: 2, skipped: 1 })
        expect((yield* state(failed.id)).state).toBe("Deleted")
        expect(yield* lastLog(scheduled.id)).toMatchObject({ kind: "Deleted", message: "Deleted by an operator" })
        expect(yield* store.operate("delete", [failed.id])).toEqual({ changed: 0, skipped: 1 })
        expect(yield* store.operate("retry", [scheduled.id])).toEqual({ changed: 1, skipped: 0 })
        expect((yield* state(scheduled.id)).state).toBe("Enqueued")
        expect(yield* store.operate("retry", [])).toEqual({ changed: 0, skipped: 0 })
        expect((yield* state(running.id)).state).toBe("Processing")
      }).pipe(Effect.provide(makeLayer())))

    it.live("recordSlotAudit replaces the stored findings with each run's; slotAuditFindings reads them back in order", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        expect(yield* store.slotAuditFindings).toEqual([])
        const at = new Date("2026-12-05T10:30:00.123Z")
        const first = [
          { kind: "StuckHolder", key: "z-key", slot: undefined, jobId: "job-1", detail: "lease expired <b>", foundAt: at },
          { kind: "LeakedSlot", key: "a-key", slot: 2, jobId: undefined, detail: "held by session 42", foundAt: at },
          { kind: "LeakedSlot", key: "a-key", slot: 0, jobId: undefined, detail: "held by session 43", foundAt: at }
        ] as const
        yield* store.recordSlotAudit(first)
        expect(yield* store.slotAuditFindings).toEqual(first)
        const later = new Date(at.getTime() + 60_000)
        const second = [{ kind: "LeakedSlot", key: "b-key", slot: 1, jobId: undefined, detail: "held by session 44", foundAt: later }] as const
        yield* store.recordSlotAudit(second)
        expect(yield* store.slotAuditFindings).toEqual(second)
        // a run that found nothing leaves nothing
        yield* store.recordSlotAudit([])
        expect(yield* store.slotAuditFindings).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.live("fair share: a flow with many queued does not starve flows with few; flows are served in weight proportion", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        // tags: hot 1..12 (weight 1); then a (weight 2) from V = 1: 1.5, 2, 2.5, 3; b (weight 1, one insert
        // per row): 2, 3, 4
        yield* store.insert(Array.from({ length: 12 }, () => fairJob("hot", 1)))
        yield* store.insert(Array.from({ length: 4 }, () => fairJob("a", 2)))
        yield* submit(Array.from({ length: 3 }, () => fairJob("b", 1)))
        const seq = (yield* claimAll()).map(flowOf)
        expect(seq.length).toBe(19)
        const count = (n: number) => {
          const c: Record<string, number> = { hot: 0, a: 0, b: 0 }
          for (const f of seq.slice(0, n)) c[f]!++
          return c
        }
        // the prefixes that end where every tag up to 1, 2, 3, 4 is served (no tie straddles them)
        expect(count(1)).toEqual({ hot: 1, a: 0, b: 0 })
        expect(count(5)).toEqual({ hot: 2, a: 2, b: 1 })
        // tags in (1, 3]: a (weight 2) got 4, b and hot (weight 1) 2 each
        expect(count(9)).toEqual({ hot: 3, a: 4, b: 2 })
        expect(count(11)).toEqual({ hot: 4, a: 4, b: 3 })
        expect(seq.slice(11)).toEqual(Array(8).fill("hot"))
      }).pipe(Effect.provide(makeLayer())))

    it.live("fair share: fair rows go in tag order; another row is claimed once it is older than every due fair row left", () =>
      Effect.gen(function* () {
        const { c, hot, plain } = yield* mergeRows
        // each claim: the fair class competes by the ScheduleTime of its oldest due row, and serves its rows
        // by tag — so c's rows run early, and the plain row at -2500 waits for the hot rows older than it
        const expected = [hot[0]!, plain[0]!, c[0]!, c[1]!, hot[1]!, hot[2]!, hot[3]!, plain[1]!, hot[4]!, hot[5]!, plain[2]!].map((j) => j.id)
        expect(ids(yield* claimAll())).toEqual(expected)
      }).pipe(Effect.provide(makeLayer())))

    it.live("fair share: one fetch merges the k-th fair row by tag at the k-th oldest fair ScheduleTime", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const { c, hot, plain } = yield* mergeRows
        // places: -6000 F, -5500 p0, -5000 F, -4000 F, -3000 F, -2500 p1, -2000 F; F by tag: hot0, c0, c1, hot1, hot2
        const got = yield* store.fetch("w", 7, lease)
        expect(new Set(ids(got))).toEqual(new Set(ids([hot[0]!, plain[0]!, c[0]!, c[1]!, hot[1]!, plain[1]!, hot[2]!])))
        // in the batch the worker runs: fair rows in tag order, the others in ScheduleTime order
        expect(ids(got.filter((j) => j.fairTag !== undefined))).toEqual(ids([hot[0]!, c[0]!, c[1]!, hot[1]!, hot[2]!]))
        expect(ids(got.filter((j) => j.fairTag === undefined))).toEqual(ids([plain[0]!, plain[1]!]))
      }).pipe(Effect.provide(makeLayer())))

    it.live("fair share: a policy requeue goes to the back of its flow; a requeue that keeps its place keeps its tag", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const h = Array.from({ length: 4 }, () => fairJob("hot", 1))
        yield* store.insert(h)
        const [first] = yield* store.fetch("w", 1, lease)
        const [second] = yield* store.fetch("w", 1, lease)
        expect([first!.id, second!.id]).toEqual([h[0]!.id, h[1]!.id])
        yield* store.finalize({ job: first!, workerId: "w", outcome: Job.Outcome.Requeued({ reason: "Requeued — 'hot' full (1 slots)" }), metadata: first!.metadata })
        yield* store.finalize({
          job: second!,
          workerId: "w",
          outcome: Job.Outcome.Requeued({ reason: "Claim released (worker w interrupted)", keepsPlace: true }),
          metadata: second!.metadata
        })
        expect(Option.getOrThrow(yield* store.get(second!.id)).job.fairTag).toBe(second!.fairTag)
        expect(ids(yield* claimAll())).toEqual([h[1]!.id, h[2]!.id, h[3]!.id, h[0]!.id])
      }).pipe(Effect.provide(makeLayer())))

    it.live("fair share: a requeue that keeps its tag (its group was full) keeps it, and its ScheduleTime is now", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const h = Array.from({ length: 6 }, () => fairJob("hot", 1))
        yield* store.insert(h)
        const got = yield* store.fetch("w", 3, lease)
        expect(ids(got)).toEqual(ids(h.slice(0, 3)))
        const before = Date.now()
        // written together (the PostgreSQL store may batch them)
        yield* Effect.forEach(
          got,
          (job) =>
            store.finalize({ job, workerId: "w", outcome: Job.Outcome.Requeued({ reason: "Requeued — group 'g' full (2 slots)", keepsTag: true }), metadata: job.metadata }),
          { concurrency: "unbounded" }
        )
        for (const job of got) {
          const row = Option.getOrThrow(yield* store.get(job.id)).job
          expect(row.fairTag).toBe(job.fairTag)
          expect(row.state).toBe("Enqueued")
          expect(row.scheduleTime.getTime()).toBeGreaterThanOrEqual(before - 1000)
        }
        // still ahead of the rest of their flow
        expect(ids(yield* claimAll())).toEqual(ids(h))
      }).pipe(Effect.provide(makeLayer())))

    it.live("fair share: a requeue whose written policy has no weight leaves fair share; rows without a weight never get a tag", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const f = fairJob("k", 1)
        const p = newJob()
        yield* store.insert([f, p])
        expect(Option.getOrThrow(yield* store.get(p.id)).job.fairTag).toBeUndefined()
        expect(Option.getOrThrow(yield* store.get(f.id)).job.fairTag).toBe(1)
        const got = yield* store.fetch("w", 2, lease)
        const job = got.find((j) => j.id === f.id)!
        yield* store.finalize({ job, workerId: "w", outcome: Job.Outcome.Requeued({ reason: "retry" }), metadata: { policies: {} } })
        expect(Option.getOrThrow(yield* store.get(f.id)).job.fairTag).toBeUndefined()
      }).pipe(Effect.provide(makeLayer())))

    it.live("fair share: an operator's requeue or retry sends a weighted job to the back of its key", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const h = Array.from({ length: 4 }, () => fairJob("hot", 1))
        yield* store.insert(h)
        const [first] = yield* store.fetch("w", 1, lease)
        yield* store.finalize({ job: first!, workerId: "w", outcome: Job.Outcome.Failed({ error: "boom" }), metadata: first!.metadata })
        expect(yield* store.operate("requeue", [h[1]!.id])).toEqual({ changed: 1, skipped: 0 })
        expect(yield* store.operate("retry", [h[0]!.id])).toEqual({ changed: 1, skipped: 0 })
        expect(ids(yield* claimAll())).toEqual([h[2]!.id, h[3]!.id, h[1]!.id, h[0]!.id])
      }).pipe(Effect.provide(makeLayer())))
  })
}
