/**
 * A slot found lost after its handler ended (issue 44): the run is judged at the handler's end
 * (`Slot.heldThrough`), not at the moment the loss is noticed.
 *
 * 1. PostgreSQL with lock-delay: the handler ends, then the slot's backend is terminated before the
 *    finalizing write: the marker kept the slot from everyone else up to the end, so the job is
 *    Succeeded with one handler run and one trail entry per state.
 * 2. PostgreSQL without lock-delay: the same cut, but nothing shows the session lived up to the end
 *    (the server frees the lock at once): requeued as lost after its handler ended, and run again.
 * 3. The negative: the backend is terminated while the handler runs: the handler is interrupted and
 *    the job requeued as lost while running.
 * 4. The generic path (a provider of one's own): a slot whose `lost` completes after the end keeps the
 *    outcome only if its `heldThrough` says so; without `heldThrough`, it is requeued.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import { Concurrency, Contract, Handler, JobParameters, JobStoreMemory, JobStorePg, Publisher, Registry, SemaphoreProviderMemory, Worker } from "warp-effect"
import { lostAfterEndText, lostText } from "../../src/internal/attempt/Attempt.js"
import { LOCK_PREFIX } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { type Slot, SemaphoreProvider, slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import * as ProviderPg from "../../src/internal/semaphore/SemaphoreProviderPg.js"
import { freshPgLayer } from "../support/db.js"
import { detail, until } from "../support/runtime.js"

const Step = Contract.job("SlotEndStep", Schema.Struct({ n: Schema.Number }))

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
 * The PostgreSQL provider, its first slot's end of run (`heldThrough`, asked by the gate right after
 * the handler, before the finalizing write) preceded by `atEnd` (which may cut the slot's connection).
 */
const pgWithHook = (options: ProviderPg.PgProviderOptions, atEnd: (slot: Slot) => Effect.Effect<void, never, SqlClient.SqlClient>) =>
  Layer.effect(
    SemaphoreProvider,
    Effect.gen(function* () {
      const inner = yield* ProviderPg.make(options)
      const context = yield* Effect.context<SqlClient.SqlClient>()
      let first = true
      return {
        tryAcquire: (name: string, limit: number, timeout: Parameters<typeof inner.tryAcquire>[2]) =>
          Effect.tap(inner.tryAcquire(name, limit, timeout), (slot) =>
            Effect.sync(() => {
              if (Option.isNone(slot) || !first) return
              first = false
              // the same slot object (its fused release is found by it), its end hooked
              const s = slot.value as { heldThrough?: Slot["heldThrough"] }
              const original = s.heldThrough!
              s.heldThrough = Effect.andThen(Effect.provideContext(atEnd(slot.value), context), original)
            })
          )
      }
    })
  )

const run = (provider: Layer.Layer<SemaphoreProvider, never, SqlClient.SqlClient>, key: string, handler: (runs: number) => Effect.Effect<void, never, SqlClient.SqlClient>) => {
  let runs = 0
  let exits = 0
  const h = Handler.job(Step, () =>
    Effect.andThen(
      Effect.suspend(() => handler(++runs)),
      Effect.sync(() => void exits++)
    )
  )
  const env = Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers: [h] })),
    Layer.provideMerge(Concurrency.layer),
    Layer.provideMerge(provider),
    Layer.provideMerge(JobStorePg.layer),
    Layer.provideMerge(freshPgLayer(20))
  )
  return Effect.gen(function* () {
    const p = yield* Publisher.Publisher
    const id = yield* p.enqueue(Step, { n: 1 }, JobParameters.make().withMutex(key, "Wait"))
    const d = yield* Effect.scoped(
      Effect.andThen(
        Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "5 millis", lease: "30 seconds" }),
        until(detail(id), (d) => d.job.state === "Succeeded", 30_000)
      )
    )
    const ends = d.logs.filter((l) => ["Requeued", "Succeeded", "Failed", "Deleted"].includes(l.kind))
    return { runs, exits, ends, d }
  }).pipe(Effect.provide(env), Effect.provideService(References.MinimumLogLevel, "None"))
}

/** Cuts the slot's connection after the handler ended, and waits until the provider has noticed. */
const cutAfterEnd = (key: string) => (slot: Slot) => Effect.andThen(terminateHolder(key), Effect.andThen(slot.lost, Effect.yieldNow))

describe("a slot lost after its handler ended", () => {
  it.live("PostgreSQL with lock-delay: the outcome is kept (one run, one Succeeded)", () =>
    Effect.gen(function* () {
      const key = `end-marked-${Math.random().toString(36).slice(2)}`
      const r = yield* run(pgWithHook({}, cutAfterEnd(key)), key, () => Effect.void)
      expect(r.runs).toBe(1)
      expect(r.exits).toBe(1)
      expect(r.ends.map((l) => l.kind)).toEqual(["Succeeded"])
      expect(r.d.job.attempt).toBe(1)
    }), 60_000)

  it.live("PostgreSQL without lock-delay: nothing shows the session lived to the end: requeued as lost after the end, run again", () =>
    Effect.gen(function* () {
      const key = `end-plain-${Math.random().toString(36).slice(2)}`
      const r = yield* run(pgWithHook({ lockDelay: false }, cutAfterEnd(key)), key, () => Effect.void)
      expect(r.runs).toBe(2)
      expect(r.ends.map((l) => l.kind)).toEqual(["Requeued", "Succeeded"])
      expect(r.ends[0]!.message).toBe(lostAfterEndText(`Slot of '${key}'`))
    }), 60_000)

  it.live("the negative: the slot dies while the handler runs: interrupted, requeued as lost while running", () =>
    Effect.gen(function* () {
      const key = `end-running-${Math.random().toString(36).slice(2)}`
      // the first run cuts its own slot's connection and waits; the loss interrupts it
      const r = yield* run(pgWithHook({}, () => Effect.void), key, (n) => (n === 1 ? Effect.andThen(terminateHolder(key), Effect.never) : Effect.void))
      expect(r.runs).toBe(2)
      expect(r.exits).toBe(1)
      expect(r.ends.map((l) => l.kind)).toEqual(["Requeued", "Succeeded"])
      expect(r.ends[0]!.message).toBe(lostText(`Slot of '${key}'`))
    }), 60_000)
})

describe("a slot lost after its handler ended: the generic path", () => {
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
                const end = Effect.andThen(Deferred.succeed(lost, undefined), Effect.yieldNow)
                return Option.some<Slot>({
                  ...slot.value,
                  lost: Deferred.await(lost),
                  // the end of the run: the slot is lost right then (told before the verdict or the lapse check)
                  ...(proves === undefined
                    ? { lapsed: Effect.as(end, false) }
                    : { heldThrough: Effect.andThen(end, Effect.succeed(Effect.succeed(proves))) })
                })
              })
            )
        }
      })
    )
  const runMemory = (proves: boolean | undefined) => {
    let runs = 0
    const h = Handler.job(Step, () => Effect.sync(() => void runs++))
    const env = Publisher.layer.pipe(
      Layer.provideMerge(Registry.layer({ handlers: [h] })),
      Layer.provideMerge(Concurrency.layerMemoryLimits),
      Layer.provideMerge(losing(proves)),
      Layer.provideMerge(JobStoreMemory.layer)
    )
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const id = yield* p.enqueue(Step, { n: 1 }, JobParameters.make().withMutex("generic-k", "Wait"))
      const d = yield* Effect.scoped(
        Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "5 millis" }), until(detail(id), (d) => d.job.state === "Succeeded", 10_000))
      )
      return { runs, ends: d.logs.filter((l) => ["Requeued", "Succeeded"].includes(l.kind)) }
    }).pipe(Effect.provide(env), Effect.provideService(References.MinimumLogLevel, "None"))
  }

  it.live("a provider whose heldThrough proves the end: kept", () =>
    Effect.gen(function* () {
      const r = yield* runMemory(true)
      expect(r.runs).toBe(1)
      expect(r.ends.map((l) => l.kind)).toEqual(["Succeeded"])
    }))

  it.live("a provider that cannot tell (no heldThrough), or says no: requeued as lost after the end", () =>
    Effect.gen(function* () {
      for (const proves of [undefined, false]) {
        const r = yield* runMemory(proves)
        expect(r.runs).toBe(2)
        expect(r.ends.map((l) => l.kind)).toEqual(["Requeued", "Succeeded"])
        expect(r.ends[0]!.message).toBe(lostAfterEndText("Slot of 'generic-k'"))
      }
    }))
})
