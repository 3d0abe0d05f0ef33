/**
 * Crash semantics with a real `kill -9`: a worker killed mid-attempt leaves its job Processing; its
 * lease (heartbeat every third of it) expires, the next fetch recovers the job (a "Recovered" audit
 * entry) and it runs to Succeeded. The killed process's slot is free again: its advisory lock died
 * with its connection.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Concurrency, JobParameters, JobStorePg, Publisher, Registry, SemaphoreProviderMemory } from "warp-effect"
import { type ChildWorker, spawnWorker } from "../soak/children.js"
import { loadIntervals } from "../soak/intervals.js"
import { createTables, recordingHandler, Work } from "../soak/workload.js"
import { createDatabase, dropDatabase, pgLayer } from "../support/db.js"
import { detail, drained } from "../support/runtime.js"

const LEASE_MS = 1500

/** Polls (bounded) until `check` holds. */
const until = <E, R>(what: string, check: Effect.Effect<boolean, E, R>, timeoutMs = 30_000) =>
  Effect.gen(function* () {
    const start = Date.now()
    while (!(yield* check)) {
      if (Date.now() - start > timeoutMs) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("20 millis")
    }
  })

describe("crash: kill -9 mid-attempt", () => {
  let url = ""
  const children: Array<ChildWorker> = []

  beforeAll(async () => {
    url = await createDatabase()
  })
  afterAll(async () => {
    await Promise.all(children.map((c) => c.stop()))
    await dropDatabase(url)
  })

  it.live("the job stays Processing, its lease expires, the next fetch recovers it and it succeeds; the killed holder's slot is free", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* createTables
      const victim = spawnWorker({ url, name: "crash-victim", fibers: 2, leaseMs: LEASE_MS })
      children.push(victim)
      yield* Effect.promise(() => victim.ready)

      const p = yield* Publisher.Publisher
      // both hang in their first attempt; the Wait-mode one holds the mutex 'crash-key' while hanging
      const waitJob = yield* p.enqueue(Work, { ms: 5, fail: false, hangFirst: true }, JobParameters.make().withMutex("crash-key", "Wait"))
      const keyless = yield* p.enqueue(Work, { ms: 5, fail: false, hangFirst: true })
      yield* until(
        "both first attempts inside their handlers",
        Effect.map(sql<{ n: number }>`SELECT count(*)::int AS n FROM rel_intervals WHERE attempt = 1`, (r) => r[0]!.n === 2)
      )

      const [{ at }] = yield* sql<{ at: Date }>`SELECT clock_timestamp() AS at`
      victim.signal("SIGKILL")
      yield* sql`INSERT INTO rel_deaths (pid, proc, at) VALUES (${victim.pid}, ${victim.config.name}, ${at})`
      const exit = yield* Effect.promise(() => victim.exited)
      expect(exit.signal).toBe("SIGKILL")

      // nobody finalized them: still Processing, claimed by the dead worker
      for (const id of [waitJob, keyless]) {
        const d = yield* detail(id)
        expect(d.job.state).toBe("Processing")
        expect(d.job.lockedBy).toMatch(/^crash-victim\//)
      }

      const rescuer = spawnWorker({ url, name: "crash-rescuer", fibers: 2, leaseMs: LEASE_MS })
      children.push(rescuer)
      yield* Effect.promise(() => rescuer.ready)
      yield* drained(30_000)

      for (const id of [waitJob, keyless]) {
        const d = yield* detail(id)
        expect(d.job.state).toBe("Succeeded")
        expect(d.job.attempt).toBe(2)
        const recovered = d.logs.find((l) => l.kind === "Recovered")
        expect(recovered, JSON.stringify(d.logs)).toBeDefined()
        expect(recovered!.message).toMatch(/^Lease expired; attempt 2 claimed by crash-rescuer\//)
        // recovered only once the lease had run out: the claim's entry is stamped with the instant its
        // lease counts from (timestamps read at millisecond precision)
        const claimed = d.logs.find((l) => l.kind === "Processing")!
        expect(recovered!.at.getTime() - claimed.at.getTime()).toBeGreaterThanOrEqual(LEASE_MS - 1)
        expect(d.logs.filter((l) => l.kind === "Succeeded").length).toBe(1)
      }

      // attempt 1 ended with the process (no exit record); attempt 2 ran to the end in the other process
      const intervals = (yield* loadIntervals).filter((i) => i.jobId === waitJob).sort((a, b) => a.attempt - b.attempt)
      expect(intervals.map((i) => [i.attempt, i.proc, i.exitSource, i.result])).toEqual([
        [1, "crash-victim", "death", null],
        [2, "crash-rescuer", "recorded", "ok"]
      ])
      expect(intervals[1]!.entered).toBeGreaterThan(intervals[0]!.exited)

      const locks = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
      expect(locks[0]!.n).toBe(0)
      expect(rescuer.alive, rescuer.errors).toBe(true)
    }).pipe(
      Effect.provide(
        Publisher.layer.pipe(
          Layer.provideMerge(Registry.layer({ handlers: [recordingHandler({ proc: "parent", pid: process.pid })] })),
          Layer.provideMerge(Concurrency.layer.pipe(Layer.provide(SemaphoreProviderMemory.layer))),
          Layer.provideMerge(JobStorePg.layer),
          Layer.provideMerge(pgLayer(url, 4))
        )
      )
    ))
})
