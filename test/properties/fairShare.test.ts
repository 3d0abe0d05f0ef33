/**
 * Weighted fair share: the bound on how long a job waits, in claims, on both stores.
 *
 * The bound. A fair job J of flow g (weight w) enters the queue — inserted, or requeued by a policy —
 * with tag t while the virtual time is V (the smallest tag among the due pending fair rows, see
 * `JobStore.fairTagOf`). Then, until J is claimed, every other flow f (weight w_f) has at most
 *
 *     floor((t - V) * w_f) + 1
 *
 * of its jobs claimed, so J is claimed after at most  sum over f != g of (floor((t - V) * w_f) + 1)  + L
 * other jobs, where L counts the rows other claimers take concurrently with J's claim (0 with one
 * claimer, as here). For the i-th job of a batch entering an idle flow, t - V = i / w: at most
 * i * W / w + n other jobs, W and n the total weight and number of the other backlogged flows — with
 * equal weights, 2n for the first job of a cold key, however deep a hot key's backlog.
 *
 * Why: claims go in tag order, so the jobs of f claimed while J waits have tags <= t; they are >= V
 * (V never decreases while J is queued: claims take the smallest tags, and every new tag is above V);
 * and the tags of one flow are at least 1/w_f apart (a new tag is max(V, last) + 1/w_f, and V is at or
 * above the tags already claimed). Holds for due rows without `keepsPlace` requeues (a row that keeps
 * its place keeps an older tag), which the workloads here are.
 *
 * Priority inside a flow: when the flow's turn (its smallest tag) comes, the claim takes its best due
 * row by (priority descending, tag) at that tag, and the row passed over takes the claimed row's tag, so
 * the flow's set of tags is what it was without priority: the bound above is a bound on the flow's
 * turn with tag t (checked here until a row of g is claimed at tag t — J itself, or a row of a higher
 * priority that took J's turn, J then holding a later tag of g). And per claim: a flow's claimed rows
 * are of a priority no lower than any row of the flow left pending, and they consume the flow's
 * smallest tags.
 *
 * Workloads: random flows (weights 0.5 .. 3), batches inserted (one hot flow gets deep batches) with
 * priorities all 0 or random in -1 .. 2, claims of 1..4 rows, a claimed job finalized Succeeded or
 * requeued by policy (a new entry, at the back of its flow), then drained. One claimer; the per-flow
 * count is checked for every entry.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as fc from "fast-check"
import * as Layer from "effect/Layer"
import { Job, JobStoreMemory, JobStorePg } from "warp-effect"
import * as JobId from "../../src/internal/job/JobId.js"
import { JobStore, type JobStoreService } from "../../src/internal/store/JobStore.js"
import { freshPgLayer } from "../support/db.js"
import { property } from "./fastCheck.js"

const lease = Duration.seconds(30)

type Op =
  | { readonly _tag: "insert"; readonly flow: number; readonly count: number; readonly priorities: ReadonlyArray<number> }
  | { readonly _tag: "claim"; readonly n: number; readonly requeue: ReadonlyArray<boolean> }

interface Workload {
  readonly weights: ReadonlyArray<number>
  readonly ops: ReadonlyArray<Op>
}

/** The rows' priorities, by position in their batch (cycled): all 0 (the rule without priority), or random within flows. */
const priorities: fc.Arbitrary<ReadonlyArray<number>> = fc.oneof(
  fc.constant([0]),
  fc.array(fc.integer({ min: -1, max: 2 }), { minLength: 1, maxLength: 40 })
)

const workload: fc.Arbitrary<Workload> = fc
  .array(fc.constantFrom(0.5, 1, 1, 2, 3), { minLength: 2, maxLength: 5 })
  .chain((weights) =>
    fc.record({
      weights: fc.constant(weights),
      ops: fc.array(
        fc.oneof(
          { weight: 2, arbitrary: fc.record({ _tag: fc.constant("insert" as const), flow: fc.integer({ min: 0, max: weights.length - 1 }), count: fc.integer({ min: 1, max: 4 }), priorities }) },
          // the hot flow: deep batches
          { weight: 1, arbitrary: fc.record({ _tag: fc.constant("insert" as const), flow: fc.constant(0), count: fc.integer({ min: 10, max: 40 }), priorities }) },
          { weight: 3, arbitrary: fc.record({ _tag: fc.constant("claim" as const), n: fc.integer({ min: 1, max: 4 }), requeue: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }) }) }
        ),
        { minLength: 1, maxLength: 25 }
      )
    })
  )

interface Entry {
  readonly id: string
  readonly flow: string
  readonly tag: number
  readonly virtual: number
  /** The claim sequence's length when the job entered. */
  readonly at: number
}

const pending = ["Enqueued", "Scheduled"] as const

/** The virtual time as the stores define it (every row of these workloads is due). */
const virtualTime = (store: JobStoreService) =>
  Effect.gen(function* () {
    const queued = (yield* store.list({ states: pending, limit: 10_000, offset: 0 })).rows.flatMap((j) => (j.fairTag === undefined ? [] : [j.fairTag]))
    if (queued.length > 0) return Math.min(...queued)
    const running = (yield* store.list({ state: "Processing", limit: 10_000, offset: 0 })).rows.flatMap((j) => (j.fairTag === undefined ? [] : [j.fairTag]))
    return running.length > 0 ? Math.max(...running) : 0
  })

const tagOf = (store: JobStoreService, id: string) =>
  Effect.map(store.get(id), (d) => (d._tag === "Some" ? d.value.job.fairTag! : NaN))

let run = 0

const runCase = (w: Workload) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    run++
    const flowName = (i: number) => `fair-${run}-${i}`
    const weightOf = new Map(w.weights.map((wt, i) => [flowName(i), wt]))
    const rowOf = (flow: number, priority: number): Job.NewJob => ({
      id: JobId.make(),
      type: "T",
      handler: null,
      payload: {},
      state: "Enqueued",
      scheduleTime: new Date(Date.now() - 60_000),
      metadata: { policies: { concurrency: { source: "enqueue", value: { key: flowName(flow), limit: 1000, mode: "Wait", weight: w.weights[flow]! } } } },
      priority
    })
    const claims: Array<{ readonly id: string; readonly flow: string; readonly tag: number; readonly fetch: number }> = []
    let fetches = 0
    const entries: Array<Entry> = []
    const enter = (id: string, flow: string, virtual: number) =>
      Effect.map(tagOf(store, id), (tag) => void entries.push({ id, flow, tag, virtual, at: claims.length }))
    const claim = (n: number, requeue: ReadonlyArray<boolean>) =>
      Effect.gen(function* () {
        const flowOf = (job: Job.Job) => (job.metadata as any).policies.concurrency.value.key as string
        const before = (yield* store.list({ states: pending, limit: 10_000, offset: 0 })).rows
        const got = yield* store.fetch("w", n, lease)
        const after = (yield* store.list({ states: pending, limit: 10_000, offset: 0 })).rows
        fetches++
        for (const job of got) claims.push({ id: job.id, flow: flowOf(job), tag: job.fairTag!, fetch: fetches })
        // inside a flow: the claimed rows are its best due rows by (priority, tag), and they consume its
        // smallest tags: its pending tags after the claim are those before, less the smallest m
        const flows = new Set(before.map(flowOf))
        for (const flow of flows) {
          const taken = got.filter((j) => flowOf(j) === flow)
          const left = after.filter((j) => flowOf(j) === flow)
          const high = Math.max(-Infinity, ...left.map((j) => j.priority))
          for (const j of taken) {
            if (j.priority < high) throw new Error(`${flow}: claimed a row of priority ${j.priority} and left one of ${high}`)
          }
          const tags = before.filter((j) => flowOf(j) === flow).map((j) => j.fairTag!).sort((a, b) => a - b)
          expect(taken.map((j) => j.fairTag!).sort((a, b) => a - b)).toEqual(tags.slice(0, taken.length))
          expect(left.map((j) => j.fairTag!).sort((a, b) => a - b)).toEqual(tags.slice(taken.length))
        }
        for (const [i, job] of got.entries()) {
          const flow = flowOf(job)
          if (requeue[i] === true) {
            const virtual = yield* virtualTime(store)
            yield* store.finalize({ job, workerId: "w", outcome: Job.Outcome.Requeued({ reason: "Requeued — full" }), metadata: job.metadata })
            yield* enter(job.id, flow, virtual)
          } else {
            yield* store.finalize({ job, workerId: "w", outcome: Job.Outcome.Succeeded(), metadata: job.metadata })
          }
        }
        return got.length
      })
    for (const op of w.ops) {
      if (op._tag === "insert") {
        const virtual = yield* virtualTime(store)
        const rows = Array.from({ length: op.count }, (_, i) => rowOf(op.flow, op.priorities[i % op.priorities.length]!))
        yield* store.insert(rows)
        for (const r of rows) yield* enter(r.id, flowName(op.flow), virtual)
      } else {
        yield* claim(op.n, op.requeue)
      }
    }
    while ((yield* claim(3, [])) > 0) {
      // drain
    }
    // the check: per entry, per other flow, the jobs claimed before the entry's tag is consumed (a row
    // of its flow claimed at that tag: itself, or a row of a higher priority that took its turn)
    for (const e of entries) {
      const end = claims.findIndex((c, i) => i >= e.at && c.flow === e.flow && c.tag === e.tag)
      expect(end).toBeGreaterThanOrEqual(e.at)
      const before = new Map<string, number>()
      // the rows of the claims before, and of the same claim at a smaller tag (a claim's rows are listed
      // by priority, not tag)
      const counted = claims.slice(e.at).filter((c) => c.fetch < claims[end]!.fetch || (c.fetch === claims[end]!.fetch && c.tag < e.tag))
      for (const c of counted) if (c.flow !== e.flow) before.set(c.flow, (before.get(c.flow) ?? 0) + 1)
      for (const [flow, n] of before) {
        const bound = Math.floor((e.tag - e.virtual) * weightOf.get(flow)! + 1e-9) + 1
        if (n > bound) {
          throw new Error(`job of ${e.flow} (tag ${e.tag}, V ${e.virtual}) waited for ${n} jobs of ${flow} (weight ${weightOf.get(flow)}), bound ${bound}`)
        }
      }
    }
  })

const stores: ReadonlyArray<readonly [string, Layer.Layer<JobStore, unknown>, number]> = [
  ["memory", JobStoreMemory.layer, 300],
  ["postgres", JobStorePg.layer.pipe(Layer.provide(freshPgLayer())), 25]
]

describe("fair share: a job waits for at most floor((t - V) * w_f) + 1 jobs of each other flow f", () => {
  for (const [name, storeLayer, numRuns] of stores) {
    layer(storeLayer, { timeout: 300_000, excludeTestServices: true })(name, (it) => {
      property(it.effect, "random skewed workloads, one claimer, policy requeues", [workload], ([w]) => runCase(w), {
        fastCheck: { numRuns },
        timeout: 300_000
      })
    })
  }
})
