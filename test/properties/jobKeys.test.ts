/**
 * Job keys: the two stores agree. Over arbitrary sequences of keyed enqueues (single and batch, every
 * mode, with and without `includeProcessing`, at now or at one of two future times), claims of the due
 * jobs and ends of the claimed ones, the memory store and the PostgreSQL store answer the same
 * `Submitted` tags for the same jobs (ids mapped to the order they first appear), and end with the same
 * rows (state, payload, time) and the same audit trails. The memory store is the model, PostgreSQL the
 * `INSERT … ON CONFLICT` with its lazy release; a difference is a bug in one of them.
 *
 * Runs: WARP_PROPERTY_RUNS / 10 (default 30) sequences of up to 14 steps.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Schema from "effect/Schema"
import * as fc from "fast-check"
import { Contract, JobParameters, Publisher, Warp } from "warp-effect"
import { Outcome } from "../../src/internal/job/Outcome.js"
import * as SqlClient from "effect/sql/SqlClient"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { createDatabase, dropDatabase } from "../support/db.js"
import { pgLayer } from "../support/pgLayer.js"

const RUNS = Math.max(10, Math.floor(Number(process.env.WARP_PROPERTY_RUNS ?? 300) / 10))
const T1 = new Date(Date.UTC(2099, 0, 1))
const T2 = new Date(Date.UTC(2099, 0, 2))

interface Item {
  readonly key: "a" | "b" | "c"
  readonly mode: "keep" | "replace" | "replacePayload"
  readonly processing: boolean
  readonly at: "now" | "t1" | "t2"
}
type Step = { readonly _tag: "submit"; readonly items: ReadonlyArray<Item> } | { readonly _tag: "claim" } | { readonly _tag: "finish" }

const item: fc.Arbitrary<Item> = fc
  .record({
    key: fc.constantFrom("a", "b", "c"),
    mode: fc.constantFrom("keep", "replace", "replacePayload"),
    processing: fc.boolean(),
    at: fc.constantFrom("now", "t1", "t2")
  })
  .map((i) => (i.mode === "keep" ? i : { ...i, processing: false }))

const step: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: fc.array(item, { minLength: 1, maxLength: 4 }).map((items) => ({ _tag: "submit" as const, items })), weight: 6 },
  { arbitrary: fc.constant({ _tag: "claim" as const }), weight: 1 },
  { arbitrary: fc.constant({ _tag: "finish" as const }), weight: 1 }
)

const Payload = Schema.Struct({ n: Schema.Number })

/** Runs `steps` with contract `type`; the transcript with ids as J0, J1, … in order of first appearance. */
const transcript = (type: string, steps: ReadonlyArray<Step>) =>
  Effect.gen(function* () {
    const contract = Contract.job(type, Payload)
    const publisher = yield* Publisher.Publisher
    const store = yield* JobStore
    const names = new Map<string, string>()
    const name = (id: string) => {
      if (!names.has(id)) names.set(id, `J${names.size}`)
      return names.get(id)!
    }
    const out: Array<unknown> = []
    let n = 0
    const claimed: Array<string> = []
    for (const s of steps) {
      if (s._tag === "submit") {
        const items = s.items.map((i) => ({ ...i, n: n++ }))
        const at = items.map((i) => (i.at === "t1" ? T1 : i.at === "t2" ? T2 : undefined))
        const results = yield* publisher.submitMany(
          contract,
          items.map((i) => ({ n: i.n })),
          (_, k) => JobParameters.make().withJobKey(items[k]!.key, { mode: items[k]!.mode, includeProcessing: items[k]!.processing }),
          // every item's own time (now: the past, so due at once)
          (_, k) => at[k] ?? new Date(0)
        )
        out.push(results.map((r) => `${r._tag} ${name(r.id)}`))
      } else if (s._tag === "claim") {
        const jobs = yield* store.fetch("w", 100, Duration.minutes(5))
        const mine = jobs.filter((j) => j.type === type)
        claimed.push(...mine.map((j) => j.id))
        out.push(`claimed ${mine.map((j) => name(j.id)).sort().join(",")}`)
      } else {
        for (const id of claimed.splice(0)) {
          const job = (yield* store.get(id)).pipe((o) => (o._tag === "Some" ? o.value.job : undefined))!
          yield* store.finalize({ job, workerId: "w", outcome: Outcome.Succeeded(), metadata: job.metadata })
        }
        out.push("finished")
      }
    }
    const page = yield* store.list({ type, limit: 1000, offset: 0 })
    const rows = []
    for (const j of page.rows) {
      const d = (yield* store.get(j.id)).pipe((o) => (o._tag === "Some" ? o.value : undefined))!
      rows.push({
        id: name(j.id),
        state: j.state,
        payload: j.payload,
        at: j.state === "Scheduled" ? j.scheduleTime.toISOString() : "-",
        // (the stores spell the creation entry's time with and without milliseconds, as before job keys)
        trail: d.logs.filter((l) => l.kind !== "Processing").map((l) => `${l.kind}: ${l.message.replace(/\.000Z$/, "Z")}`)
      })
    }
    rows.sort((a, b) => Number(a.id.slice(1)) - Number(b.id.slice(1)))
    return { out, rows }
  })

describe("job keys: memory and PostgreSQL agree", () => {
  let url = ""
  let pg: ManagedRuntime.ManagedRuntime<Publisher.Publisher | JobStore | SqlClient.SqlClient, unknown>
  beforeAll(async () => {
    url = await createDatabase()
    pg = ManagedRuntime.make(Warp.layer({ handlers: [], worker: false }).pipe(Layer.provideMerge(pgLayer(url, 6))))
    await pg.runPromise(Effect.void)
  }, 60_000)
  afterAll(async () => {
    await pg?.dispose()
    if (url !== "") await dropDatabase(url)
  })

  it("on arbitrary sequences of keyed submits, claims and ends", async () => {
    let run = 0
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 14 }), async (steps) => {
        const type = `PropKeys${run++}`
        const memory = ManagedRuntime.make(Warp.layerMemory({ handlers: [], worker: false }))
        try {
          const model = await memory.runPromise(transcript(type, steps))
          const real = await pg.runPromise(transcript(type, steps))
          expect(real).toEqual(model)
        } finally {
          await memory.dispose()
          // the next case's claims see its own jobs only
          await pg.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DELETE FROM warp_jobs`))
        }
      }),
      { numRuns: RUNS }
    )
  }, 300_000)
})
