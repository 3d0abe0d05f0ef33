/**
 * The built-in PostgreSQL path releases a held slot inside the attempt's finalizing statement, on the
 * slot's own connection; anything else keeps the release to the attempt's scope.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { ConcurrencyLimitManager, JobStorePg, SemaphoreProviderPg as PublicProviderPg } from "warp-effect"
import type { Job } from "../../src/internal/job/Job.js"
import { Outcome } from "../../src/internal/job/Outcome.js"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { SemaphoreProvider, slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { LOCK_PREFIX } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import { fusedRelease, guardOf, LOCK_PREFIX as CARRIED_PREFIX, sha256Id, sha256Int } from "../../src/internal/semaphore/SemaphoreProviderPg.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import type { Wakeup } from "../../src/internal/store/Wakeup.js"
import { sharedDatabase } from "./pg.js"

const db = sharedDatabase()
let tags = 0
const freshTag = () => `warp_fused_${process.pid}_${tags++}`
const key = (label: string) => `fused:${Math.random().toString(36).slice(2)}:${label}`
const lease = Duration.seconds(30)

/** A store and a provider on one pool (the built-in setup), or the provider on a pool of its own. */
const build = (shared: boolean) =>
  Effect.gen(function* () {
    const pool = db.pool(10, freshTag())
    // one build: the store and the provider share the pool's SqlClient, as in an app's Layer
    const layer = shared
      ? Layer.merge(JobStorePg.layer, PublicProviderPg.layer({})).pipe(Layer.provide(pool))
      : Layer.merge(JobStorePg.layer.pipe(Layer.provide(pool)), PublicProviderPg.layer({}).pipe(Layer.provide(db.pool(10, freshTag()))))
    const context = yield* Layer.build(layer)
    const store = Context.get(context, JobStore)
    const provider = Context.get(context, SemaphoreProvider)
    return { store, provider }
  })

const sqlOf = <A extends Record<string, unknown>>(text: string, params: ReadonlyArray<unknown> = []) =>
  Effect.flatMap(db.client, (c) => Effect.promise(() => c.query<A>(text, params as Array<unknown>))).pipe(
    Effect.map((r) => r.rows),
    Effect.scoped
  )

/** Whether any session holds the slot lock `name:0`. */
const held = (name: string) =>
  Effect.map(
    sqlOf<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
      [lockId(slotName(name, 0))]
    ),
    (rows) => rows[0]!.n > 0
  )

const claimOne = (store: JobStore["Service"]) =>
  Effect.gen(function* () {
    const id = `fused-${Math.random().toString(36).slice(2)}`
    yield* store.insert([{ id, type: "T", handler: null, payload: {}, state: "Enqueued", scheduleTime: new Date(Date.now() - 1000), metadata: {} }])
    const claimed = (yield* store.fetch("w1", 10, lease)).find((j) => j.id === id)
    expect(claimed).toBeDefined()
    return claimed!
  })

/** Enqueued rows due long ago (ahead of every other test's rows), by id. */
const oldRows = (store: JobStore["Service"], label: string, n: number) =>
  Effect.gen(function* () {
    const ids = Array.from({ length: n }, (_, i) => `carried-${label}-${Math.random().toString(36).slice(2)}-${i}`)
    yield* store.insert(ids.map((id, i) => ({ id, type: "T", handler: null, payload: {}, state: "Enqueued", scheduleTime: new Date(1_000 + i), metadata: {} }) as const))
    return ids
  })

/** A claimed job, and a slot of a fresh name held in a scope of its own (closed by the test). */
const claimAndHold = (shared: boolean, label: string) =>
  Effect.gen(function* () {
    const { provider, store } = yield* build(shared)
    const name = key(label)
    const job = yield* claimOne(store)
    const scope = yield* Scope.make()
    const slot = Option.getOrThrow(yield* Scope.provide(provider.tryAcquire(name, 1, 0), scope))
    return { job, name, provider, scope, slot, store }
  })

describe("PostgreSQL: the slot's release inside the finalizing statement", () => {
  it.live("one statement writes the result and frees the slot; the scope then only gives the connection back", () =>
    Effect.gen(function* () {
      const { job, name, provider, scope, slot, store } = yield* claimAndHold(true, "one")
      const release = fusedRelease(slot)
      expect(release).toBeDefined()
      expect(yield* held(name)).toBe(true)
      expect(yield* store.finalize({ job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: {}, release })).toBe(true)
      // freed by the finalize itself, before the scope closes
      expect(yield* held(name)).toBe(false)
      expect(fusedRelease(slot)).toBeUndefined()
      expect(Option.getOrThrow(yield* store.get(job.id)).job.state).toBe("Succeeded")
      // another holder can take it while the first scope is still open
      const again = yield* Effect.scoped(Effect.map(provider.tryAcquire(name, 1, 0), Option.isSome))
      expect(again).toBe(true)
      yield* Scope.close(scope, Exit.void)
      expect(yield* held(name)).toBe(false)
    }).pipe(Effect.scoped))

  it.live("a provider on another client is not fused: the slot stays held until the scope closes", () =>
    Effect.gen(function* () {
      const { job, name, scope, slot, store } = yield* claimAndHold(false, "other")
      expect(yield* store.finalize({ job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: {}, release: fusedRelease(slot) })).toBe(true)
      expect(yield* held(name)).toBe(true)
      yield* Scope.close(scope, Exit.void)
      expect(yield* held(name)).toBe(false)
    }).pipe(Effect.scoped))

  it.live("the slot's connection is gone: the result is still written (through the pool), the slot is lost", () =>
    Effect.gen(function* () {
      const { job, name, scope, slot, store } = yield* claimAndHold(true, "lost")
      const release = fusedRelease(slot)!
      yield* sqlOf(
        `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
           AND ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
        [lockId(slotName(name, 0))]
      )
      yield* slot.lost
      expect(fusedRelease(slot)).toBeUndefined()
      // a release taken before the loss is refused by the provider, and the store falls back; the lane's
      // next claim, carried by the refused statement only, is not run (the lane claims on its own)
      const next = yield* oldRows(store, "lost", 1)
      let called = false
      const claim = { limit: 2, lease, hint: { contended: [] }, claimed: () => void (called = true) }
      expect(yield* store.finalize({ job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: {}, release, claim })).toBe(true)
      expect(Option.getOrThrow(yield* store.get(job.id)).job.state).toBe("Succeeded")
      expect(called).toBe(false)
      expect(Option.getOrThrow(yield* store.get(next[0]!)).job.state).toBe("Enqueued")
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.scoped))

  it.live("a multiplexed provider offers no fused release", () =>
    Effect.gen(function* () {
      const provider = yield* Effect.map(
        Layer.build(PublicProviderPg.layer({ multiplex: { connections: 1 } }).pipe(Layer.provide(db.pool(4, freshTag())))),
        Context.get(SemaphoreProvider)
      )
      const slot = Option.getOrThrow(yield* provider.tryAcquire(key("mux"), 1, 0))
      expect(fusedRelease(slot)).toBeUndefined()
    }).pipe(Effect.scoped))

  it.live("a claim carries the admin override of the row's key as it read it", () =>
    Effect.gen(function* () {
      const k = key("admin")
      const pool = db.pool(4, freshTag())
      const manager = yield* Effect.map(Layer.build(ConcurrencyLimitManager.layerPg.pipe(Layer.provide(pool))), Context.get(ConcurrencyLimitManager.ConcurrencyLimitManager))
      expect(manager.readAtClaim).toBe(true)
      yield* manager.addOrUpdateLimit(k, 7)
      const meta = (key: string) => ({ policies: { concurrency: { value: { key, limit: 2, mode: "Wait" }, source: "Enqueue" } } })
      const ids = [`a-${k}`, `b-${k}`, `c-${k}`]
      // built after the table exists (a store built before it looks again at most every 10 s)
      const { store: fresh } = yield* build(true)
      const row = (id: string, metadata: unknown) =>
        ({ id, type: "T", handler: null, payload: {}, state: "Enqueued", scheduleTime: new Date(Date.now() - 1000), metadata }) as const
      yield* fresh.insert([row(ids[0]!, meta(k)), row(ids[1]!, meta(`${k}:none`)), row(ids[2]!, {})])
      // one keyed Wait row per claim (see `admissionCtes`): claimed until none is left
      const got = new Map<string, Job>()
      for (let n = 0; n < 3; n++) for (const j of yield* fresh.fetch("w1", 50, lease)) got.set(j.id, j)
      expect(got.get(ids[0]!)?.adminLimit).toEqual({ key: k, slots: 7 })
      expect(got.get(ids[1]!)?.adminLimit).toEqual({ key: `${k}:none`, slots: null })
      // a row that carries no key: the gate asks the manager
      expect(got.get(ids[2]!)?.adminLimit).toBeUndefined()
    }).pipe(Effect.scoped))

  it.live("the statement that frees the slot also claims the lane's next rows when the worker asks", () =>
    Effect.gen(function* () {
      const { job, name, scope, slot, store } = yield* claimAndHold(true, "carry")
      const next = yield* oldRows(store, "carry", 2)
      let got: ReadonlyArray<{ id: string; attempt: number; state: string }> | undefined
      const claim = { limit: 2, lease, hint: { contended: [] }, claimed: (jobs: ReadonlyArray<any>) => void (got = jobs) }
      expect(yield* store.finalize({ job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: {}, release: fusedRelease(slot), claim })).toBe(true)
      expect(got?.map((j) => j.id)).toEqual(next)
      for (const id of next) {
        const d = Option.getOrThrow(yield* store.get(id))
        expect([d.job.state, d.job.attempt, d.job.lockedBy]).toEqual(["Processing", 1, "w1"])
        expect(d.logs.map((l) => l.message)).toContain("Attempt 1 claimed by w1")
      }
      expect(yield* held(name)).toBe(false)
      expect(Option.getOrThrow(yield* store.get(job.id)).job.state).toBe("Succeeded")
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.scoped))

  it.live("the carried claim never takes the row its statement writes, even when that row's lease has run out", () =>
    Effect.gen(function* () {
      const { job, scope, slot, store } = yield* claimAndHold(true, "expired")
      yield* sqlOf(`UPDATE warp_jobs SET lease_until = now() - interval '1 minute' WHERE id = $1`, [job.id])
      const next = yield* oldRows(store, "expired", 1)
      let got: ReadonlyArray<{ id: string }> = []
      const claim = { limit: 50, lease, hint: { contended: [] }, claimed: (jobs: ReadonlyArray<any>) => void (got = jobs) }
      expect(yield* store.finalize({ job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: {}, release: fusedRelease(slot), claim })).toBe(true)
      expect(got.map((j) => j.id)).toContain(next[0])
      expect(got.map((j) => j.id)).not.toContain(job.id)
      const d = Option.getOrThrow(yield* store.get(job.id))
      expect([d.job.state, d.job.attempt]).toEqual(["Succeeded", 1])
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.scoped))

  it.live("a write that is not fused carries no claim: the lane claims on its own", () =>
    Effect.gen(function* () {
      const { job, scope, slot, store } = yield* claimAndHold(false, "unfused")
      const next = yield* oldRows(store, "unfused", 1)
      let called = false
      const claim = { limit: 2, lease, hint: { contended: [] }, claimed: () => void (called = true) }
      expect(yield* store.finalize({ job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: {}, release: fusedRelease(slot), claim })).toBe(true)
      expect(called).toBe(false)
      expect(Option.getOrThrow(yield* store.get(next[0]!)).job.state).toBe("Enqueued")
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.scoped))

  /** Granted advisory locks on the slots 0..limit-1 of `name`, and the backends holding them. */
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
  const keyed = (k: string, limit: number) => ({ policies: { concurrency: { value: { key: k, limit, mode: "Wait" }, source: "Enqueue" } } })
  const keyedRow = (store: JobStore["Service"], k: string, limit: number) =>
    Effect.gen(function* () {
      const id = `admit-${Math.random().toString(36).slice(2)}`
      yield* store.insert([{ id, type: "T", handler: null, payload: {}, state: "Enqueued", scheduleTime: new Date(500), metadata: keyed(k, limit) }])
      return id
    })

  it("the carried admission names slots as the concurrency gate does", () => {
    expect(CARRIED_PREFIX).toBe(LOCK_PREFIX)
  })

  it.live("the carried admission's SQL computes the lock ids and guard keys the provider computes in JavaScript", () =>
    Effect.gen(function* () {
      const names = [LOCK_PREFIX + "plain", LOCK_PREFIX + "ключ:é 🚀", LOCK_PREFIX + "x".repeat(300), LOCK_PREFIX]
      for (const name of names) {
        for (const index of [0, 1, 7, 4095]) {
          const [row] = yield* sqlOf<{ id: string; g1: number; g2: number }>(
            `SELECT (${sha256Id("$1::text || ':' || $2::int")})::text AS id,
                    ${sha256Int("'warp:semaphore-guard:' || $1::text", 1)} AS g1, ${sha256Int("'warp:semaphore-guard:' || $1::text", 5)} AS g2`,
            [name, index]
          )
          expect(row!.id).toBe(lockId(slotName(name, index)))
          expect([row!.g1, row!.g2]).toEqual([...guardOf(name)])
        }
      }
    }))

  it.live("the statement that frees a slot and claims a keyed row takes that row's slot on the same connection; the next tryAcquire of the name gets it without a scan", () =>
    Effect.gen(function* () {
      const { job, name, provider, scope, slot, store } = yield* claimAndHold(true, "admit")
      const [holderPid] = yield* slotHolders(name, 1)
      const k = key("admitted")
      const b = yield* keyedRow(store, k, 2)
      let got: ReadonlyArray<{ id: string }> = []
      const claim = { limit: 1, lease, hint: { contended: [] }, claimed: (jobs: ReadonlyArray<any>) => void (got = jobs) }
      expect(yield* store.finalize({ job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: {}, release: fusedRelease(slot), claim })).toBe(true)
      expect(got.map((j) => j.id)).toEqual([b])
      expect(yield* held(name)).toBe(false)
      // one of the key's two slots, held by the connection that held the released one
      expect(yield* slotHolders(LOCK_PREFIX + k, 2)).toEqual([holderPid])
      yield* Scope.close(scope, Exit.void)
      // the slot outlives the released slot's scope (it is the claimed job's now), and the attempt's
      // tryAcquire gets it: no second slot is taken
      expect(yield* slotHolders(LOCK_PREFIX + k, 2)).toEqual([holderPid])
      const attempt = yield* Scope.make()
      const adopted = Option.getOrThrow(yield* Scope.provide(provider.tryAcquire(LOCK_PREFIX + k, 2, 0), attempt))
      expect(adopted.name).toBe(LOCK_PREFIX + k)
      expect(yield* slotHolders(LOCK_PREFIX + k, 2)).toEqual([holderPid])
      expect(fusedRelease(adopted)).toBeDefined()
      // a second asker scans: the other slot
      const other = yield* Effect.scoped(Effect.map(provider.tryAcquire(LOCK_PREFIX + k, 2, 0), (o) => Option.getOrThrow(o).index))
      expect(other).toBe(1 - adopted.index)
      yield* Scope.close(attempt, Exit.void)
      expect(yield* slotHolders(LOCK_PREFIX + k, 2)).toEqual([])
    }).pipe(Effect.scoped))

  it.live("a chain of one key: the statement that frees the slot takes it again for the key's next row and leaves its fresh marker unwritten", () =>
    Effect.gen(function* () {
      const { provider, store } = yield* build(true)
      const k = key("chain")
      const name = LOCK_PREFIX + k
      const job = yield* claimOne(store)
      const scope = yield* Scope.make()
      const slot = Option.getOrThrow(yield* Scope.provide(provider.tryAcquire(name, 1, 0), scope))
      const [holderPid] = yield* slotHolders(name, 1)
      const marker = () =>
        sqlOf<{ holder: string; version: string }>(`SELECT holder, xmin::text AS version FROM warp_semaphore_marker WHERE lock_id = $1::bigint`, [lockId(slotName(name, 0))])
      const [before] = yield* marker()
      expect(before).toBeDefined()
      const b = yield* keyedRow(store, k, 1)
      let got: ReadonlyArray<{ id: string }> = []
      const claim = { limit: 1, lease, hint: { contended: [] }, claimed: (jobs: ReadonlyArray<any>) => void (got = jobs) }
      expect(yield* store.finalize({ job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: {}, release: fusedRelease(slot), claim })).toBe(true)
      expect(got.map((j) => j.id)).toEqual([b])
      // the same slot, on the same connection, its marker the same row version (not rewritten)
      expect(yield* slotHolders(name, 1)).toEqual([holderPid])
      expect(yield* marker()).toEqual([before])
      yield* Scope.close(scope, Exit.void)
      const attempt = yield* Scope.make()
      expect(Option.getOrThrow(yield* Scope.provide(provider.tryAcquire(name, 1, 0), attempt)).index).toBe(0)
      expect(yield* slotHolders(name, 1)).toEqual([holderPid])
      yield* Scope.close(attempt, Exit.void)
      expect(yield* slotHolders(name, 1)).toEqual([])
      expect(yield* marker()).toEqual([])
    }).pipe(Effect.scoped))

  it.live("a slot taken for a claimed row that no attempt asks for is released; a full key is not taken", () =>
    Effect.gen(function* () {
      const { job, provider, scope, slot, store } = yield* claimAndHold(true, "unasked")
      const k = key("unasked")
      yield* keyedRow(store, k, 1)
      const claim = { limit: 1, lease, hint: { contended: [] }, claimed: () => {} }
      expect(yield* store.finalize({ job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: {}, release: fusedRelease(slot), claim })).toBe(true)
      yield* Scope.close(scope, Exit.void)
      expect((yield* slotHolders(LOCK_PREFIX + k, 1)).length).toBe(1)
      // released within ADOPT_WITHIN_MS (half a second) and a watchdog tick
      const start = Date.now()
      while ((yield* slotHolders(LOCK_PREFIX + k, 1)).length > 0) {
        expect(Date.now() - start).toBeLessThan(10_000)
        yield* Effect.sleep("50 millis")
      }
      // the key full (its one slot held elsewhere): the statement claims the row and takes nothing
      const full = key("full")
      const elsewhere = Option.getOrThrow(yield* provider.tryAcquire(LOCK_PREFIX + full, 1, 0))
      const second = yield* claimAndHold(true, "full")
      yield* keyedRow(second.store, full, 1)
      let got = 0
      const claimFull = { limit: 1, lease, hint: { contended: [] }, claimed: (jobs: ReadonlyArray<unknown>) => void (got = jobs.length) }
      expect(yield* second.store.finalize({ job: second.job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: {}, release: fusedRelease(second.slot), claim: claimFull })).toBe(true)
      expect(got).toBe(1)
      expect((yield* slotHolders(LOCK_PREFIX + full, 1)).length).toBe(1)
      expect(elsewhere.index).toBe(0)
      yield* Scope.close(second.scope, Exit.void)
    }).pipe(Effect.scoped))
  it.live("a write whose carried claim came back full sends no Freed; one whose claim came back short does", () =>
    Effect.gen(function* () {
      // two keys with due jobs waiting, each freed by a fused write that carries a claim
      const full = yield* claimAndHold(true, "freed-full")
      const short = yield* claimAndHold(true, "freed-short")
      const hints = yield* Queue.unbounded<Wakeup>()
      yield* Effect.forkScoped(Stream.runForEach(yield* full.store.wakeups!, (h) => Queue.offer(hints, h)))
      yield* Effect.repeat(Queue.take(hints), { until: (h) => h._tag === "Connected" })
      const [k1, k2] = [key("waiting-full"), key("waiting-short")]
      // each key's waiting job is due after every plain row below: a claim takes the plain rows first
      for (const k of [k1, k2]) {
        const id = `waiting-${Math.random().toString(36).slice(2)}`
        yield* full.store.insert([{ id, type: "T", handler: null, payload: {}, state: "Enqueued", scheduleTime: new Date(Date.now() - 500), metadata: keyed(k, 1) }])
      }
      yield* oldRows(full.store, "freed", 1)
      // asks for 1 row and gets it (the plain row): no Freed for k1
      let got: ReadonlyArray<Job> = []
      const claimOf = (limit: number) => ({ limit, lease, hint: { contended: [] }, claimed: (jobs: ReadonlyArray<Job>) => void (got = jobs) })
      expect(yield* full.store.finalize({ job: full.job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: keyed(k1, 1), release: fusedRelease(full.slot), claim: claimOf(1) })).toBe(true)
      expect(got).toHaveLength(1)
      // asks for 1,000 and gets fewer: Freed for k2
      expect(yield* short.store.finalize({ job: short.job, workerId: "w1", outcome: Outcome.Succeeded(), metadata: keyed(k2, 1), release: fusedRelease(short.slot), claim: claimOf(1000) })).toBe(true)
      expect(got.length).toBeLessThan(1000)
      // notifications arrive in commit order: everything the first write sent came before the second's
      const freed: Array<string | undefined> = []
      while (freed.at(-1) !== k2) {
        const h = yield* Queue.take(hints)
        if (h._tag === "Freed") freed.push(h.key)
      }
      expect(freed).toEqual([k2])
      yield* Scope.close(full.scope, Exit.void)
      yield* Scope.close(short.scope, Exit.void)
    }).pipe(Effect.scoped))
})
