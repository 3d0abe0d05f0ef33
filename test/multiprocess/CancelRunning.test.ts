/**
 * CancelRunning across processes: two worker processes (4 fibers each), three keys `Mutex(key,
 * CancelRunning)` with five 1.5 s jobs each enqueued at once. Newer jobs stop older running holders; the
 * interrupted handler's exit is recorded with the database's clock, and at no instant is more than one
 * handler of a key inside (a replaced holder leaves before its replacement enters).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { JobParameters, Publisher } from "warp-effect"
import { type ChildWorker, parentEnv, spawnWorker } from "../soak/children.js"
import { checkOverlaps, loadIntervals } from "../soak/intervals.js"
import { createTables, Work } from "../soak/workload.js"
import { createDatabase, dropDatabase } from "../support/db.js"
import { detail, drained } from "../support/runtime.js"

const keys = ["deploy-a", "deploy-b", "deploy-c"]

describe("multi-process CancelRunning: 2 processes x 4 fibers", () => {
  let url = ""
  let children: Array<ChildWorker> = []
  beforeAll(async () => {
    url = await createDatabase()
  })
  afterAll(async () => {
    await Promise.all(children.map((c) => c.stop()))
    await dropDatabase(url)
  })

  it.live("newer jobs replace older running ones; never two of a key inside; the newest of each key succeeds; nothing lost", () => {
    const env = parentEnv(url)
    return Effect.gen(function* () {
      yield* createTables
      children = [
        spawnWorker({ url, name: "cr-a", fibers: 4, cancelCheckMs: 50 }),
        spawnWorker({ url, name: "cr-b", fibers: 4, cancelCheckMs: 50 })
      ]
      yield* Effect.promise(() => Promise.all(children.map((c) => c.ready)))
      const p = yield* Publisher.Publisher
      const byKey = new Map<string, Array<string>>()
      for (let i = 0; i < 5; i++) {
        for (const key of keys) {
          const id = yield* p.enqueue(Work, { ms: 1500, fail: false }, JobParameters.make().withMutex(key, "CancelRunning"))
          byKey.set(key, [...(byKey.get(key) ?? []), id])
        }
      }
      yield* drained(90_000)
      const intervals = yield* loadIntervals
      const reports = checkOverlaps(intervals)
      console.log(
        `multi-process CancelRunning: ${intervals.length} handler runs (${intervals.filter((i) => i.result === "interrupted").length} interrupted); ` +
          reports.map((r) => `${r.key} max inside ${r.maxInside}`).join(", ")
      )
      for (const key of keys) {
        const r = reports.find((x) => x.key === key)!
        expect({ key, maxInside: r.maxInside, violations: r.violations, overlaps: r.afterLostSlot }).toEqual({ key, maxInside: 1, violations: 0, overlaps: 0 })
      }
      expect(intervals.every((i) => i.exitSource === "recorded")).toBe(true)
      let replaced = 0
      for (const [key, ids] of byKey) {
        // the newest job of the key is never replaced
        expect((yield* detail(ids.at(-1)!)).job.state).toBe("Succeeded")
        for (const id of ids) {
          const d = yield* detail(id)
          const runs = intervals.filter((i) => i.jobId === id)
          if (d.job.state === "Deleted") {
            replaced++
            expect(d.logs.at(-1)!.message).toMatch(new RegExp(`^Cancelled — replaced by newer job \\S+ of '${key}'`))
            // a replaced job either never entered, or was interrupted in its one run
            expect(runs.every((i) => i.result === "interrupted")).toBe(true)
            expect(runs.length).toBeLessThanOrEqual(1)
          } else {
            expect({ id, state: d.job.state, runs: runs.map((i) => i.result) }).toEqual({ id, state: "Succeeded", runs: ["ok"] })
          }
        }
      }
      expect(replaced).toBeGreaterThan(0)
      for (const c of children) expect(c.alive, c.errors).toBe(true)
    }).pipe(Effect.provide(env))
  })
})
