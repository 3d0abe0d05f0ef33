/** This project, driven through its public modules (imported from ../src). */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import * as Concurrency from "../../src/internal/concurrency/ConcurrencyAddon.js"
import * as Contract from "../../src/internal/job/Contract.js"
import * as Handler from "../../src/internal/job/Handler.js"
import * as JobId from "../../src/internal/job/JobId.js"
import { JobParameters } from "../../src/internal/publisher/JobParameters.js"
import * as Publisher from "../../src/internal/publisher/Publisher.js"
import * as Registry from "../../src/internal/job/Registry.js"
import * as Worker from "../../src/internal/worker/Worker.js"
import * as JobMetadata from "../../src/internal/policy/JobMetadata.js"
import * as SemaphoreProviderPg from "../../src/internal/semaphore/SemaphoreProviderPg.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import * as JobStorePg from "../../src/internal/store/JobStorePg.js"
import { diffCounters, readCounters, withClient } from "../lib/server.js"
import { cpuWindow, databaseOf, serverCpu } from "../lib/serverCpu.js"
import {
  type BacklogResult,
  type BacklogSpec,
  type ClaimBlock,
  type ClaimRig,
  type ClaimSpec,
  ClaimTimer,
  type DedupeResult,
  type DedupeSpec,
  type HandoffSpec,
  Holders,
  measureHandoffs,
  measurePickups,
  measurePriority,
  type PickupResult,
  type PickupSpec,
  PriorityProbe,
  type PriorityResult,
  type PrioritySpec,
  Signals,
  type ProducerResult,
  type ProducerSpec,
  shares,
  sleep,
  waitUntil
} from "./common.js"

export const name = "warp-effect"

const BenchJob = Contract.job("BenchJob", Schema.Struct({ i: Schema.Number, key: Schema.optional(Schema.String) }))

const pgLayer = (url: string, maxConnections: number) =>
  PgClient.layer({ url: Redacted.make(url), maxConnections, idleTimeout: "30 seconds" })

const handlerOf = (holders: Holders, handlerMs: number, onRun?: (i: number, key: string | undefined) => void) =>
  Handler.job(BenchJob, ({ i, key }) =>
    Effect.acquireUseRelease(
      Effect.sync(() => holders.enter(key)),
      () => (handlerMs > 0 ? Effect.sleep(handlerMs) : Effect.void),
      () => Effect.sync(() => {
        holders.exit(key)
        onRun?.(i, key)
      })
    )
  )

/**
 * The worker environment: store, registry, and the concurrency addon's services on the PG provider
 * (the worker registers the addon only where asked: `addonsOf`).
 */
const env = (url: string, handlers: ReadonlyArray<Handler.JobHandler<any, any, never>>, maxConnections: number, lockDelay?: boolean) =>
  Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers })),
    Layer.provideMerge(Concurrency.layer),
    Layer.provideMerge(SemaphoreProviderPg.layer(lockDelay === undefined ? {} : { lockDelay })),
    // WARP_PREPARED=0: the store's statements unnamed, planned at every run (prepared statements off)
    Layer.provideMerge(JobStorePg.layerWith({ preparedStatements: process.env.WARP_PREPARED !== "0" })),
    Layer.provideMerge(pgLayer(url, maxConnections))
  )

/** The addons a bench worker registers: the concurrency addon, or none (scenario 1's "no addon" runs). */
const addonsOf = (addon: boolean): ReadonlyArray<typeof Concurrency.addon> => (addon ? [Concurrency.addon] : [])

const paramsOf = (key: string | undefined, limit: number, mode: "Wait" | "Skip" | "Fifo", weight?: number, total?: number) =>
  key === undefined
    ? JobParameters.make()
    : JobParameters.make().withSemaphore(key, limit, mode, {
        ...(weight === undefined ? {} : { weight }),
        ...(total === undefined ? {} : { total: { group: "all", limit: total } })
      })

/**
 * Inserts the backlog the way `Publisher.enqueue` writes each row, `perCall` rows a `JobStore.insert`
 * call (2,000 by default: one statement; the store splits a larger call into statements of 5,000 in
 * one transaction). The stamped metadata is built once per key (every row has the same `now`).
 */
const insertBacklog = (spec: Pick<BacklogSpec, "jobs" | "keyOf" | "limit" | "mode" | "weight" | "total">, perCall = 2000) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const now = new Date()
    const metadataOf = new Map<string | undefined, unknown>()
    const metadata = (key: string | undefined) => {
      let m = metadataOf.get(key)
      if (m === undefined) {
        m = JobMetadata.encode(Publisher.publishMetadata(BenchJob, paramsOf(key, spec.limit, spec.mode ?? "Wait", spec.weight, spec.total), now))
        metadataOf.set(key, m)
      }
      return m
    }
    for (let start = 0; start < spec.jobs; start += perCall) {
      const rows = []
      for (let i = start; i < Math.min(spec.jobs, start + perCall); i++) {
        const key = spec.keyOf(i)
        rows.push({
          id: JobId.make(),
          type: BenchJob.name,
          handler: null,
          payload: key === undefined ? { i } : { i, key },
          state: "Enqueued" as const,
          scheduleTime: now,
          metadata: metadata(key)
        })
      }
      yield* store.insert(rows)
    }
  })

/**
 * Succeeded jobs, and wasted pickups: the gate's "full" requeues (audit text `Requeued — '{key}' full
 * ...`). Not `stats:requeued`, which also counts the attempts a run's end interrupts (requeued by the
 * worker's shutdown, when a run stops at its cap).
 */
const tableCounts = (url: string) =>
  withClient(url, async (c) => {
    const r = await c.query(
      `SELECT (SELECT coalesce((SELECT value FROM warp_counter_totals WHERE key = 'stats:succeeded'), 0))::bigint AS succeeded,
              (SELECT count(*) FROM warp_job_logs WHERE kind = 'Requeued' AND message LIKE 'Requeued — %')::bigint AS requeued`
    )
    return { requeued: Number(r.rows[0].requeued), succeeded: Number(r.rows[0].succeeded) }
  })

/** Drains a backlog with one worker process of `spec.workers` fibers. */
export const backlog = async (url: string, spec: BacklogSpec): Promise<BacklogResult> => {
  const addon = spec.addon ?? true
  const holders = new Holders()
  const handlers = [handlerOf(holders, spec.handlerMs)]
  const pool = spec.workers * 2 + Math.max(4, spec.limit)
  const server = await serverCpu(url)
  const inserting = cpuWindow(server)
  await Effect.runPromise(insertBacklog(spec).pipe(Effect.provide(env(url, handlers, 4))))
  const serverCpuInsertMs = inserting.end().serverCpuMs
  const before = await readCounters(url)
  let elapsedMs = 0
  let cpuMs = 0
  let serverCpuMs = 0
  let databaseCpuMs = 0
  await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const t0 = performance.now()
        const window = cpuWindow(server, databaseOf(url))
        yield* Worker.make({ addons: addonsOf(addon), concurrency: spec.workers, pollInterval: spec.pollMs, ...(spec.slotReuse === true ? { slotReuse: {} } : {}) })
        elapsedMs = yield* Effect.promise(() => waitUntil(() => holders.completed >= spec.jobs, spec.capMs, t0))
        ;({ cpuMs, serverCpuMs, databaseCpuMs } = window.end())
      })
    ).pipe(Effect.provide(env(url, handlers, pool, spec.lockDelay)))
  )
  const after = await readCounters(url)
  const counts = await tableCounts(url)
  return {
    completed: holders.completed,
    elapsedMs,
    maxHolders: holders.max,
    requeues: counts.requeued,
    succeeded: counts.succeeded,
    cpuMs,
    serverCpuMs,
    databaseCpuMs,
    serverCpuInsertMs,
    db: diffCounters(before, after),
    order: holders.order,
    maxLive: holders.maxLive
  }
}

/**
 * The APIs of issue 42 this tree may not have yet (agreed names): `JobParameters.withJobKey(key, { mode,
 * includeProcessing })`, `JobParameters.withPriority(n)` (higher runs first) and `Publisher.submit`
 * (`{ _tag: "Created" | "Replaced" | "Joined", id }`). `missing(...)` says which of them this tree
 * lacks (run.ts then skips this project's row of the scenario with "not in this tree").
 */
export const missing = (...methods: ReadonlyArray<"withJobKey" | "withPriority">): string | undefined => {
  const params: any = JobParameters.make()
  const absent = methods.filter((m) => typeof params[m] !== "function")
  return absent.length === 0 ? undefined : absent.map((m) => `JobParameters.${m}`).join(", ")
}

/** Scenario 4's variants of this project: `Mutex(key)` Skip, or a job key (issue 42). */
export type DedupeVariant =
  | { readonly kind: "mutex" }
  | { readonly kind: "jobKey"; readonly mode: "keep" | "replace" | "replacePayload"; readonly includeProcessing?: boolean }

/** Until the job key lands: `withJobKey` through `any` (see `missing`). */
const jobKeyParams = (key: string, options: { readonly mode: "keep" | "replace" | "replacePayload"; readonly includeProcessing?: boolean }): JobParameters =>
  (JobParameters.make() as any).withJobKey(key, options) as JobParameters

/**
 * Dedupe: producers enqueue `enqueues` jobs while the worker runs them, each `Mutex(key)` (Skip: a job
 * that meets its key held is dropped when picked up) or with job key `key` (issue 42: `keep` joins a
 * job of the key that is waiting, and with `includeProcessing` one that runs). A job key goes through
 * `Publisher.submit` where the tree has it (its outcomes are counted), else `enqueue`.
 */
export const dedupe = async (url: string, spec: DedupeSpec, variant: DedupeVariant = { kind: "mutex" }): Promise<DedupeResult> => {
  const holders = new Holders()
  const runsPerKey = new Map<string, number>()
  const handlers = [handlerOf(holders, spec.handlerMs, (_, key) => runsPerKey.set(key!, (runsPerKey.get(key!) ?? 0) + 1))]
  const outcomes: Record<string, number> = {}
  let enqueueMs = 0
  let settleMs = 0
  await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const store = yield* JobStore
        const submit: ((contract: typeof BenchJob, payload: { readonly i: number; readonly key?: string }, params?: JobParameters) => Effect.Effect<{ readonly _tag: string; readonly id: string }, unknown>) | undefined =
          typeof (publisher as any).submit === "function" ? (publisher as any).submit.bind(publisher) : undefined
        const enqueue = (i: number, key: string): Effect.Effect<unknown, unknown> => {
          if (variant.kind === "mutex") return publisher.enqueue(BenchJob, { i, key }, JobParameters.make().withMutex(key))
          const params = jobKeyParams(key, { mode: variant.mode, ...(variant.includeProcessing === undefined ? {} : { includeProcessing: variant.includeProcessing }) })
          return submit === undefined
            ? publisher.enqueue(BenchJob, { i, key }, params)
            : Effect.tap(submit(BenchJob, { i, key }, params), (r) => Effect.sync(() => void (outcomes[r._tag] = (outcomes[r._tag] ?? 0) + 1)))
        }
        yield* Worker.make({ addons: [Concurrency.addon], concurrency: spec.workers, pollInterval: spec.pollMs })
        const t0 = performance.now()
        let next = 0
        const producer = Effect.gen(function* () {
          while (next < spec.enqueues) {
            const i = next++
            yield* enqueue(i, spec.keyOf(i))
          }
        })
        yield* Effect.all(Array.from({ length: spec.producers }, () => producer), { concurrency: "unbounded" })
        enqueueMs = performance.now() - t0
        // settled: nothing pending or processing
        while (performance.now() - t0 < spec.capMs) {
          const c = yield* store.countByState
          if (c.Enqueued + c.Scheduled + c.Processing === 0) break
          yield* Effect.sleep("20 millis")
        }
        settleMs = performance.now() - t0
      })
    ).pipe(Effect.provide(env(url, handlers, spec.workers * 2 + spec.producers + 4)))
  )
  const final = await withClient(url, async (c) => (await c.query(`SELECT state, count(*)::int AS n FROM warp_jobs GROUP BY state`)).rows)
  const states = Object.fromEntries(final.map((r: any) => [r.state, r.n]))
  const accepted = variant.kind === "mutex" ? spec.enqueues : Object.keys(outcomes).length > 0 ? (outcomes.Created ?? 0) : Object.values(states).reduce((a: number, b) => a + (b as number), 0)
  return { runsPerKey, maxHolders: holders.max, enqueueMs, settleMs, accepted, states, ...(Object.keys(outcomes).length > 0 ? { outcomes } : {}) }
}

/**
 * Priority under a backlog (scenario 15): the backlog written as scenario 9's (keyless rows exactly as
 * `Publisher.enqueue` writes them, default priority), one `Worker.make` of `spec.workers` lanes with the
 * concurrency addon (as scenario 9); the high jobs through `Publisher.enqueue` with `withPriority(10)`
 * (higher runs first here).
 */
export const priority = async (url: string, spec: PrioritySpec): Promise<PriorityResult> => {
  const probe = new PriorityProbe(spec.backlog)
  const handlers = [
    Handler.job(BenchJob, ({ i }) =>
      Effect.sync(() => {
        probe.start(i)
        probe.end(i)
      })
    )
  ]
  const t0 = performance.now()
  await Effect.runPromise(insertBacklog({ jobs: spec.backlog, keyOf: () => undefined, limit: 1 }).pipe(Effect.provide(env(url, handlers, 4))))
  const insertMs = performance.now() - t0
  const high = (JobParameters.make() as any).withPriority(10) as JobParameters
  const measured = await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const workerStart = performance.now()
        yield* Worker.make({ addons: [Concurrency.addon], concurrency: spec.workers, pollInterval: spec.pollMs })
        return yield* Effect.promise(() => measurePriority(spec, probe, workerStart, (k) => Effect.runPromise(publisher.enqueue(BenchJob, { i: spec.backlog + k }, high))))
      })
    ).pipe(Effect.provide(env(url, handlers, spec.workers * 2 + 8)))
  )
  return { ...measured, insertMs }
}

export { sleep }

/**
 * Latency in ms of one `SELECT 1`, and of acquire / release of one PG slot (release = closing the
 * scope that holds it), for each provider variant, in alternating blocks.
 */
export const latency = async (
  url: string,
  spec: { iterations: number; block: number; limits: ReadonlyArray<number>; variants: ReadonlyArray<{ name: string; options: object }> }
) => {
  const samples = new Map<string, Array<number>>()
  const push = (k: string, ms: number) => {
    const a = samples.get(k) ?? []
    a.push(ms)
    samples.set(k, a)
  }
  await Effect.runPromise(
    Effect.gen(function* () {
      const providers = yield* Effect.forEach(spec.variants, (v) => SemaphoreProviderPg.make(v.options as any))
      const sql = yield* SqlClient.SqlClient
      const once = (provider: (typeof providers)[number], name: string, limit: number, tag?: string) =>
        Effect.gen(function* () {
          const scope = yield* Scope.make()
          const t0 = performance.now()
          const slot = yield* provider.tryAcquire(name, limit, 0).pipe(Scope.provide(scope))
          const t1 = performance.now()
          if (slot._tag !== "Some") return yield* Effect.die(new Error("slot unexpectedly full"))
          yield* Scope.close(scope, Exit.void)
          const t2 = performance.now()
          if (tag !== undefined) {
            push(`acquire:${tag}`, t1 - t0)
            push(`release:${tag}`, t2 - t1)
          }
        })
      // warm the pool and the code paths
      for (let i = 0; i < 50; i++) {
        yield* sql`SELECT 1`
        for (const p of providers) yield* once(p, "bench:latency:warm", 1)
      }
      for (let done = 0; done < spec.iterations; done += spec.block) {
        for (let i = 0; i < spec.block; i++) {
          const t0 = performance.now()
          yield* sql`SELECT 1`
          push("select1", performance.now() - t0)
        }
        for (const [v, provider] of providers.entries()) {
          for (const limit of spec.limits) {
            for (let i = 0; i < spec.block; i++) yield* once(provider, `bench:latency:${v}:${limit}`, limit, `${spec.variants[v]!.name}:${limit}`)
          }
        }
      }
    }).pipe(Effect.scoped, Effect.provide(pgLayer(url, 16)))
  )
  return samples
}

/** Backends connected while `slots` slots (one key each) are held in this process. */
export const connectionsWhileHolding = async (
  url: string,
  observe: () => Promise<number>,
  spec: { slots: number; multiplex?: { connections: number } }
) => {
  let held = 0
  let during = 0
  let acquireMs = 0
  await Effect.runPromise(
    Effect.gen(function* () {
      const provider = yield* SemaphoreProviderPg.make(spec.multiplex === undefined ? {} : ({ multiplex: spec.multiplex } as any))
      const t0 = performance.now()
      const slots = yield* Effect.forEach(
        Array.from({ length: spec.slots }, (_, i) => i),
        (i) => provider.tryAcquire(`bench:hold:${i}`, 1, 0),
        { concurrency: 50 }
      )
      acquireMs = performance.now() - t0
      held = slots.filter((s) => s._tag === "Some").length
      during = yield* Effect.promise(observe)
    }).pipe(Effect.scoped, Effect.provide(pgLayer(url, spec.slots + 20)))
  )
  return { held, during, acquireMs }
}

/**
 * Producers through the public Publisher: `enqueue` one at a time from `spec.producers` fibers, or
 * `enqueueMany` calls of `spec.batch` jobs. The counters are read after the pool is closed.
 */
export const producers = async (url: string, spec: ProducerSpec): Promise<ProducerResult> => {
  const handlers = [handlerOf(new Holders(), 0)]
  // migrate (and build the pool) outside the window
  await Effect.runPromise(Effect.void.pipe(Effect.provide(env(url, handlers, 2))))
  const before = await readCounters(url)
  let elapsedMs = 0
  await Effect.runPromise(
    Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const t0 = performance.now()
      if (spec.mode === "single") {
        yield* Effect.forEach(
          shares(spec.jobs, spec.producers),
          (n, p) =>
            Effect.forEach(
              Array.from({ length: n }, (_, i) => i),
              (i) => publisher.enqueue(BenchJob, { i }, spec.keyed === true ? JobParameters.make().withSemaphore(`k${(p * n + i) % 100}`, 1, "Wait") : undefined),
              { discard: true }
            ),
          { concurrency: "unbounded", discard: true }
        )
      } else {
        for (let start = 0; start < spec.jobs; start += spec.batch) {
          const n = Math.min(spec.batch, spec.jobs - start)
          yield* publisher.enqueueMany(BenchJob, Array.from({ length: n }, (_, i) => ({ i: start + i })))
        }
      }
      elapsedMs = performance.now() - t0
    }).pipe(Effect.provide(env(url, handlers, spec.producers + 2)))
  )
  const after = await readCounters(url)
  const rows = await withClient(url, async (c) => Number((await c.query(`SELECT count(*)::int AS n FROM warp_jobs`)).rows[0].n))
  return { jobs: spec.jobs, elapsedMs, rows, db: diffCounters(before, after) }
}

/**
 * Claim latency with a large backlog: `spec.jobs` waiting jobs over `spec.keys` keys (limit 1, Wait
 * or Fifo), written with `JobStore.insert` 10,000 rows a call and analyzed; then, per block, a worker
 * of `spec.workers` lanes with the concurrency addon and `maxBatch: 1` (every claim asks for one row)
 * runs no-op handlers while each `JobStore.fetch` it makes is timed.
 */
export const claimLatency = async (url: string, spec: ClaimSpec): Promise<ClaimRig> => {
  const holders = new Holders()
  const handlers = [handlerOf(holders, 0)]
  const t0 = performance.now()
  await Effect.runPromise(insertBacklog({ jobs: spec.jobs, keyOf: spec.keyOf, limit: 1, mode: spec.mode ?? "Wait" }, 10_000).pipe(Effect.provide(env(url, handlers, 4))))
  await withClient(url, (c) => c.query("ANALYZE warp_jobs"))
  const insertSeconds = (performance.now() - t0) / 1000
  const waiting = () =>
    withClient(url, async (c) => Number((await c.query(`SELECT count(*)::int AS n FROM warp_jobs WHERE state IN ('Enqueued', 'Scheduled')`)).rows[0].n))
  const block = async (claims: number, warmup: number): Promise<ClaimBlock> => {
    const timer = new ClaimTimer(warmup, claims)
    const completed = holders.completed
    holders.max = 0
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const store = yield* JobStore
          // a claim is timed wherever it runs: a lane's own fetch, or the claim a keyed attempt's
          // finalizing statement carries (timed from the write's call to the statement's answer, so it
          // includes the write and the slot's release it shares a statement with)
          const timed: typeof store = {
            ...store,
            fetch: (workerId, limit, lease, hint) =>
              Effect.suspend(() => {
                const started = performance.now()
                return Effect.tap(store.fetch(workerId, limit, lease, hint), (rows) => Effect.sync(() => timer.record(performance.now() - started, rows.length, "own")))
              }),
            finalize: (f) =>
              Effect.suspend(() => {
                const carried = f.claim
                if (carried === undefined) return store.finalize(f)
                const started = performance.now()
                return store.finalize({
                  ...f,
                  claim: {
                    ...carried,
                    claimed: (jobs) => {
                      timer.record(performance.now() - started, jobs.length, "carried")
                      carried.claimed(jobs)
                    }
                  }
                })
              })
          }
          const started = performance.now()
          yield* Worker.make({ addons: [Concurrency.addon], concurrency: spec.workers, pollInterval: spec.pollMs, maxBatch: 1 }).pipe(Effect.provideService(JobStore, timed))
          yield* Effect.promise(() => waitUntil(() => timer.done, spec.capMs, started))
        })
      ).pipe(Effect.provide(env(url, handlers, spec.workers * 2 + 4)))
    )
    return { samples: timer.samples, empty: timer.empty, completed: holders.completed - completed, maxHolders: holders.max, byKind: timer.byKind }
  }
  return { insertSeconds, waiting, block }
}

/** Scenario 13's job: `k` is the sample; `role` A holds key `key` for `holdMs`, B is the Wait job behind it. */
const PickupJob = Contract.job(
  "PickupJob",
  Schema.Struct({ k: Schema.Number, role: Schema.optional(Schema.String), key: Schema.optional(Schema.String), holdMs: Schema.optional(Schema.Number) })
)

const pickupHandler = (signals: Signals) =>
  Handler.job(PickupJob, ({ k, role, holdMs }) =>
    Effect.gen(function* () {
      signals.mark(role === undefined ? `start:${k}` : `start:${role}:${k}`)
      if (holdMs !== undefined && holdMs > 0) yield* Effect.sleep(holdMs)
      if (role !== undefined) signals.mark(`end:${role}:${k}`)
    })
  )

/**
 * The worker of scenario 13 with default settings (`Worker.make` without a poll interval or batch size:
 * whatever this tree's defaults are), the concurrency addon registered; `use` runs while it is idle.
 */
const idleWorker = <A>(url: string, workers: number, signals: Signals, use: (publisher: Publisher.PublisherService) => Promise<A>): Promise<A> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        yield* Worker.make({ addons: [Concurrency.addon], concurrency: workers })
        // idle: its lanes have polled and found nothing
        yield* Effect.sleep("500 millis")
        return yield* Effect.promise(() => use(publisher))
      })
    ).pipe(Effect.provide(env(url, [pickupHandler(signals)], workers * 2 + 4)))
  )

/** Pickup latency on an idle worker: `Publisher.enqueue` of a keyless job, to its handler's start. */
export const pickup = (url: string, spec: PickupSpec): Promise<PickupResult> => {
  const signals = new Signals()
  return idleWorker(url, spec.workers, signals, (publisher) => measurePickups(spec, signals, (k) => Effect.runPromise(publisher.enqueue(PickupJob, { k }))))
}

/** A Wait job's start after its key frees: jobs A and B of key `k`, `Semaphore(k, 1, "Wait")` each. */
export const handoff = (url: string, spec: HandoffSpec): Promise<PickupResult> => {
  const signals = new Signals()
  return idleWorker(url, spec.workers, signals, (publisher) =>
    measureHandoffs(spec, signals, (k, role) =>
      Effect.runPromise(
        publisher.enqueue(PickupJob, { k, role, key: "k", ...(role === "A" ? { holdMs: spec.holds[k]! } : {}) }, JobParameters.make().withSemaphore("k", 1, "Wait"))
      )
    )
  )
}
