/**
 * Weighted fair share with real workers: the skewed workload at small scale (one hot key with
 * 400 queued jobs, enqueued first, and 20 cold keys with 10 each; every key `Semaphore(key, 8)` Wait, one
 * worker of 4 lanes, no-op handlers). Per-key throughput is counted over the window while every key
 * is backlogged (from the start to the completion of the first key to drain), and Jain's fairness index
 * of it, (sum x)^2 / (n * sum x^2), is >= 0.95 with weights on. The same workload without weights is
 * served in ScheduleTime order — the hot key's 400 jobs first — and its index is low (1/21 when the
 * cold keys get nothing in the window), so this fails when fair share is off. Also: the policy input
 * checks of `weight`.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import { Concurrency, Contract, Handler, Job, JobParameters, JobStorePg, Mutex, Publisher, Semaphore, Worker } from "warp-effect"
import * as JobId from "../src/internal/job/JobId.js"
import { JobStore } from "../src/internal/store/JobStore.js"
import { memoryWorkerEnv, workerEnvs } from "./support/env.js"
import { freshPgLayer } from "./support/db.js"
import { detail, drained } from "./support/runtime.js"
import { stores } from "./support/stores.js"

const Item = Contract.job("FairShareItem", Schema.Struct({ key: Schema.String }))

const HOT = 400
const COLD_KEYS = 20
const COLD = 10
const LIMIT = 8
const LANES = 4

/** Jain's fairness index of `xs`: 1 when all are equal, 1/n when one has everything. */
export const jain = (xs: ReadonlyArray<number>): number => {
  const sum = xs.reduce((a, b) => a + b, 0)
  const squares = xs.reduce((a, b) => a + b * b, 0)
  return squares === 0 ? 1 : (sum * sum) / (xs.length * squares)
}

/** Per-key completions while every key still had jobs left, from the completion sequence. */
const windowCounts = (done: ReadonlyArray<string>, totals: ReadonlyMap<string, number>): Map<string, number> => {
  const counts = new Map<string, number>([...totals.keys()].map((k) => [k, 0]))
  for (const key of done) {
    const n = counts.get(key)! + 1
    counts.set(key, n)
    // the first key to drain closes the window (its last job counts)
    if (n === totals.get(key)) break
  }
  return counts
}

interface Workload {
  readonly hot: number
  readonly coldKeys: number
  readonly cold: number
  readonly limit: number
  readonly lanes: number
  /** A total cap over every key of the workload (all in one group). */
  readonly total?: number
  /** How long each handler runs (a workload, not a synchronization): the cap is held that long. */
  readonly handlerMs?: number
}

const perKey: Workload = { hot: HOT, coldKeys: COLD_KEYS, cold: COLD, limit: LIMIT, lanes: LANES }
/** Keys that compete for a tight total cap rather than for the workers. */
const capped: Workload = { hot: 200, coldKeys: 10, cold: 10, limit: 8, lanes: 4, total: 2, handlerMs: 5 }

const skewed = (weighted: boolean, makeEnv: (typeof workerEnvs)[number][1], w: Workload = perKey) => {
  const done: Array<string> = []
  const handler = Handler.job(Item, ({ key }) =>
    Effect.sync(() => void done.push(key)).pipe(Effect.tap(w.handlerMs === undefined ? Effect.void : Effect.sleep(w.handlerMs)))
  )
  return Effect.gen(function* () {
    const p = yield* Publisher.Publisher
    const options = w.total === undefined ? (weighted ? { weight: 1 } : undefined) : { total: { group: "all", limit: w.total }, ...(weighted ? { weight: 1 } : {}) }
    const params = (key: string) => JobParameters.make().withSemaphore(key, w.limit, "Wait", options)
    // the hot key first: in ScheduleTime order its whole backlog runs before any cold job
    yield* p.enqueueMany(Item, Array.from({ length: w.hot }, () => ({ key: "hot" })), params("hot"))
    const cold = Array.from({ length: w.coldKeys * w.cold }, (_, i) => ({ key: `cold-${i % w.coldKeys}` }))
    yield* p.enqueueMany(Item, cold, (item) => params(item.key))
    yield* Effect.scoped(
      Effect.gen(function* () {
        yield* Worker.make({ addons: [Concurrency.addon], workerId: `fair-${weighted}`, concurrency: w.lanes, pollInterval: "5 millis" })
        yield* drained(60_000, "10 millis")
      })
    )
    const totals = new Map<string, number>([["hot", w.hot], ...Array.from({ length: w.coldKeys }, (_, i) => [`cold-${i}`, w.cold] as const)])
    expect(done.length).toBe(w.hot + w.coldKeys * w.cold)
    return jain([...windowCounts(done, totals).values()])
  }).pipe(Effect.provide(makeEnv([handler])))
}

for (const [name, makeEnv] of workerEnvs) {
  describe(`fair share with a worker (${name})`, () => {
    it.live(
      "one hot key (400 queued) and 20 cold keys (10 each): Jain's index of per-key throughput while all are backlogged >= 0.95 with weights, low without",
      () =>
        Effect.gen(function* () {
          const fair = yield* skewed(true, makeEnv)
          const plain = yield* skewed(false, makeEnv)
          expect(fair).toBeGreaterThanOrEqual(0.95)
          expect(plain).toBeLessThan(0.2)
        }),
      120_000
    )
    it.live(
      "under a total cap of 2 over every key (one hot key of 200, 10 cold keys of 10, 4 lanes): Jain's index >= 0.95 with weights, low without",
      () =>
        Effect.gen(function* () {
          const fair = yield* skewed(true, makeEnv, capped)
          const plain = yield* skewed(false, makeEnv, capped)
          expect(fair).toBeGreaterThanOrEqual(0.95)
          // without weights the group's requeues (back of the queue, ScheduleTime = now) mix cold jobs in
          // at a rate set by timing: 0.2–0.55 seen on a loaded 2-core machine (on 0.2 and 1.0 alike), so
          // the bound is the gap to the weighted run, not a fixed low figure
          expect(plain).toBeLessThan(0.7)
        }),
      120_000
    )
  })
}

describe("weight: policy input", () => {
  it("a weight must be a finite number > 0", () => {
    expect(() => Semaphore("k", 2, { weight: 0 })).toThrow(/^Semaphore\("k", 2, \{"weight":0\}\): weight must be a finite number > 0, got 0/)
    expect(() => Mutex("k", { weight: Number.NaN })).toThrow(/weight must be a finite number > 0, got NaN/)
    expect(() => Mutex("k", { weight: Infinity })).toThrow(/weight must be a finite number > 0/)
    expect(JobParameters.make().withSemaphore("k", 2, "Wait", { weight: -1 }).error?.message).toMatch(/^JobParameters\.withSemaphore\("k", 2, "Wait", .*\): weight must be a finite number > 0, got -1/)
    expect(Semaphore("k", 2, { weight: 0.5 }).value.weight).toBe(0.5)
  })

  it("not with mode Fifo", () => {
    expect(() => Semaphore("k", 2, { mode: "Fifo", weight: 2 })).toThrow(/a weight cannot be used with mode 'Fifo'/)
    expect(JobParameters.make().withMutex("k", "Fifo", { weight: 2 }).error?.message).toMatch(/a weight cannot be used with mode 'Fifo'/)
  })

  it("withMutex / withSemaphore: the 4th argument is a total cap (as before) or { total, weight }", () => {
    const cap = { group: "g", limit: 3 }
    const old = JobParameters.make().withSemaphore("k", 2, "Wait", cap).entries.get("concurrency")!.value as any
    expect([old.total, old.weight]).toEqual([cap, undefined])
    const both = JobParameters.make().withMutex("k", "Wait", { total: cap, weight: 3 }).entries.get("concurrency")!.value as any
    expect([both.total, both.weight]).toEqual([cap, 3])
  })
})

describe("weight: carried at enqueue", () => {
  const Weighted = Contract.job("FairShareWeighted", Schema.Struct({ n: Schema.Number }), { policy: [Semaphore("reports", 2, { weight: 3 })] })
  const Unweighted = Contract.job("FairShareUnweighted", Schema.Struct({ n: Schema.Number }), { policy: [Semaphore("reports", 2)] })
  it.live("a contract's weighted policy is carried onto the row and tags it; an unweighted one is not carried", () =>
    Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const weighted = yield* detail(yield* p.enqueue(Weighted, { n: 1 }))
      expect(weighted.job.fairTag).toBeCloseTo(1 / 3)
      expect((weighted.job.metadata as any).policies.concurrency).toMatchObject({ source: "contract", value: { key: "reports", weight: 3 } })
      const plain = yield* detail(yield* p.enqueue(Unweighted, { n: 1 }))
      expect(plain.job.fairTag).toBeUndefined()
      expect((plain.job.metadata as any).policies.concurrency).toBeUndefined()
    }).pipe(Effect.provide(memoryWorkerEnv([]))))
})

for (const [name, makeLayer] of stores) {
  describe(`priority inside a weighted key (${name})`, () => {
    it.live("a high row queued behind a key's low rows runs at the key's next turn; the other keys' turns are unchanged", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const lease = Duration.seconds(30)
        const row = (key: string, weight: number, priority: number): Job.NewJob => ({
          id: JobId.make(),
          type: "T",
          handler: null,
          payload: {},
          state: "Enqueued",
          scheduleTime: new Date(Date.now() - 60_000),
          metadata: { policies: { concurrency: { source: "enqueue", value: { key, limit: 100, mode: "Wait", weight } } } },
          priority
        })
        // key a (weight 1): a1, a2, a3 at priority 0 (tags 1, 2, 3); key b (weight 4): b1, b2, b3 (tags
        // 1.25, 1.5, 1.75); then a's high row ah at priority 5 (tag 4). Without priority the claims go
        // a1 b1 b2 b3 a2 a3 ah.
        const [a1, a2, a3] = [row("a", 1, 0), row("a", 1, 0), row("a", 1, 0)]
        const [b1, b2, b3] = [row("b", 4, 0), row("b", 4, 0), row("b", 4, 0)]
        const ah = row("a", 1, 5)
        yield* store.insert([a1!, a2!, a3!])
        yield* store.insert([b1!, b2!, b3!])
        yield* store.insert([ah])
        const claimed: Array<{ readonly id: string; readonly tag: number | undefined }> = []
        for (;;) {
          const got = yield* store.fetch("w", 1, lease)
          if (got.length === 0) break
          claimed.push({ id: got[0]!.id, tag: got[0]!.fairTag })
        }
        // ah takes a's first turn (tag 1); a1, passed over, holds ah's tag 4 and so runs last of a's rows;
        // b's rows keep their places (2nd to 4th claims), and the turns' tags are those without priority
        expect(claimed.map((c) => c.id)).toEqual([ah.id, b1!.id, b2!.id, b3!.id, a2!.id, a3!.id, a1!.id])
        expect(claimed.map((c) => c.tag)).toEqual([1, 1.25, 1.5, 1.75, 2, 3, 4])
      }).pipe(Effect.provide(makeLayer())))

    it.live("a claim of several rows takes a key's best rows by priority and consumes its smallest tags", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const lease = Duration.seconds(30)
        const row = (priority: number): Job.NewJob => ({
          id: JobId.make(),
          type: "T",
          handler: null,
          payload: {},
          state: "Enqueued",
          scheduleTime: new Date(Date.now() - 60_000),
          metadata: { policies: { concurrency: { source: "enqueue", value: { key: "k", limit: 100, mode: "Wait", weight: 1 } } } },
          priority
        })
        // tags 1..5 with priorities 0, 3, 0, 7, 0: a claim of 2 takes r4 (7) and r2 (3), at tags 1 and 2;
        // r1, left behind at tag 1, takes r4's tag 4; r3 and r5 keep theirs
        const rs = [row(0), row(3), row(0), row(7), row(0)]
        yield* store.insert(rs)
        const got = yield* store.fetch("w", 2, lease)
        expect(got.map((j) => [j.id, j.fairTag])).toEqual([[rs[3]!.id, 1], [rs[1]!.id, 2]])
        const tags = yield* Effect.forEach([0, 2, 4], (i) => Effect.map(detail(rs[i]!.id), (d) => d.job.fairTag))
        expect(tags).toEqual([4, 3, 5])
      }).pipe(Effect.provide(makeLayer())))
  })
}

describe("priority inside a weighted key: the claim swaps only with rows it locked (postgres)", () => {
  it.live("a higher row of the key that another transaction holds is not considered; once free, it takes the key's next turn", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      const sql = yield* SqlClient.SqlClient
      const lease = Duration.seconds(30)
      const row = (priority: number): Job.NewJob => ({
        id: JobId.make(),
        type: "T",
        handler: null,
        payload: {},
        state: "Enqueued",
        scheduleTime: new Date(Date.now() - 60_000),
        metadata: { policies: { concurrency: { source: "enqueue", value: { key: "k", limit: 100, mode: "Wait", weight: 1 } } } },
        priority
      })
      // tags 1, 2, 3: r1 and r2 at priority 0, h at 5
      const [r1, r2, h] = [row(0), row(0), row(5)]
      yield* store.insert([r1!, r2!, h!])
      const locked = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SELECT id FROM warp_jobs WHERE id = ${h!.id} FOR UPDATE`
            yield* Deferred.succeed(locked, undefined)
            yield* Deferred.await(release)
          })
        )
      )
      yield* Deferred.await(locked)
      // h is held elsewhere: the key's turn (tag 1) goes to r1, nothing swaps
      const first = yield* store.fetch("w", 1, lease)
      expect(first.map((j) => [j.id, j.fairTag])).toEqual([[r1!.id, 1]])
      expect(yield* Effect.forEach([r2!, h!], (r) => Effect.map(detail(r.id), (d) => d.job.fairTag))).toEqual([2, 3])
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      // free again: h takes the key's next turn (tag 2); r2, passed over, holds h's tag 3
      const second = yield* store.fetch("w", 1, lease)
      expect(second.map((j) => [j.id, j.fairTag])).toEqual([[h!.id, 2]])
      expect((yield* detail(r2!.id)).job.fairTag).toBe(3)
    }).pipe(Effect.provide(JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer())))))
})
