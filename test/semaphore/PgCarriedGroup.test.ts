/**
 * Fused admission under a total cap (issue 40): the finalizing statement that frees a lane's slots and
 * claims its next row takes that row's key slot AND its group slot on the same connection (both or
 * neither), hands the group slot only to the holder of that key slot, and the next finalizing statement
 * frees both. A worker run under a cap, with the slot connections' backends killed while it runs, never
 * has more handlers of the group inside than the cap.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { Concurrency, Contract, Handler, JobParameters, JobStorePg, Publisher, SemaphoreProviderPg as PublicProviderPg, Worker } from "warp-effect"
import { LOCK_PREFIX, TOTAL_PREFIX } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import { Outcome } from "../../src/internal/job/Outcome.js"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { CarriedWith, SemaphoreProvider, slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { fusedRelease, fusesWith, TOTAL_PREFIX as CARRIED_TOTAL_PREFIX } from "../../src/internal/semaphore/SemaphoreProviderPg.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { CAPPED_CHAIN } from "../../src/internal/worker/Lane.js"
import * as SqlClient from "effect/sql/SqlClient"
import { HolderCounter } from "../support/holders.js"
import { pgWorkerEnv } from "../support/env.js"
import { detail, drained } from "../support/runtime.js"
import { sharedDatabase } from "./pg.js"

const db = sharedDatabase()
let tags = 0
const freshTag = () => `warp_carried_group_${process.pid}_${tags++}`
const fresh = (label: string) => `cg:${Math.random().toString(36).slice(2)}:${label}`
const lease = Duration.seconds(30)

/** A store and a provider on one pool (the built-in setup: the finalizing statement runs on the slot's connection). */
const build = Effect.gen(function* () {
  // the concurrency addon's tables first: the store's claims then read the keys' and groups' overrides
  yield* Layer.build(Concurrency.layer.pipe(Layer.provide(db.pool(2, freshTag()))))
  const layer = Layer.merge(JobStorePg.layer, PublicProviderPg.layer({})).pipe(Layer.provide(db.pool(10, freshTag())))
  const context = yield* Layer.build(layer)
  return { store: Context.get(context, JobStore), provider: Context.get(context, SemaphoreProvider) }
})

const sqlOf = <A extends Record<string, unknown>>(text: string, params: ReadonlyArray<unknown> = []) =>
  Effect.flatMap(db.client, (c) => Effect.promise(() => c.query<A>(text, params as Array<unknown>))).pipe(
    Effect.map((r) => r.rows),
    Effect.scoped
  )

/** The backends holding slots 0..limit-1 of `name` (one entry per granted lock). */
const slotHolders = (name: string, limit: number) =>
  Effect.map(
    sqlOf<{ pid: number }>(
      `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND ((classid::bigint << 32) | objid::bigint) = ANY($1::bigint[])`,
      [Array.from({ length: limit }, (_, i) => lockId(slotName(name, i)))]
    ),
    (rows) => rows.map((r) => r.pid)
  )

const capped = (k: string, limit: number, group: string, total: number) => ({
  policies: { concurrency: { value: { key: k, limit, mode: "Wait", total: { group, limit: total } }, source: "Enqueue" } }
})

/** A row due long ago (ahead of every other test's rows) under key `k` (limit 2) and a total cap `group` of `total`. */
const cappedRow = (store: JobStore["Service"], k: string, group: string, total: number) =>
  Effect.gen(function* () {
    const id = `cg-${Math.random().toString(36).slice(2)}`
    yield* store.insert([{ id, type: "T", handler: null, payload: {}, state: "Enqueued", scheduleTime: new Date(400), metadata: capped(k, 2, group, total) }])
    return id
  })

/** A claimed plain job, and a slot of a fresh name held for it in a scope of its own. */
const claimAndHold = (store: JobStore["Service"], provider: SemaphoreProvider["Service"]) =>
  Effect.gen(function* () {
    const id = `cg-plain-${Math.random().toString(36).slice(2)}`
    yield* store.insert([{ id, type: "T", handler: null, payload: {}, state: "Enqueued", scheduleTime: new Date(300), metadata: {} }])
    const job = (yield* store.fetch("w1", 10, lease)).find((j) => j.id === id)!
    expect(job).toBeDefined()
    const scope = yield* Scope.make()
    const slot = Option.getOrThrow(yield* Scope.provide(provider.tryAcquire(fresh("held"), 1, 0), scope))
    return { job, scope, slot }
  })

describe("PostgreSQL: a capped row's key and group slots taken in the finalizing statement", () => {
  it("the carried admission names group slots as the concurrency gate does", () => {
    expect(CARRIED_TOTAL_PREFIX).toBe(TOTAL_PREFIX)
  })

  it.live("both slots on the releasing connection; the group slot goes to the holder of the key slot only; the next statement frees both", () =>
    Effect.gen(function* () {
      const { provider, store } = yield* build
      const { job, scope, slot } = yield* claimAndHold(store, provider)
      const [pid] = yield* slotHolders(slot.name, 1)
      const k = fresh("key")
      const g = fresh("group")
      const row = yield* cappedRow(store, k, g, 2)
      let got: ReadonlyArray<any> = []
      const claim = { limit: 1, lease, hint: { contended: [] }, claimed: (jobs: ReadonlyArray<any>) => void (got = jobs) }
      expect(yield* store.finalize({ job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: {}, release: fusedRelease(slot), claim })).toBe(true)
      expect(got.map((j) => j.id)).toEqual([row])
      // the claim read the group's override (none) for the attempt: no read of its own
      expect(got[0].adminGroupLimit).toEqual({ group: g, slots: null })
      expect(yield* slotHolders(LOCK_PREFIX + k, 2)).toEqual([pid])
      expect(yield* slotHolders(TOTAL_PREFIX + g, 2)).toEqual([pid])
      yield* Scope.close(scope, Exit.void)

      const attempt = yield* Scope.make()
      // another attempt asking for the group (not holding the carried key slot) scans: the other slot
      const stranger = yield* Scope.make()
      const other = Option.getOrThrow(yield* Scope.provide(provider.tryAcquire(TOTAL_PREFIX + g, 2, 0), stranger))
      expect((yield* slotHolders(TOTAL_PREFIX + g, 2)).length).toBe(2)
      yield* Scope.close(stranger, Exit.void)
      expect(other.index).toBeGreaterThanOrEqual(0)
      // the row's attempt: the key slot without a scan, then the group slot bound to it
      const keySlot = Option.getOrThrow(yield* Scope.provide(provider.tryAcquire(LOCK_PREFIX + k, 2, 0), attempt))
      const groupSlot = Option.getOrThrow(
        yield* Scope.provide(provider.tryAcquire(TOTAL_PREFIX + g, 2, 0), attempt).pipe(Effect.provideService(CarriedWith, keySlot))
      )
      expect(yield* slotHolders(LOCK_PREFIX + k, 2)).toEqual([pid])
      expect(yield* slotHolders(TOTAL_PREFIX + g, 2)).toEqual([pid])
      expect(fusesWith(keySlot, groupSlot)).toBe(true)

      // its finalizing statement frees both, in one statement, and claims nothing (none due of the group)
      const next = yield* store.fetch("w1", 10, lease).pipe(Effect.map((jobs) => jobs.find((j) => j.id === row)))
      expect(next).toBeUndefined()
      const mine = got[0]
      expect(
        yield* store.finalize({ job: mine, workerId: "w1", outcome: Outcome.Succeeded(), metadata: mine.metadata, release: fusedRelease(keySlot, [groupSlot]) })
      ).toBe(true)
      expect(yield* slotHolders(LOCK_PREFIX + k, 2)).toEqual([])
      expect(yield* slotHolders(TOTAL_PREFIX + g, 2)).toEqual([])
      expect(fusedRelease(groupSlot)).toBeUndefined()
      const markers = yield* sqlOf<{ n: number }>(`SELECT count(*)::int AS n FROM warp_semaphore_marker WHERE lock_id = ANY($1::bigint[])`, [
        [0, 1].flatMap((i) => [lockId(slotName(LOCK_PREFIX + k, i)), lockId(slotName(TOTAL_PREFIX + g, i))])
      ])
      expect(markers[0]!.n).toBe(0)
      yield* Scope.close(attempt, Exit.void)
      expect(yield* slotHolders(TOTAL_PREFIX + g, 2)).toEqual([])
    }).pipe(Effect.scoped))

  it.live("the group full: the statement claims the row and takes neither slot (the key slot it took is given back)", () =>
    Effect.gen(function* () {
      const { provider, store } = yield* build
      const g = fresh("full")
      // the group's one slot held elsewhere
      const elsewhere = yield* Scope.make()
      Option.getOrThrow(yield* Scope.provide(provider.tryAcquire(TOTAL_PREFIX + g, 1, 0), elsewhere))
      const [elsewherePid] = yield* slotHolders(TOTAL_PREFIX + g, 1)
      const { job, scope, slot } = yield* claimAndHold(store, provider)
      const k = fresh("key")
      const row = yield* cappedRow(store, k, g, 1)
      let got: ReadonlyArray<any> = []
      const claim = { limit: 1, lease, hint: { contended: [] }, claimed: (jobs: ReadonlyArray<any>) => void (got = jobs) }
      expect(yield* store.finalize({ job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: {}, release: fusedRelease(slot), claim })).toBe(true)
      // the claim's admission counts holders from rows (none Processing here): it takes the row; the
      // slots say the group is full
      expect(got.map((j) => j.id)).toEqual([row])
      expect(yield* slotHolders(LOCK_PREFIX + k, 2)).toEqual([])
      expect(yield* slotHolders(TOTAL_PREFIX + g, 1)).toEqual([elsewherePid])
      yield* Scope.close(scope, Exit.void)
      yield* Scope.close(elsewhere, Exit.void)
    }).pipe(Effect.scoped))
})

const Capped = Contract.job("CarriedGroupKill", Schema.Struct({ tenant: Schema.String, i: Schema.Number }))
const cap = { group: "carried-kill", limit: 3 } as const

describe("a total cap with slots taken in the finalizing statement, on postgres", () => {
  it.live("backends of the slot connections killed while it runs: never more than the cap inside, every job succeeds", () => {
    const holders = new HolderCounter()
    const handler = Handler.job(Capped, ({ tenant }) => holders.hold("group", holders.hold(tenant, Effect.sleep("4 millis"))))
    return Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const p = yield* Publisher.Publisher
      const tenants = Array.from({ length: 12 }, (_, i) => `kt${i}`)
      const ids: Array<string> = []
      for (let i = 0; i < 10; i++) {
        for (const tenant of tenants) ids.push(yield* p.enqueue(Capped, { tenant, i }, JobParameters.make().withSemaphore(tenant, 2, "Wait", cap)))
      }
      const groupIds = Array.from({ length: cap.limit }, (_, i) => lockId(slotName(TOTAL_PREFIX + cap.group, i)))
      // every 40 ms, a backend holding a slot of the group is terminated: mid-handler, mid-statement, or
      // between the two
      let killed = 0
      const killer = yield* Effect.forkChild(
        Effect.forever(
          Effect.andThen(
            Effect.sleep("40 millis"),
            Effect.flatMap(
              sql.unsafe<{ pid: number }>(
                `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
                   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND ((classid::bigint << 32) | objid::bigint) = ANY($1::bigint[])`,
                [groupIds]
              ),
              (rows) =>
                rows.length === 0
                  ? Effect.void
                  : Effect.map(sql.unsafe(`SELECT pg_terminate_backend($1::int)`, [rows[killed % rows.length]!.pid]), () => void killed++)
            ).pipe(Effect.ignore)
          )
        )
      )
      yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 8, pollInterval: "20 millis" }), drained(90_000)))
      yield* Fiber.interrupt(killer)
      expect(killed).toBeGreaterThan(3)
      expect(holders.max.get("group")).toBeLessThanOrEqual(cap.limit)
      for (const t of tenants) expect(holders.max.get(t) ?? 0, t).toBeLessThanOrEqual(2)
      for (const id of ids) expect((yield* detail(id)).job.state).toBe("Succeeded")
    }).pipe(Effect.provide(pgWorkerEnv([handler])))
  }, 120_000)
})

const Chained = Contract.job("CarriedGroupChain", Schema.Struct({ tenant: Schema.String, i: Schema.Number }))

describe("a lane's chain of a capped group's jobs is broken every CAPPED_CHAIN jobs, on postgres", () => {
  it.live("a second worker started while the first holds the group's only slot with a backlog gets the group's jobs too", () => {
    let ran = 0
    const started = Deferred.makeUnsafe<void>()
    const handler = Handler.job(Chained, () =>
      Effect.andThen(Effect.sleep("2 millis"), Effect.sync(() => {
        if (++ran === 2) Deferred.doneUnsafe(started, Effect.void)
      }))
    )
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const ids: Array<string> = []
      // a cap of 1 over 10 keys: the first worker's lane chains the group's jobs on its one slot
      for (let i = 0; i < 6 * CAPPED_CHAIN; i++) {
        ids.push(yield* p.enqueue(Chained, { tenant: `c${i % 10}`, i }, JobParameters.make().withSemaphore(`c${i % 10}`, 2, "Wait", { group: "chained", limit: 1 })))
      }
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Worker.make({ addons: [Concurrency.addon], workerId: "first", concurrency: 1, pollInterval: "30 millis" })
          yield* Deferred.await(started)
          yield* Worker.make({ addons: [Concurrency.addon], workerId: "second", concurrency: 1, pollInterval: "30 millis" })
          yield* drained(60_000)
        })
      )
      const byWorker = new Map<string, number>()
      for (const id of ids) {
        const d = yield* detail(id)
        expect(d.job.state).toBe("Succeeded")
        const claim = [...d.logs].reverse().find((l) => l.kind === "Processing")!
        const w = claim.message.endsWith("claimed by first") ? "first" : claim.message.endsWith("claimed by second") ? "second" : "other"
        byWorker.set(w, (byWorker.get(w) ?? 0) + 1)
      }
      // without the break, the first worker's lane would keep the group's slot for the whole backlog
      expect(byWorker.get("second") ?? 0).toBeGreaterThan(0)
      expect(byWorker.get("other") ?? 0).toBe(0)
    }).pipe(Effect.provide(pgWorkerEnv([handler])))
  }, 120_000)
})
