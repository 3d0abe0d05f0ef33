/**
 * Starvation under an adversarial arrival stream (Fifo mode), on PostgreSQL with two workers.
 *
 * A producer enqueues jobs of one hot key faster than its slots can run them, for as long as the test
 * watches, while jobs of cold keys arrive now and then. The bounds checked (see the README's Fifo notes):
 *
 * - within a key: no later arrival starts before an earlier one (limit 1), so a job with A unfinished
 *   jobs of its key ahead of it when it is enqueued starts after exactly those A hand-offs of the key's
 *   slot (in time: wait <= (A + 1) x (D + h), D the handler time, h one hand-off);
 * - across keys: the hot key holds at most its limit of fibers, so a cold job is claimed by the next
 *   fiber that fetches: while it waits, at most one hot job per fiber starts, whatever the hot backlog
 *   (in time: wait <= D_cold + h). Both are checked in hand-offs, not milliseconds.
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
/** Fibers across both workers. */
const FIBERS = 8

interface Run {
  readonly key: string
  readonly i: number
  enqueuedAt: number
  startedAt?: number
  endedAt?: number
}

describe("Fifo mode under an adversarial arrival stream (PostgreSQL, 2 workers x 4 fibers)", () => {
  it.live("the oldest job is never overtaken; a hot key cannot starve cold keys (at most one hot start per fiber while a cold job waits)", () => {
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
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Worker.make({ addons: [Concurrency.addon], workerId: "fair-a", concurrency: 4, pollInterval: `${POLL_MS} millis` })
          yield* Worker.make({ addons: [Concurrency.addon], workerId: "fair-b", concurrency: 4, pollInterval: `${POLL_MS} millis` })
          const stream = yield* Effect.forkChild(
            Effect.forever(Effect.andThen(Effect.suspend(() => enqueue("hot", hot++, HOT_MS)), Effect.sleep("3 millis")))
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
      // within the key: start order is enqueue order (a job with A unfinished jobs of its key ahead of it
      // starts after exactly those A: no later arrival overtakes it)
      const byStart = [...hotRuns].sort((a, b) => a.startedAt! - b.startedAt! || a.i - b.i).map((r) => r.i)
      expect(byStart).toEqual(hotRuns.map((r) => r.i))
      // across keys, counted in hand-offs rather than milliseconds (a loaded machine stretches both
      // alike): while a cold job waited, at most FIBERS hot jobs started — the next fiber that fetches
      // takes it — although more than 20 hot jobs were queued ahead of it; and it ran before the hot
      // backlog drained
      for (const r of coldRuns) {
        const hotStartsWhileWaiting = hotRuns.filter((h) => h.startedAt! > r.enqueuedAt && h.startedAt! < r.startedAt!).length
        expect(hotStartsWhileWaiting, r.key).toBeLessThanOrEqual(FIBERS)
        expect(hotRuns.some((h) => h.startedAt! > r.endedAt!), `${r.key} ran before the hot backlog drained`).toBe(true)
      }
      console.log(
        `fairness: ${hotRuns.length} hot jobs (max ${maxAhead} ahead at enqueue), worst hot wait ${Math.max(...hotRuns.map((r) => r.startedAt! - r.enqueuedAt))} ms; ` +
          `cold waits ${coldRuns.map((r) => r.startedAt! - r.enqueuedAt).join(", ")} ms; hot starts while a cold job waited ${coldRuns.map((r) => hotRuns.filter((h) => h.startedAt! > r.enqueuedAt && h.startedAt! < r.startedAt!).length).join(", ")}`
      )
    }).pipe(Effect.provide(env))
  }, 180_000)
})
