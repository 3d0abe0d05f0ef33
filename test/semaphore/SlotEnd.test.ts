/**
 * A slot found lost after its handler ended (issue 44): the run is judged at the handler's end
 * (`Slot.heldThrough`, marked by the gate right after the handler), not when the loss is noticed.
 * Each case hooks the end of the first run: the gate marks it, then the hook cuts (the slot's
 * connection, the lease, the server or the store) before the finalizing write lands.
 *
 * PostgreSQL with lock-delay: the marker kept the slot from everyone else up to the end, so the job is
 * Succeeded with one handler run and one trail entry per state — the slot's backend terminated, with
 * the loss noticed before the finalizing statement or under it (the fused statement then fails on the
 * dead connection and the write goes through the pool), or the whole server unreachable until the
 * write, pending meanwhile, lands. Without lock-delay nothing shows the session lived up to the end
 * (the server frees the lock at once, and the holder hears of it later): requeued as lost after its
 * handler ended, and run again. Redis: the server unreachable after the end (the holder's deadline
 * passes) keeps the outcome; the lease found gone does not. Memory (slots that cannot be lost): the
 * store unreachable after the end, the result is written when it returns. The negatives: the slot
 * dies while the handler runs — interrupted, requeued as lost while running. And the generic path: a
 * provider of one's own keeps the outcome only if its `heldThrough` says so.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import { Redis } from "ioredis"
import { Concurrency, Contract, Handler, JobParameters, JobStoreMemory, JobStorePg, Publisher, Registry, SemaphoreProviderMemory, Worker } from "warp-effect"
import { SemaphoreProviderRedis } from "warp-effect/redis"
import { lostAfterEndText, lostText } from "../../src/internal/attempt/Attempt.js"
import { LOCK_PREFIX } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { type SemaphoreProviderService, type Slot, SemaphoreProvider, slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import * as ProviderPg from "../../src/internal/semaphore/SemaphoreProviderPg.js"
import { finalizesPending } from "../../src/internal/worker/StoreHealth.js"
import { freshDatabaseUrl, freshPgLayer, pgLayer } from "../support/db.js"
import { startProxy, type TcpProxy } from "../support/faults/TcpProxy.js"
import { detail, until } from "../support/runtime.js"
import { redisReachable, redisUrl, runPrefix } from "./redis.js"

const Step = Contract.job("SlotEndStep", Schema.Struct({ n: Schema.Number }))
const fresh = (label: string) => `end-${label}-${Math.random().toString(36).slice(2)}`

/** Terminates the backend holding slot 0 of `key` (the slot's own connection). */
const terminateHolder = (key: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.unsafe(
      `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
      [lockId(slotName(LOCK_PREFIX + key, 0))]
    )
  ).pipe(Effect.orDie)

/**
 * `inner`, its first slot's end of run hooked: the first of `heldThrough` (after it marked the end) and
 * `lapsed` that the gate asks right after the handler runs `atEnd` (which cuts something).
 */
const hooked = <R>(inner: SemaphoreProviderService, atEnd: (slot: Slot) => Effect.Effect<void, never, R>, context: import("effect/Context").Context<R>): SemaphoreProviderService => {
  let first = true
  return {
    tryAcquire: (name, limit, timeout) =>
      Effect.tap(inner.tryAcquire(name, limit, timeout), (slot) =>
        Effect.sync(() => {
          if (Option.isNone(slot) || !first) return
          first = false
          // the same slot object (a fused release is found by it)
          const s = slot.value as { heldThrough?: Slot["heldThrough"]; lapsed?: Slot["lapsed"] }
          let cut = false
          const once = Effect.suspend(() => {
            if (cut) return Effect.void
            cut = true
            return Effect.provideContext(atEnd(slot.value), context)
          })
          if (s.heldThrough !== undefined) s.heldThrough = Effect.flatMap(s.heldThrough, (verdict) => Effect.as(once, verdict))
          s.lapsed = s.lapsed === undefined ? Effect.as(once, false) : Effect.andThen(once, s.lapsed)
        })
      )
  }
}

const pgHooked = (options: ProviderPg.PgProviderOptions, atEnd: (slot: Slot) => Effect.Effect<void, never, SqlClient.SqlClient>) =>
  Layer.effect(
    SemaphoreProvider,
    Effect.gen(function* () {
      return hooked(yield* ProviderPg.make(options), atEnd, yield* Effect.context<SqlClient.SqlClient>())
    })
  )

/** One Mutex job through a worker; its handler runs `handler(n)` on its n-th run. */
const runOne = (
  // a Publisher over a JobStore (and what the handler needs), which needs the Registry
  env: Layer.Layer<any, any, any>,
  key: string,
  handler: (runs: number) => Effect.Effect<void, never, any> = () => Effect.void
) => {
  const counts = { runs: 0, exits: 0 }
  return Effect.gen(function* () {
    const p = yield* Publisher.Publisher
    const id = yield* p.enqueue(Step, { n: 1 }, JobParameters.make().withMutex(key, "Wait"))
    yield* Effect.scoped(
      Effect.andThen(
        Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "5 millis", lease: "30 seconds" }),
        // (a read that meets the store's outage reads nothing: the outage tests cut it)
        until(Effect.orElseSucceed(detail(id), () => undefined), (d) => d?.job.state === "Succeeded", 30_000)
      )
    )
    const d = yield* detail(id)
    const ends = d.logs.filter((l) => ["Requeued", "Succeeded", "Failed", "Deleted"].includes(l.kind))
    return { ...counts, ends, attempt: d.job.attempt, trail: d.logs.map((l) => l.kind) }
  }).pipe(
    Effect.provide(
      Layer.provideMerge(
        env,
        Registry.layer({
          handlers: [
            Handler.job(Step, () =>
              Effect.andThen(
                Effect.suspend(() => handler(++counts.runs)),
                Effect.sync(() => void counts.exits++)
              )
            )
          ]
        })
      ) as Layer.Layer<any, unknown>
    ),
    Effect.provideService(References.MinimumLogLevel, "None")
  )
}

const pgEnv = (provider: Layer.Layer<SemaphoreProvider, never, SqlClient.SqlClient>, db = freshPgLayer(20)) =>
  Publisher.layer.pipe(Layer.provideMerge(Concurrency.layer), Layer.provideMerge(provider), Layer.provideMerge(JobStorePg.layer), Layer.provideMerge(db))

/** Cuts the slot's connection after the end; `notice`: waits until the provider has noticed (else the finalizing statement may go out on it). */
const cutSlot = (key: string, notice: boolean) => (slot: Slot) =>
  Effect.andThen(terminateHolder(key), notice ? Effect.andThen(slot.lost, Effect.yieldNow) : Effect.void)

const kept = (r: { runs: number; exits: number; ends: ReadonlyArray<{ kind: string }>; attempt: number; trail: ReadonlyArray<string> }) => {
  expect(r.runs).toBe(1)
  expect(r.exits).toBe(1)
  expect(r.ends.map((l) => l.kind)).toEqual(["Succeeded"])
  // one trail entry per state
  expect(r.trail).toEqual(["Enqueued", "Processing", "Succeeded"])
  expect(r.attempt).toBe(1)
}
const requeuedAfterEnd = (r: { runs: number; ends: ReadonlyArray<{ kind: string; message: string }> }, key: string) => {
  expect(r.runs).toBe(2)
  expect(r.ends.map((l) => l.kind)).toEqual(["Requeued", "Succeeded"])
  expect(r.ends[0]!.message).toBe(lostAfterEndText(`Slot of '${key}'`))
}
const lostWhileRunning = (r: { runs: number; exits: number; ends: ReadonlyArray<{ kind: string; message: string }> }, key: string) => {
  expect(r.runs).toBe(2)
  expect(r.exits).toBe(1)
  expect(r.ends.map((l) => l.kind)).toEqual(["Requeued", "Succeeded"])
  expect(r.ends[0]!.message).toBe(lostText(`Slot of '${key}'`))
}

/** Until the worker's finalizing write waits for the store (then `then`). */
const whenPending = (then: Effect.Effect<void>) =>
  Effect.forkDetach(
    Effect.andThen(
      until(Metric.value(finalizesPending), (s) => s.value > 0, 20_000),
      then
    )
  )

/** The store and the provider through a proxy: after the end, the server is unreachable until the write is pending. */
const throughProxy = (proxy: TcpProxy, port: number) => (slot: Slot) =>
  Effect.gen(function* () {
    proxy.retarget(1) // nothing listens: connections are refused, as by a server that is down
    proxy.cut()
    yield* slot.lost
    yield* whenPending(Effect.sync(() => proxy.retarget(port)))
  })


/** A fresh database behind a TCP proxy for the test's scope: the server's port, the proxy, the URL through it. */
const proxiedDatabase = Effect.gen(function* () {
  const url = yield* freshDatabaseUrl
  const port = Number(new URL(url).port || 5432)
  const proxy = yield* Effect.acquireRelease(Effect.promise(() => startProxy(port)), (p) => Effect.promise(() => p.close()))
  const via = new URL(url)
  via.hostname = "127.0.0.1"
  via.port = String(proxy.port)
  return { port, proxy, via }
})
describe("PostgreSQL: a slot lost after its handler ended", () => {
  it.live("with lock-delay, the backend cut before the finalizing statement: kept (one run, one Succeeded)", () => {
    const key = fresh("marked")
    return Effect.map(runOne(pgEnv(pgHooked({}, cutSlot(key, true))), key), kept)
  }, 60_000)

  it.live("with lock-delay, the backend cut under the finalizing statement: kept", () => {
    const key = fresh("marked-under")
    return Effect.map(runOne(pgEnv(pgHooked({}, cutSlot(key, false))), key), kept)
  }, 60_000)

  it.live("with lock-delay, the whole server unreachable until the pending write lands: kept", () =>
    Effect.gen(function* () {
      const { port, proxy, via } = yield* proxiedDatabase
      const key = fresh("server")
      kept(yield* runOne(pgEnv(pgHooked({}, throughProxy(proxy, port)), pgLayer(via.toString(), 20)), key))
    }).pipe(Effect.scoped), 60_000)

  it.live("without lock-delay, the backend cut after the end (noticed before or under the statement): requeued as lost after its handler ended", () =>
    Effect.gen(function* () {
      for (const notice of [true, false]) {
        const key = fresh(`plain-${notice}`)
        requeuedAfterEnd(yield* runOne(pgEnv(pgHooked({ lockDelay: false }, cutSlot(key, notice))), key), key)
      }
    }), 60_000)

  it.live("the negative, with and without lock-delay: the backend cut while the handler runs: interrupted, lost while running", () =>
    Effect.gen(function* () {
      for (const lockDelay of [true, false]) {
        const key = fresh(`running-${lockDelay}`)
        const r = yield* runOne(pgEnv(pgHooked({ lockDelay }, () => Effect.void)), key, (n) => (n === 1 ? Effect.andThen(terminateHolder(key), Effect.never) : Effect.void))
        lostWhileRunning(r, key)
      }
    }), 60_000)
})

describe("Redis: a slot lost after its handler ended", async () => {
  const reachable = await redisReachable()
  const prefixes = runPrefix()
  const redisPort = Number(new URL(redisUrl).port || 6379)

  const redisEnv = (port: number, prefix: string, atEnd: (slot: Slot) => Effect.Effect<void>) =>
    Publisher.layer.pipe(
      Layer.provideMerge(Concurrency.layerMemoryLimits),
      Layer.provideMerge(
        Layer.effect(
          SemaphoreProvider,
          Effect.map(
            Layer.build(SemaphoreProviderRedis.layer({ redis: { host: "127.0.0.1", port }, prefix, lease: "600 millis" })),
            (c) => hooked(c.mapUnsafe.get(SemaphoreProvider.key) as SemaphoreProviderService, atEnd, Context.empty())
          )
        )
      ),
      Layer.provideMerge(JobStoreMemory.layer)
    )
  /** Deletes every lease under `prefix`. */
  const dropLeases = (prefix: string) =>
    Effect.promise(async () => {
      const admin = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
      try {
        const keys = await admin.keys(`${prefix}*`)
        if (keys.length > 0) await admin.del(...keys)
      } finally {
        admin.disconnect()
      }
    })

  it.live.skipIf(!reachable)("the server unreachable after the end (the holder's deadline passes before the write): kept", () =>
    Effect.gen(function* () {
      const proxy = yield* Effect.acquireRelease(Effect.promise(() => startProxy(redisPort)), (p) => Effect.promise(() => p.close()))
      const key = fresh("redis-down")
      kept(yield* runOne(redisEnv(proxy.port, prefixes.next(), (slot) => Effect.andThen(Effect.sync(() => proxy.stall()), slot.lost)), key))
    }).pipe(Effect.scoped), 60_000)

  it.live.skipIf(!reachable)("the lease found gone after the end: requeued as lost after its handler ended", () =>
    Effect.gen(function* () {
      const prefix = prefixes.next()
      const key = fresh("redis-gone")
      requeuedAfterEnd(yield* runOne(redisEnv(redisPort, prefix, (slot) => Effect.andThen(dropLeases(prefix), Effect.andThen(slot.lost, Effect.yieldNow))), key), key)
    }), 60_000)

  it.live.skipIf(!reachable)("the negative: the lease gone while the handler runs: interrupted, lost while running", () =>
    Effect.gen(function* () {
      const prefix = prefixes.next()
      const key = fresh("redis-running")
      lostWhileRunning(yield* runOne(redisEnv(redisPort, prefix, () => Effect.void), key, (n) => (n === 1 ? Effect.andThen(dropLeases(prefix), Effect.never) : Effect.void)), key)
    }), 60_000)
})

describe("memory: slots that cannot be lost", () => {
  it.live("the store unreachable after the end: the result is written when it returns (one run)", () =>
    Effect.gen(function* () {
      const { port, proxy, via } = yield* proxiedDatabase
      const provider = Layer.effect(
        SemaphoreProvider,
        Effect.map(SemaphoreProviderMemory.make, (inner) =>
          hooked(
            inner,
            () =>
              Effect.andThen(
                Effect.sync(() => {
                  proxy.retarget(1)
                  proxy.cut()
                }),
                whenPending(Effect.sync(() => proxy.retarget(port)))
              ),
            Context.empty()
          )
        )
      )
      const env = Publisher.layer.pipe(
        Layer.provideMerge(Concurrency.layerMemoryLimits),
        Layer.provideMerge(provider),
        Layer.provideMerge(JobStorePg.layer),
        Layer.provideMerge(pgLayer(via.toString(), 20))
      )
      kept(yield* runOne(env, fresh("memory")))
    }).pipe(Effect.scoped), 60_000)
})

describe("the generic path: a provider of one's own", () => {
  /** The memory provider, its first slot's `lost` completed at the end of its run; `proves`: what its `heldThrough` says (none: absent). */
  const losing = (proves: boolean | undefined) =>
    Layer.effect(
      SemaphoreProvider,
      Effect.map(SemaphoreProviderMemory.make, (inner) => {
        let first = true
        return {
          tryAcquire: (name: string, limit: number, timeout: Parameters<typeof inner.tryAcquire>[2]) =>
            Effect.flatMap(inner.tryAcquire(name, limit, timeout), (slot) =>
              Effect.gen(function* () {
                if (Option.isNone(slot) || !first) return slot
                first = false
                const lost = yield* Deferred.make<void>()
                // the end of the run: the slot is lost right then (after the end is marked, or in the lapse check)
                const end = Effect.andThen(Deferred.succeed(lost, undefined), Effect.yieldNow)
                return Option.some<Slot>({
                  ...slot.value,
                  lost: Deferred.await(lost),
                  ...(proves === undefined ? { lapsed: Effect.as(end, false) } : { heldThrough: Effect.as(end, Effect.succeed(proves)) })
                })
              })
            )
        }
      })
    )
  const memoryEnv = (proves: boolean | undefined) =>
    Publisher.layer.pipe(Layer.provideMerge(Concurrency.layerMemoryLimits), Layer.provideMerge(losing(proves)), Layer.provideMerge(JobStoreMemory.layer))

  it.live("a provider whose heldThrough proves the end: kept", () => Effect.map(runOne(memoryEnv(true), "generic-k"), kept))

  it.live("a provider that cannot tell (no heldThrough), or says no: requeued as lost after its handler ended", () =>
    Effect.gen(function* () {
      for (const proves of [undefined, false]) requeuedAfterEnd(yield* runOne(memoryEnv(proves), "generic-k"), "generic-k")
    }))
})
