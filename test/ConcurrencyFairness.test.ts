/**
 * Starvation under an adversarial arrival stream (Fifo mode), on PostgreSQL with two workers.
 *
 * A producer enqueues jobs of one hot key faster than its slots can run them, for as long as the test
 * watches, while jobs of cold keys arrive now and then. The bounds checked (see the README's Fifo notes):
 *
 * - within a key: no later arrival starts before an earlier one (limit 1), so a job with A unfinished
 *   jobs of its key ahead of it when it is enqueued starts after at most A + 1 hand-offs of the key's
 *   slot: wait <= (A + 1) x (D + h), D the handler time, h the time one hand-off may take (claim and
 *   gate, at most one poll interval plus a fetch; `HANDOFF_MS` below, generous for a loaded machine);
 * - across keys: the hot key holds at most its limit of fibers, so a cold job is claimed by the next
 *   fiber that fetches: wait <= D_cold + h, whatever the hot backlog.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import { Concurrency, Contract, Handler, JobParameters, Publisher, Worker } from "warp-effect"
import { HolderCounter } from "./support/holders.js"
import { drained } from "./support/runtime.js"
import { pgWorkerEnv } from "./support/env.js"

const Item = Contract.job("FairItem", Schema.Struct({ key: Schema.String, i: Schema.Number, ms: Schema.Number }))

const POLL_MS = 10
const HOT_MS = 4
const COLD_MS = 2
/** One hand-off of a slot (finalize, claim, gate): 10-60 ms seen on a loaded 2-core machine; generous on purpose. */
const HANDOFF_MS = 400

interface Run {
  readonly key: string
  readonly i: number
  enqueuedAt: number
  startedAt?: number
  endedAt?: number
}

describe("Fifo mode under an adversarial arrival stream (PostgreSQL, 2 workers x 4 fibers)", () => {
  it.live("the oldest job is never overtaken and its wait is bounded; a hot key cannot starve cold keys", () => {
    const runs = new Map<string, Run>()
    const id = (key: string, i: number) => `${key}#${i}`
    const holders = new HolderCounter()
    const handler = Handler.job(Item, ({ i, key, ms }) =>
      Effect.gen(function* () {
        const run = runs.get(id(key, i))!
        run.startedAt = yield* Clock.currentTimeMillis
        yield* holders.hold(key, Effect.sleep(ms))
        run.endedAt = yield* Clock.currentTimeMillis
      })
    )
    const env = pgWorkerEnv([handler])
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const enqueue = (key: string, i: number, ms: number) =>
        Effect.gen(function* () {
          const run: Run = { key, i, enqueuedAt: 0 }
          runs.set(id(key, i), run)
          run.enqueuedAt = yield* Clock.currentTimeMillis
          yield* p.enqueue(Item, { key, i, ms }, JobParameters.make().withMutex(key, "Fifo"))
        })
      // a backlog first, then a stream about twice as fast as the hot key's one slot can take
      let hot = 0
      for (; hot < 30; hot++) yield* enqueue("hot", hot, HOT_MS)
      let workersAt = 0
      yield* Effect.scoped(
        Effect.gen(function* () {
          workersAt = yield* Clock.currentTimeMillis
          yield* Worker.make({ addons: [Concurrency.addon], workerId: "fair-a", concurrency: 4, pollInterval: `${POLL_MS} millis` })
          yield* Worker.make({ addons: [Concurrency.addon], workerId: "fair-b", concurrency: 4, pollInterval: `${POLL_MS} millis` })
          const stream = yield* Effect.fork(
            Effect.forever(Effect.zipRight(Effect.suspend(() => enqueue("hot", hot++, HOT_MS)), Effect.sleep("3 millis")))
          )
          for (let c = 0; c < 12; c++) {
            yield* Effect.sleep("100 millis")
            yield* enqueue(`cold-${c}`, c, COLD_MS)
          }
          yield* Fiber.interrupt(stream)
          yield* drained(120_000)
        })
      )
      const hotRuns = [...runs.values()].filter((r) => r.key === "hot").sort((a, b) => a.i - b.i)
      const coldRuns = [...runs.values()].filter((r) => r.key !== "hot")
      // the stream outpaced the slot: a backlog built up (else this test proves nothing)
      const maxAhead = Math.max(...hotRuns.map((r) => hotRuns.filter((o) => o.i < r.i && o.endedAt! > r.enqueuedAt).length))
      expect(maxAhead).toBeGreaterThan(20)
      expect(holders.max.get("hot")).toBe(1)
      // within the key: start order is enqueue order, and every wait is within its bound
      const byStart = [...hotRuns].sort((a, b) => a.startedAt! - b.startedAt! || a.i - b.i).map((r) => r.i)
      expect(byStart).toEqual(hotRuns.map((r) => r.i))
      for (const r of hotRuns) {
        // the backlog enqueued before the workers started waits from their start
        const from = Math.max(r.enqueuedAt, workersAt)
        const ahead = hotRuns.filter((o) => o.i < r.i && o.endedAt! > from).length
        expect(r.startedAt! - from, `hot #${r.i} with ${ahead} ahead`).toBeLessThanOrEqual((ahead + 1) * (HOT_MS + HANDOFF_MS))
      }
      // across keys: cold jobs ran while the hot backlog was still there
      for (const r of coldRuns) {
        expect(r.startedAt! - r.enqueuedAt, r.key).toBeLessThanOrEqual(COLD_MS + HANDOFF_MS)
        expect(hotRuns.some((h) => h.startedAt! > r.endedAt!), `${r.key} ran before the hot backlog drained`).toBe(true)
      }
      console.log(
        `fairness: ${hotRuns.length} hot jobs (max ${maxAhead} ahead at enqueue), worst hot wait ${Math.max(...hotRuns.map((r) => r.startedAt! - r.enqueuedAt))} ms; ` +
          `cold waits ${coldRuns.map((r) => r.startedAt! - r.enqueuedAt).join(", ")} ms`
      )
    }).pipe(Effect.provide(env))
  }, 180_000)
})
