/**
 * Job priority: the claim takes due rows by (priority descending, ScheduleTime, id), on both stores.
 *
 * The bound. A claim of b rows never takes a row of a lower priority than a due keyless plain row (no
 * concurrency key, not Fifo, no weight) that it leaves unclaimed; and when it takes fewer than b rows,
 * it leaves no due keyless plain row unclaimed. Whatever else is due: keyed Wait rows (constrained: the
 * admission takes at most one a claim, the first of its key), keyed Skip rows, weighted (fair-share)
 * rows (their class is merged with the others by each row's own priority), a Fifo line (its head
 * competes by its own priority). It holds while fewer than b + `ADMISSION_DEPTH` (32) plain rows rank
 * ahead of the row left (the admission's window; the workloads here stay below it) and with no lease
 * expired (expired leases are recovered first, whatever their priority).
 *
 * Workloads: up to 24 rows of random kinds, priorities (-3..3 and the extremes) and ScheduleTimes (the
 * last minute, or an hour ahead: never due in the case), inserted in one or several inserts, then
 * claims of b (1..5) rows, each claimed row finalized Succeeded, until nothing of the case is due. One
 * claimer; keys are the case's own. The PostgreSQL store is shared by the cases (rows scheduled ahead
 * stay, never due).
 */
import { describe, expect, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as fc from "fast-check"
import * as Layer from "effect/Layer"
import { Job, JobStoreMemory, JobStorePg } from "warp-effect"
import * as JobId from "../../src/internal/job/JobId.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { freshPgLayer } from "../support/db.js"
import { property } from "./fastCheck.js"

const lease = Duration.seconds(30)

type Kind = "keyless" | "wait" | "skip" | "fair" | "fifo"

interface Row {
  readonly kind: Kind
  readonly key: number
  readonly priority: number
  /** ms before now (due), or undefined: an hour ahead. */
  readonly ago: number | undefined
}

interface Workload {
  readonly rows: ReadonlyArray<Row>
  /** Rows per insert call. */
  readonly chunk: number
  readonly b: number
}

const row: fc.Arbitrary<Row> = fc.record({
  kind: fc.constantFrom<Kind>("keyless", "keyless", "keyless", "wait", "skip", "fair", "fifo"),
  key: fc.integer({ min: 0, max: 1 }),
  priority: fc.oneof({ weight: 8, arbitrary: fc.integer({ min: -3, max: 3 }) }, { weight: 1, arbitrary: fc.constantFrom(-32768, 32767) }),
  ago: fc.option(fc.integer({ min: 1_000, max: 50_000 }), { freq: 6, nil: undefined })
})

const workload: fc.Arbitrary<Workload> = fc.record({
  rows: fc.array(row, { minLength: 1, maxLength: 24 }),
  chunk: fc.integer({ min: 1, max: 24 }),
  b: fc.integer({ min: 1, max: 5 })
})

let run = 0

const metadataOf = (r: Row, prefix: string): unknown => {
  const key = `${prefix}-${r.kind}-${r.key}`
  switch (r.kind) {
    case "keyless":
      return { policies: {} }
    case "wait":
      return { policies: { concurrency: { source: "enqueue", value: { key, limit: 1, mode: "Wait" } } } }
    case "skip":
      return { policies: { concurrency: { source: "enqueue", value: { key, limit: 1, mode: "Skip" } } } }
    case "fair":
      return { policies: { concurrency: { source: "enqueue", value: { key, limit: 100, mode: "Wait", weight: r.key + 1 } } } }
    case "fifo":
      return { policies: { concurrency: { source: "enqueue", value: { key, limit: 1, mode: "Fifo" } } } }
  }
}

/** What the cases exercised. */
const seen = { cases: 0, claims: 0, partial: 0, outranked: 0 }

const runCase = (w: Workload) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    run++
    seen.cases++
    // a case that failed left its rows: drain whatever is due, so that shrinking starts clean
    while (true) {
      const stale = yield* store.fetch("w", 50, lease)
      if (stale.length === 0) break
      for (const job of stale) yield* store.finalize({ job, workerId: "w", outcome: Job.Outcome.Succeeded(), metadata: job.metadata })
    }
    const now = Date.now()
    const rows = w.rows.map((r) => ({
      spec: r,
      job: {
        id: JobId.make(),
        type: "P",
        handler: null,
        payload: {},
        state: r.ago === undefined ? ("Scheduled" as const) : ("Enqueued" as const),
        scheduleTime: new Date(r.ago === undefined ? now + 3_600_000 : now - r.ago),
        metadata: metadataOf(r, `prio-${run}`),
        priority: r.priority
      } satisfies Job.NewJob
    }))
    for (let i = 0; i < rows.length; i += w.chunk) yield* store.insert(rows.slice(i, i + w.chunk).map((r) => r.job))
    const mine = new Map(rows.map((r) => [r.job.id, r]))
    const left = new Set(rows.filter((r) => r.spec.ago !== undefined).map((r) => r.job.id))
    for (let guard = 0; left.size > 0; guard++) {
      expect(guard).toBeLessThan(200)
      const got = yield* store.fetch("w", w.b, lease)
      expect(got.length).toBeGreaterThan(0)
      expect(got.length).toBeLessThanOrEqual(w.b)
      seen.claims++
      for (const j of got) {
        expect(left.has(j.id)).toBe(true)
        expect(j.priority).toBe(mine.get(j.id)!.spec.priority)
        left.delete(j.id)
      }
      const keylessLeft = [...left].map((id) => mine.get(id)!).filter((r) => r.spec.kind === "keyless")
      if (keylessLeft.length > 0) {
        const lowest = Math.min(...got.map((j) => j.priority))
        const highest = Math.max(...keylessLeft.map((r) => r.spec.priority))
        if (lowest < highest) throw new Error(`a claim of ${w.b} took priority ${lowest} and left a due keyless row of priority ${highest}`)
        if (got.length < w.b) throw new Error(`a claim of ${w.b} took ${got.length} rows and left ${keylessLeft.length} due keyless rows`)
        seen.outranked++
      }
      if (got.length < w.b) seen.partial++
      for (const job of got) yield* store.finalize({ job, workerId: "w", outcome: Job.Outcome.Succeeded(), metadata: job.metadata })
    }
  })

/**
 * A fixed case: two Wait rows of two keys rank first (one claim takes one of them), then a keyless row,
 * then a weighted row of a lower priority — a claim of 2 takes a Wait row and the keyless one.
 */
const twoConstrainedAhead: Workload = {
  rows: [
    { kind: "wait", key: 0, priority: 5, ago: 5_000 },
    { kind: "wait", key: 1, priority: 4, ago: 5_000 },
    { kind: "keyless", key: 0, priority: 3, ago: 5_000 },
    { kind: "fair", key: 0, priority: 0, ago: 9_000 }
  ],
  chunk: 24,
  b: 2
}

const stores: ReadonlyArray<readonly [string, Layer.Layer<JobStore, unknown>, number]> = [
  ["memory", JobStoreMemory.layer, 300],
  ["postgres", JobStorePg.layer.pipe(Layer.provide(freshPgLayer())), 40]
]

describe("priority: a claim of b rows never takes a lower priority than a due keyless row it leaves", () => {
  for (const [name, storeLayer, numRuns] of stores) {
    layer(storeLayer, { timeout: 300_000, excludeTestServices: true })(name, (it) => {
      property(it.effect, "random kinds, priorities and times; claims of 1..5", [workload], ([w]) => runCase(w), {
        fastCheck: { numRuns, examples: [[twoConstrainedAhead]] },
        timeout: 300_000
      })
      it.effect("the workloads exercised claims that left keyless rows behind, and partial claims", () =>
        Effect.sync(() => {
          expect(seen.outranked).toBeGreaterThan(0)
          expect(seen.partial).toBeGreaterThan(0)
        }))
    })
  }
})
