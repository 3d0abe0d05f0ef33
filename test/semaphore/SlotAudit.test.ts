/**
 * The slot-leak audit (issue 17, item 5) on PostgreSQL, with slots leaked on purpose:
 * - a raw `pg` session that takes a free slot lock of a key whose jobs are running, and holds no job:
 *   the audit reports exactly that session's slot (never a live holder, while normal jobs run), and
 *   with `terminateStale` ends the session — the slot is free again, and a waiting job gets it;
 * - a worker process killed with SIGKILL while holding: PostgreSQL ends its session and frees the
 *   lock, so nothing is reported (the row waits for its lease, as before);
 * - a worker process stopped (SIGSTOP) while holding: its lease expires while its lock is held — a
 *   stuck holder, and not a leak.
 * Waits are bounded polls of the database or the audit, never sleeps used as synchronization.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as SqlClient from "effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import pg from "pg"
import {
  Concurrency,
  Contract,
  Handler,
  JobParameters,
  JobStorePg,
  Publisher,
  Registry,
  Semaphore,
  SemaphoreProviderMemory,
  SemaphoreProviderPg,
  SlotAudit,
  Worker
} from "warp-effect"
import { LOCK_PREFIX, requeuedText } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import * as SlotAuditInternal from "../../src/internal/concurrency/SlotAudit.js"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { type ChildWorker, spawnWorker } from "../soak/children.js"
import { createTables, recordingHandler, Work as ChildWork } from "../soak/workload.js"
import { createDatabase, dropDatabase, pgLayer } from "../support/db.js"
import { HolderCounter } from "../support/holders.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { detail, drained } from "../support/runtime.js"

const slotId = (key: string, i: number) => lockId(slotName(LOCK_PREFIX + key, i))

/** Polls `check` (bounded) until it returns a value. */
const poll = <A, E, R>(what: string, check: Effect.Effect<A | undefined, E, R>, timeoutMs = 15_000) =>
  Effect.gen(function* () {
    const start = Date.now()
    while (true) {
      const a = yield* check
      if (a !== undefined) return a
      if (Date.now() - start > timeoutMs) return yield* Effect.die(new Error(`waited ${timeoutMs} ms for ${what}`))
      yield* Effect.sleep("25 millis")
    }
  })

/** The pids holding slot locks of `key` (slots 0..n-1) in this database. */
const holdersOf = (key: string, n: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ pid: number; id: string }>`
      SELECT pid, ((classid::bigint << 32) | objid::bigint)::text AS id FROM pg_locks
      WHERE locktype = 'advisory' AND objsubid = 1 AND granted
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND ((classid::bigint << 32) | objid::bigint)::text IN ${sql.in(Array.from({ length: n }, (_, i) => slotId(key, i)))}`
  ).pipe(Effect.orDie)

describe("slot audit: a session left open holding a slot", () => {
  let url = ""
  beforeAll(async () => {
    url = await createDatabase()
  })
  afterAll(async () => {
    await dropDatabase(url)
  })

  const Work = Contract.job("AuditWork", Schema.Struct({ i: Schema.Number }))

  it.live("finds exactly the leaked slot (no false positive while jobs run); terminateStale frees it and a waiting job takes it", () => {
    const holders = new HolderCounter()
    const raw = new pg.Client({ connectionString: url })
    return Effect.gen(function* () {
      const release = yield* Deferred.make<void>()
      const handler = Handler.job(Work, () => holders.hold("audit-k", Deferred.await(release)), { policy: [Semaphore("audit-k", 3)] })
      const env = Publisher.layer.pipe(
        Layer.provideMerge(Registry.layer({ handlers: [handler] })),
        Layer.provideMerge(Concurrency.layer),
        Layer.provideMerge(SemaphoreProviderPg.layer()),
        Layer.provideMerge(JobStorePg.layer),
        Layer.provideMerge(pgLayer(url, 20))
      )
      yield* Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const observe = yield* SlotAuditInternal.make({ idleFor: "1500 millis" })
        const terminating = yield* SlotAuditInternal.make({ idleFor: "1500 millis", terminateStale: true })
        yield* p.enqueue(Work, { i: 1 })
        yield* p.enqueue(Work, { i: 2 })
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* Worker.make({ addons: [Concurrency.addon], concurrency: 4, pollInterval: "10 millis", gracePeriod: "1 second" })
            yield* poll("2 holders", Effect.sync(() => (holders.current("audit-k") === 2 ? true : undefined)))
            // while only normal jobs run, nothing is reported, however long they hold
            for (let i = 0; i < 5; i++) {
              const r = yield* observe.runOnce
              expect(r.leaked).toEqual([])
              expect(r.stuck).toEqual([])
            }
            // leak: a separate session takes the free slot and holds no job
            raw.on("error", () => {})
            yield* Effect.promise(() => raw.connect())
            const rawPid = Number((yield* Effect.promise(() => raw.query("SELECT pg_backend_pid() AS pid"))).rows[0].pid)
            let leakedSlot = -1
            for (let i = 0; i < 3 && leakedSlot < 0; i++) {
              const got = yield* Effect.promise(() => raw.query("SELECT pg_try_advisory_lock($1::bigint) AS ok", [slotId("audit-k", i)]))
              if (got.rows[0].ok === true) leakedSlot = i
            }
            expect(leakedSlot).toBeGreaterThanOrEqual(0)
            // a third job now finds the key full (3 slots: 2 jobs + the leak)
            const third = yield* p.enqueue(Work, { i: 3 })
            yield* poll("the third job requeued at 3 slots", Effect.map(detail(third), (d) => (d.logs.some((l) => l.message === requeuedText("audit-k", 3)) ? true : undefined)))
            expect(holders.current("audit-k")).toBe(2)
            // reported once the session has been idle 1.5 s; every report before names no other session
            const report = yield* poll(
              "the leak reported",
              Effect.map(observe.runOnce, (r) => {
                for (const l of r.leaked) expect(l.pid).toBe(rawPid)
                expect(r.stuck).toEqual([])
                return r.leaked.length === 1 ? r : undefined
              })
            )
            expect(report.leaked).toEqual([
              expect.objectContaining({ _tag: "LeakedSlot", key: "audit-k", slot: leakedSlot, pid: rawPid, terminated: false })
            ])
            expect(Option.getOrThrow(yield* observe.lastReport)).toBe(report)
            // the run's findings are in the job store (warp_slot_audit), for the dashboard
            const store = yield* JobStore
            expect(yield* store.slotAuditFindings).toEqual([
              {
                kind: "LeakedSlot",
                key: "audit-k",
                slot: leakedSlot,
                jobId: undefined,
                detail: expect.stringContaining(`held by session ${rawPid}`),
                foundAt: report.at
              }
            ])
            // the observing audit changes nothing: the session still holds the lock
            expect((yield* holdersOf("audit-k", 3)).map((h) => h.pid)).toContain(rawPid)
            // terminate: the session is ended, the slot is free, the waiting job takes it
            // (a run can miss the leak while the waiting job is being claimed: a Processing row in the gate
            // counts as a holder until it is requeued — so this polls too)
            const ended = yield* poll(
              "the leak terminated",
              Effect.map(terminating.runOnce, (r) => (r.leaked.length > 0 ? r : undefined))
            )
            expect(ended.leaked).toEqual([expect.objectContaining({ pid: rawPid, slot: leakedSlot, terminated: true })])
            yield* poll("the raw session gone", Effect.map(holdersOf("audit-k", 3), (h) => (h.some((x) => x.pid === rawPid) ? undefined : true)))
            yield* poll("3 holders", Effect.sync(() => (holders.current("audit-k") === 3 ? true : undefined)))
            const after = yield* observe.runOnce
            expect(after.leaked).toEqual([])
            expect(after.stuck).toEqual([])
            // a run that finds nothing replaces the stored findings with none
            expect(yield* store.slotAuditFindings).toEqual([])
            yield* Deferred.succeed(release, undefined)
            yield* drained(30_000)
          })
        )
        const last = yield* observe.runOnce
        expect(last.leaked).toEqual([])
        expect(last.heldSlots).toBe(0)
      }).pipe(Effect.provide(env))
    }).pipe(Effect.ensuring(Effect.promise(() => raw.end().catch(() => undefined))))
  }, 60_000)

  it.live("no finding while many short jobs of a key churn through its slots", () => {
    const Churn = Contract.job("AuditChurn", Schema.Struct({ i: Schema.Number }))
    const handler = Handler.job(Churn, () => Effect.yieldNow, { policy: [Semaphore("churn", 3)] })
    const env = Publisher.layer.pipe(
      Layer.provideMerge(Registry.layer({ handlers: [handler] })),
      Layer.provideMerge(Concurrency.layer),
      Layer.provideMerge(SemaphoreProviderPg.layer()),
      Layer.provideMerge(JobStorePg.layer),
      Layer.provideMerge(pgLayer(url, 20))
    )
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const audit = yield* SlotAuditInternal.make({ idleFor: "1500 millis", terminateStale: true })
      yield* Effect.forEach(Array.from({ length: 300 }, (_, i) => i), (i) => p.enqueue(Churn, { i }), { concurrency: 8 })
      const reports = yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Worker.make({ addons: [Concurrency.addon], concurrency: 6, pollInterval: "5 millis", gracePeriod: "1 second" })
          const seen: Array<SlotAuditInternal.SlotAuditReport> = []
          const store = yield* JobStore
          while (true) {
            seen.push(yield* audit.runOnce)
            const c = yield* store.countByState
            if (c.Enqueued + c.Scheduled + c.Processing === 0) return seen
            if (seen.length > 2000) return yield* Effect.die(new Error("not drained"))
            yield* Effect.sleep("20 millis")
          }
        })
      )
      expect(reports.length).toBeGreaterThan(3)
      expect(reports.flatMap((r) => [...r.leaked, ...r.stuck])).toEqual([])
      // the audit did see the key's slots held while the jobs ran
      expect(reports.some((r) => r.heldSlots > 0)).toBe(true)
    }).pipe(Effect.provide(env))
  }, 60_000)

  it.live("the Layer runs on its schedule and keeps the last report; a leak of a key named in `keys` is seen with no job of it", () => {
    const raw = new pg.Client({ connectionString: url })
    return Effect.gen(function* () {
      raw.on("error", () => {})
      yield* Effect.promise(() => raw.connect())
      const rawPid = Number((yield* Effect.promise(() => raw.query("SELECT pg_backend_pid() AS pid"))).rows[0].pid)
      yield* Effect.promise(() => raw.query("SELECT pg_advisory_lock($1::bigint)", [slotId("quiet-key", 0)]))
      const env = SlotAudit.layer({ every: "100 millis", idleFor: "300 millis", keys: ["quiet-key"] }).pipe(
        Layer.provideMerge(Registry.layer({ handlers: [] })),
        Layer.provideMerge(JobStorePg.layer),
        Layer.provideMerge(pgLayer(url, 4))
      )
      yield* Effect.gen(function* () {
        const audit = yield* SlotAudit.SlotAudit
        const report = yield* poll(
          "a scheduled report with the leak",
          Effect.map(audit.lastReport, (r) => (Option.isSome(r) && r.value.leaked.length > 0 ? r.value : undefined))
        )
        expect(report.leaked).toEqual([expect.objectContaining({ key: "quiet-key", slot: 0, pid: rawPid, terminated: false })])
      }).pipe(Effect.provide(env))
    }).pipe(Effect.ensuring(Effect.promise(() => raw.end().catch(() => undefined))))
  }, 30_000)
})

describe("slot audit: worker processes that die or stop while holding", () => {
  let url = ""
  let children: Array<ChildWorker> = []
  beforeAll(async () => {
    url = await createDatabase()
  })
  afterAll(async () => {
    for (const c of children) c.signal("SIGKILL")
    await Promise.all(children.map((c) => c.exited))
    await dropDatabase(url)
  })

  const env = () =>
    Publisher.layer.pipe(
      Layer.provideMerge(Registry.layer({ handlers: [recordingHandler({ proc: "parent", pid: process.pid })] })),
      // migrates the concurrency addon's table before the workers start
      Layer.provideMerge(Concurrency.layer.pipe(Layer.provide(SemaphoreProviderMemory.layer))),
      Layer.provideMerge(JobStorePg.layer),
      Layer.provideMerge(pgLayer(url, 8))
    )

  /** Starts a child, enqueues a long job of `key`, waits until the child's session holds its slot. */
  const holding = (name: string, key: string) =>
    Effect.gen(function* () {
      const child = spawnWorker({ url, name, fibers: 2, leaseMs: 1000 })
      children.push(child)
      yield* Effect.promise(() => child.ready)
      const p = yield* Publisher.Publisher
      const id = yield* p.enqueue(ChildWork, { ms: 120_000, fail: false }, JobParameters.make().withMutex(key, "Wait"))
      const sql = yield* SqlClient.SqlClient
      const pid = yield* poll(
        `${name}'s session holding '${key}'`,
        Effect.map(
          sql<{ pid: number }>`
            SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid)
            WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND a.application_name = ${name}
              AND ((l.classid::bigint << 32) | l.objid::bigint)::text = ${slotId(key, 0)}`.pipe(Effect.orDie),
          (rows) => (rows.length === 1 ? Number(rows[0]!.pid) : undefined)
        )
      )
      return { child, id, pid }
    })

  it.live("SIGKILL: PostgreSQL frees the dead session's lock; the audit reports neither a leak nor a stuck holder", () =>
    Effect.gen(function* () {
      yield* createTables
      const audit = yield* SlotAuditInternal.make({ idleFor: "500 millis" })
      const { child, id } = yield* holding("audit-kill", "kill-k")
      expect((yield* audit.runOnce).leaked).toEqual([])
      child.signal("SIGKILL")
      yield* Effect.promise(() => child.exited)
      yield* poll("the lock freed", Effect.map(holdersOf("kill-k", 1), (h) => (h.length === 0 ? true : undefined)))
      // the row is still Processing until its lease runs out (1 s) and nobody claims it (no worker left)
      const sql = yield* SqlClient.SqlClient
      yield* poll(
        "the lease expired",
        Effect.map(sql`SELECT lease_until < now() AS expired FROM warp_jobs WHERE id = ${id} AND state = 'Processing'`.pipe(Effect.orDie), (rows) =>
          (rows[0] as any)?.expired === true ? true : undefined
        )
      )
      const report = yield* audit.runOnce
      expect(report.leaked).toEqual([])
      expect(report.stuck).toEqual([])
    }).pipe(Effect.provide(env())), 60_000)

  it.live("SIGSTOP: the lease expires while the stopped process's session holds the lock — a stuck holder, not a leak", () =>
    Effect.gen(function* () {
      const audit = yield* SlotAuditInternal.make({ idleFor: "500 millis" })
      const { child, id, pid } = yield* holding("audit-stop", "stop-k")
      const before = yield* audit.runOnce
      expect(before.leaked.filter((l) => l.key === "stop-k")).toEqual([])
      expect(before.stuck.filter((s) => s.key === "stop-k")).toEqual([])
      child.signal("SIGSTOP")
      // within the provider's deadline (10 s: the server then ends the idle session itself)
      const report = yield* poll(
        "the stuck holder reported",
        Effect.map(audit.runOnce, (r) => (r.stuck.some((s) => s.key === "stop-k") ? r : undefined)),
        9_000
      )
      expect(report.stuck.filter((s) => s.key === "stop-k")).toEqual([
        expect.objectContaining({ _tag: "StuckHolder", key: "stop-k", jobId: id, pids: [pid] })
      ])
      expect(report.leaked.filter((l) => l.key === "stop-k")).toEqual([])
      // stored for the dashboard: the stuck job, found at the run's time
      const stored = yield* Effect.flatMap(JobStore, (s) => s.slotAuditFindings)
      expect(stored.filter((f) => f.key === "stop-k")).toEqual([
        { kind: "StuckHolder", key: "stop-k", slot: undefined, jobId: id, detail: expect.stringContaining("lease expired"), foundAt: report.at }
      ])
      child.signal("SIGKILL")
      yield* Effect.promise(() => child.exited)
    }).pipe(Effect.provide(env())), 60_000)
})
