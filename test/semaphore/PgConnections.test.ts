import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { SemaphoreProvider, type Slot, slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import * as SemaphoreProviderPg from "../../src/internal/semaphore/SemaphoreProviderPg.js"
import { until } from "../support/runtime.js"
import { sharedDatabase } from "./pg.js"

const db = sharedDatabase()

let tags = 0
const freshTag = () => `warp_sem_${process.pid}_${tags++}`
const key = (label: string) => `pgconn:${Math.random().toString(36).slice(2)}:${label}`

/** A provider on a pool of its own (another process, as PostgreSQL sees it), tagged in pg_stat_activity. */
const provider = (options: SemaphoreProviderPg.PgProviderOptions, maxConnections = 10, tag = freshTag()) =>
  Effect.map(Layer.build(SemaphoreProviderPg.layer(options).pipe(Layer.provide(db.pool(maxConnections, tag)))), Context.get(SemaphoreProvider))

/** Acquires in a scope of its own. */
const holdOpen = (p: SemaphoreProvider["Service"], name: string, limit: number, timeout: Duration.Input = 0) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const slot = yield* Scope.provide(p.tryAcquire(name, limit, timeout), scope)
    return { slot, close: Scope.close(scope, Exit.void) }
  })

const sqlOf = <A extends Record<string, unknown>>(text: string, params: ReadonlyArray<unknown> = []) =>
  Effect.flatMap(db.client, (c) => Effect.promise(() => c.query<A>(text, params as Array<unknown>))).pipe(
    Effect.map((r) => r.rows),
    Effect.scoped
  )

const THIS_DB = "database = (SELECT oid FROM pg_database WHERE datname = current_database())"

/** Backend pids holding the slot locks of `name` (0 .. limit-1), by slot index. */
const holders = (name: string, limit: number) =>
  sqlOf<{ slot: number; pid: number }>(
    `SELECT s.slot, l.pid FROM unnest($1::bigint[]) WITH ORDINALITY AS s(id, slot)
     JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.${THIS_DB}
      AND ((l.classid::bigint << 32) | l.objid::bigint) = s.id`,
    [`{${Array.from({ length: limit }, (_, i) => lockId(slotName(name, i))).join(",")}}`]
  ).pipe(Effect.map((rows) => rows.map((r) => ({ index: Number(r.slot) - 1, pid: Number(r.pid) }))))

const connectionsTagged = (tag: string) =>
  Effect.map(sqlOf<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1", [tag]), (r) => r[0]!.n)

const advisoryLocks = Effect.map(
  sqlOf<{ n: number; pids: number }>(`SELECT count(*)::int AS n, count(DISTINCT pid)::int AS pids FROM pg_locks WHERE locktype = 'advisory' AND ${THIS_DB}`),
  (r) => r[0]!
)

const terminate = (pid: number) => sqlOf("SELECT pg_terminate_backend($1)", [pid])

const isDone = (slot: Slot) => Effect.map(Effect.timeoutOption(slot.lost, "20 millis"), Option.isSome)

/** Terminates the backend holding `slot` (of `name` at limit 1) and waits for its `lost`; the backend's pid. */
const cutHolder = (name: string, slot: Slot) =>
  Effect.gen(function* () {
    const [owner] = yield* holders(name, 1)
    yield* terminate(owner!.pid)
    yield* Effect.timeout(slot.lost, "10 seconds")
    return owner!.pid
  })

describe("PostgreSQL provider: connections", () => {
  it.live("a holder's connection dies: the slot stays unusable (lock-delay) until the holder has released it, then another process gets it at once", () =>
    Effect.gen(function* () {
      const k = key("dead")
      const holder = yield* provider({ pingInterval: "50 millis" })
      const other = yield* provider({})
      const held = yield* holdOpen(holder, k, 1)
      const slot = Option.getOrThrow(held.slot)
      expect(Option.isNone(yield* Effect.scoped(other.tryAcquire(k, 1, 0)))).toBe(true)
      expect(yield* isDone(slot)).toBe(false)
      const owner = yield* cutHolder(k, slot)
      // the lock is free on the server, but its holder has not stopped: nobody gets the slot
      expect(yield* holders(k, 1)).toHaveLength(0)
      expect(Option.isNone(yield* Effect.scoped(other.tryAcquire(k, 1, 0)))).toBe(true)
      const waiting = yield* Effect.forkChild(holdOpen(other, k, 1, "5 seconds"))
      expect(Option.isNone(yield* Effect.scoped(other.tryAcquire(k, 1, 0)))).toBe(true)
      // the holder stops (its scope releases the slot): the waiting acquirer gets it, long before the
      // marker would expire (10 s)
      yield* held.close
      const taken = yield* Fiber.join(waiting)
      expect(Option.isSome(taken.slot)).toBe(true)
      const after = yield* holders(k, 1)
      expect(after).toHaveLength(1)
      expect(after[0]!.pid).not.toBe(owner)
      yield* taken.close
      expect(yield* holders(k, 1)).toHaveLength(0)
    }).pipe(Effect.scoped))

  it.live("a holder that never releases (its process is gone): the slot is usable again once its marker expires, not before", () =>
    Effect.gen(function* () {
      const k = key("gone")
      const holder = yield* provider({ pingInterval: "50 millis", deadline: "1500 millis" })
      const other = yield* provider({})
      const held = yield* holdOpen(holder, k, 1)
      yield* cutHolder(k, Option.getOrThrow(held.slot))
      // within the deadline: not granted (the holder could still be running)
      expect(Option.isNone(yield* Effect.scoped(other.tryAcquire(k, 1, 0)))).toBe(true)
      // the holder's scope never closes; its marker expires: the key does not stay frozen
      const taken = yield* holdOpen(other, k, 1, "10 seconds")
      expect(Option.isSome(taken.slot)).toBe(true)
      yield* taken.close
      // the old holder's late release touches nothing of the new holder's
      const again = yield* holdOpen(other, k, 1)
      expect(Option.isSome(again.slot)).toBe(true)
      yield* held.close
      expect(yield* holders(k, 1)).toHaveLength(1)
      yield* again.close
    }).pipe(Effect.scoped))

  it.live("the pings renew the marker: a slot held for twice the deadline, then lost, is still not granted before its holder releases", () =>
    Effect.gen(function* () {
      const k = key("renewed")
      const holder = yield* provider({ pingInterval: "50 millis", deadline: "1 second" })
      const other = yield* provider({})
      const held = yield* holdOpen(holder, k, 1)
      const slot = Option.getOrThrow(held.slot)
      // held past the marker's first expiry (acquisition + 1 s): only renewals keep it valid
      yield* Effect.sleep("2 seconds")
      expect(yield* isDone(slot)).toBe(false)
      yield* cutHolder(k, slot)
      expect(Option.isNone(yield* Effect.scoped(other.tryAcquire(k, 1, 0)))).toBe(true)
      yield* held.close
      const taken = yield* holdOpen(other, k, 1, "5 seconds")
      expect(Option.isSome(taken.slot)).toBe(true)
      yield* taken.close
    }).pipe(Effect.scoped))

  it.live("markers of slots never taken again are swept when a provider starts, an hour past their expiry", () =>
    Effect.gen(function* () {
      // the table exists once a provider has started
      yield* provider({})
      const old = lockId(slotName(key("old"), 0))
      const recent = lockId(slotName(key("recent"), 0))
      yield* sqlOf(
        `INSERT INTO warp_semaphore_marker (lock_id, holder, until) VALUES ($1, 'gone', now() - interval '2 hours'), ($2, 'gone', now() - interval '10 minutes')`,
        [old, recent]
      )
      yield* provider({})
      const left = yield* sqlOf<{ lock_id: string }>("SELECT lock_id::text FROM warp_semaphore_marker WHERE lock_id = ANY($1::bigint[])", [`{${old},${recent}}`])
      expect(left.map((r) => r.lock_id)).toEqual([recent])
    }).pipe(Effect.scoped))

  it.live("a clean release frees the slot at once: no marker is left behind", () =>
    Effect.gen(function* () {
      const k = key("clean")
      const a = yield* provider({})
      const b = yield* provider({})
      for (let i = 0; i < 5; i++) {
        const held = yield* holdOpen(i % 2 === 0 ? a : b, k, 1)
        expect(Option.isSome(held.slot)).toBe(true)
        yield* held.close
      }
      const ids = [lockId(slotName(k, 0))]
      const left = yield* sqlOf<{ n: number }>("SELECT count(*)::int AS n FROM warp_semaphore_marker WHERE lock_id = ANY($1::bigint[])", [`{${ids.join(",")}}`])
      expect(left[0]!.n).toBe(0)
    }).pipe(Effect.scoped))

  it.live("a terminated connection is noticed from the driver's events, long before the next ping", () =>
    Effect.gen(function* () {
      // pings a minute apart: only the driver's end/error events can complete slot.lost in time
      for (const [i, options] of ([{ pingInterval: "1 minute" }, { pingInterval: "1 minute", multiplex: { connections: 1 } }] as const).entries()) {
        // a key of its own per round: the dead holder's marker of the round before is deleted in the
        // background (lock-delay), so the same key may still be held back for a moment
        const k = key(`events-${i}`)
        const holder = yield* provider(options)
        const held = yield* holdOpen(holder, k, 1)
        const slot = Option.getOrThrow(held.slot)
        expect(yield* isDone(slot)).toBe(false)
        const [owner] = yield* holders(k, 1)
        const t0 = Date.now()
        yield* terminate(owner!.pid)
        yield* Effect.timeout(slot.lost, "5 seconds")
        // the pings run every quarter of the deadline (2.5 s) whatever pingInterval says: well under it
        expect(Date.now() - t0).toBeLessThan(1_000)
        yield* held.close
      }
    }).pipe(Effect.scoped))

  it.live("multiplexed: a dead connection loses exactly its own slots; the provider reconnects", () =>
    Effect.gen(function* () {
      const k = key("deadmux")
      const holder = yield* provider({ pingInterval: "50 millis", multiplex: { connections: 2 } })
      const other = yield* provider({})
      const held = yield* Effect.forEach([0, 1, 2, 3, 4, 5], () => holdOpen(holder, k, 6))
      expect(held.every((h) => Option.isSome(h.slot))).toBe(true)
      const owners = yield* holders(k, 6)
      const pids = [...new Set(owners.map((o) => o.pid))]
      expect(pids).toHaveLength(2)
      const victim = pids[0]!
      const doomed = new Set(owners.filter((o) => o.pid === victim).map((o) => o.index))
      yield* terminate(victim)
      for (const h of held) {
        const slot = Option.getOrThrow(h.slot)
        if (doomed.has(slot.index)) yield* Effect.timeout(slot.lost, "10 seconds")
      }
      for (const h of held) {
        const slot = Option.getOrThrow(h.slot)
        if (!doomed.has(slot.index)) expect(yield* isDone(slot)).toBe(false)
      }
      // lock-delay: nothing is granted before the doomed holders have released
      expect(Option.isNone((yield* holdOpen(other, k, 6)).slot)).toBe(true)
      for (const h of held) if (doomed.has(Option.getOrThrow(h.slot).index)) yield* h.close
      // the other process gets exactly the freed slots
      // (a dead lane's markers are removed in the background: waiting briefly)
      const taken = yield* Effect.forEach([...doomed], () => holdOpen(other, k, 6, "5 seconds"))
      expect(taken.map((t) => Option.map(t.slot, (s) => s.index)).filter(Option.isSome).map((o) => o.value).sort()).toEqual([...doomed].sort())
      expect(Option.isNone((yield* holdOpen(other, k, 6)).slot)).toBe(true)
      // the holder still works: a fresh connection replaces the dead one
      const k2 = key("after")
      const again = yield* Effect.forEach([0, 1, 2, 3], () => holdOpen(holder, k2, 4))
      expect(again.every((h) => Option.isSome(h.slot))).toBe(true)
      expect((yield* holders(k2, 4)).every((o) => o.pid !== victim)).toBe(true)
      yield* Effect.forEach([...held, ...taken, ...again], (h) => h.close)
      expect(yield* holders(k, 6)).toHaveLength(0)
    }).pipe(Effect.scoped))

  it.live("multiplexed: 1,000 held slots on at most 4 connections; default mode: one connection per held slot", () =>
    Effect.gen(function* () {
      // 1,000 slots: 10 keys of 100 slots, every slot held
      const keys = Array.from({ length: 10 }, (_, i) => key(`thousand${i}`))
      const tag = freshTag()
      const mux = yield* provider({ multiplex: { connections: 4 } }, 10, tag)
      const t0 = Date.now()
      const held = yield* Effect.forEach(
        keys.flatMap((k) => Array.from({ length: 100 }, () => k)),
        (k) => Effect.map(holdOpen(mux, k, 100), (h) => ({ k, ...h })),
        { concurrency: "unbounded" }
      )
      const acquireMs = Date.now() - t0
      for (const k of keys) {
        const indexes = held.filter((h) => h.k === k).map((h) => Option.getOrThrow(h.slot).index)
        expect(indexes.sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i))
        expect(Option.isNone((yield* holdOpen(mux, k, 100)).slot)).toBe(true)
      }
      const muxConnections = yield* connectionsTagged(tag)
      const locks = yield* advisoryLocks
      expect(muxConnections).toBeLessThanOrEqual(4)
      expect(locks).toEqual({ n: 1000, pids: muxConnections })
      const t1 = Date.now()
      yield* Effect.forEach(held, (h) => h.close, { concurrency: "unbounded" })
      const releaseMs = Date.now() - t1
      expect((yield* advisoryLocks).n).toBe(0)

      const k2 = key("dedicated")
      const tag2 = freshTag()
      const dedicated = yield* provider({}, 30, tag2)
      const twenty = yield* Effect.forEach(Array.from({ length: 20 }, () => 0), () => holdOpen(dedicated, k2, 20), { concurrency: "unbounded" })
      expect(twenty.every((h) => Option.isSome(h.slot))).toBe(true)
      const dedicatedConnections = yield* connectionsTagged(tag2)
      expect(dedicatedConnections).toBe(20)
      yield* Effect.forEach(twenty, (h) => h.close)
      console.log(
        `1,000 slots multiplexed: ${muxConnections} connections, acquired in ${acquireMs} ms, released in ${releaseMs} ms; 20 slots by default: ${dedicatedConnections} connections`
      )
    }).pipe(Effect.scoped))

  it.live("multiplexed on one connection: two fibers cannot both hold slot k:0 (session locks are re-entrant)", () =>
    Effect.gen(function* () {
      const k = key("gate")
      const p = yield* provider({ multiplex: { connections: 1 } })
      const aHolds = yield* Deferred.make<void>()
      const bDone = yield* Deferred.make<void>()
      const a = yield* Effect.forkChild(
        Effect.scoped(
          Effect.gen(function* () {
            const slot = yield* p.tryAcquire(k, 1, 0)
            yield* Deferred.succeed(aHolds, undefined)
            yield* Deferred.await(bDone)
            return Option.map(slot, (s) => s.index)
          })
        )
      )
      yield* Deferred.await(aHolds)
      const b = yield* Effect.forkChild(
        Effect.scoped(Effect.map(p.tryAcquire(k, 1, 0), Option.isSome)).pipe(Effect.ensuring(Deferred.succeed(bDone, undefined)))
      )
      expect(yield* Fiber.join(b)).toBe(false)
      expect(yield* Fiber.join(a)).toEqual(Option.some(0))
      // with limit 2 the second fiber gets slot 1, a third gets nothing
      const first = yield* holdOpen(p, k, 1)
      const second = yield* holdOpen(p, k, 2)
      const third = yield* holdOpen(p, k, 2)
      expect([first.slot, second.slot, third.slot].map(Option.map((s) => s.index))).toEqual([Option.some(0), Option.some(1), Option.none()])
      expect((yield* holders(k, 2)).map((h) => h.index).sort()).toEqual([0, 1])
      yield* Effect.forEach([first, second, third], (h) => h.close)
      // no re-entrant count left behind: another session can take both slots
      expect(yield* holders(k, 2)).toHaveLength(0)
      const ids = [lockId(slotName(k, 0)), lockId(slotName(k, 1))]
      const free = yield* sqlOf<{ ok: boolean }>("SELECT pg_try_advisory_lock(x) AS ok FROM unnest($1::bigint[]) AS x", [`{${ids.join(",")}}`])
      expect(free.map((r) => r.ok)).toEqual([true, true])
    }).pipe(Effect.scoped))

  it.live("multiplexed on one connection: at most N holders under concurrent fibers", () =>
    Effect.gen(function* () {
      const k = key("muxstress")
      const p = yield* provider({ multiplex: { connections: 1 } })
      let live = 0
      let max = 0
      yield* Effect.forEach(
        Array.from({ length: 24 }, (_, i) => i),
        (i) =>
          Effect.forEach(
            [0, 1, 2, 3, 4],
            () =>
              Effect.scoped(
                Effect.flatMap(p.tryAcquire(k, i % 2 === 0 ? 1 : 2, i % 3 === 0 ? 1_000 : 0), (slot) =>
                  Option.isNone(slot)
                    ? Effect.void
                    : Effect.acquireUseRelease(
                        Effect.sync(() => (max = Math.max(max, ++live))),
                        () => Effect.sleep("1 millis"),
                        () => Effect.sync(() => live--)
                      )
                )
              ),
            { discard: true }
          ),
        { concurrency: "unbounded", discard: true }
      )
      expect(max).toBeLessThanOrEqual(2)
      expect(max).toBeGreaterThanOrEqual(1)
      expect(yield* holders(k, 2)).toHaveLength(0)
    }).pipe(Effect.scoped))

  it.live("a scan that waited for the guard reads the markers as they are after it (a release meanwhile frees the slot)", () =>
    Effect.gen(function* () {
      // another holder holds slot 0 of k with its marker, then releases it the way the provider does:
      // under the guard, lock and marker together, in a transaction it keeps open while the scan waits
      const k = key("stale")
      const p = yield* provider({})
      const id = lockId(slotName(k, 0))
      const [g1, g2] = SemaphoreProviderPg.guardOf(k)
      const other = yield* db.client
      yield* Effect.promise(() => other.query("SELECT pg_advisory_lock($1::bigint)", [id]))
      yield* Effect.promise(() =>
        other.query("INSERT INTO warp_semaphore_marker (lock_id, holder, until) VALUES ($1, 'other', now() + interval '1 hour') ON CONFLICT (lock_id) DO UPDATE SET holder = 'other', until = EXCLUDED.until", [id])
      )
      yield* Effect.promise(() => other.query("BEGIN"))
      yield* Effect.promise(() => other.query("SELECT pg_advisory_xact_lock($1::int, $2::int)", [g1, g2]))
      yield* Effect.promise(() => other.query("DELETE FROM warp_semaphore_marker WHERE lock_id = $1", [id]))
      yield* Effect.promise(() => other.query("SELECT pg_advisory_unlock($1::bigint)", [id]))
      // the scan starts (its statement's snapshot still shows the marker) and waits for the guard
      const scan = yield* Effect.forkChild(Effect.scoped(Effect.map(p.tryAcquire(k, 1, 0), Option.isSome)))
      const watcher = yield* db.client
      yield* until(
        Effect.promise(() =>
          watcher.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = $1::int::oid AND objid = $2::int::oid AND objsubid = 2",
            [g1, g2]
          )
        ),
        (r) => r.rows[0]!.n === 1
      )
      yield* Effect.promise(() => other.query("COMMIT"))
      // the slot is free and unmarked once the scan holds the guard: it must be taken
      expect(yield* Fiber.join(scan)).toBe(true)
    }).pipe(Effect.scoped))

  it.live("scans and releases of a name wait for its guard", () =>
    Effect.gen(function* () {
      const k = key("guard")
      const p = yield* provider({})
      const held = yield* holdOpen(p, k, 2)
      const [g1, g2] = SemaphoreProviderPg.guardOf(k)
      const guard = yield* db.client
      yield* Effect.promise(() => guard.query("BEGIN"))
      yield* Effect.promise(() => guard.query("SELECT pg_advisory_xact_lock($1::int, $2::int)", [g1, g2]))
      const scan = yield* Effect.forkChild(Effect.scoped(Effect.map(p.tryAcquire(k, 2, 0), Option.isSome)))
      const release = yield* Effect.forkChild(held.close)
      // a bounded observation: both stay blocked while the guard is held
      yield* Effect.sleep("300 millis")
      expect(scan.pollUnsafe()).toBeUndefined()
      expect(release.pollUnsafe()).toBeUndefined()
      yield* Effect.promise(() => guard.query("COMMIT"))
      expect(yield* Fiber.join(scan)).toBe(true)
      yield* Fiber.join(release)
      expect(yield* holders(k, 2)).toHaveLength(0)
    }).pipe(Effect.scoped))
})
