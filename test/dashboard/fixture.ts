/**
 * Shared setup of the dashboard suites: an application environment (store, registry, publisher,
 * with or without the concurrency addon), seeded with jobs in every state by a real worker, and
 * dashboards served from it on ephemeral loopback ports.
 */
import * as SqlClient from "effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as HttpServerError from "effect/http/HttpServerError"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  Concurrency,
  Contract,
  Handler,
  JobParameters,
  JobStoreMemory,
  Mutex,
  Publisher,
  Registry,
  Semaphore,
  SemaphoreProviderMemory,
  Worker
} from "warp-effect"
import { Dashboard } from "warp-effect/dashboard"
import { ConcurrencyLimitManager } from "../../src/internal/concurrency/ConcurrencyLimitManager.js"
import { SemaphoreProvider } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { drained } from "../support/runtime.js"
import { pgWorkerEnv } from "../support/env.js"

/** Text that must never reach a page unescaped. */
export const hostile = "<script>alert(1)</script>"
/** How it must appear instead. */
export const hostileEscaped = "&lt;script&gt;alert(1)&lt;/script&gt;"

export const ChargeCard = Contract.job("ChargeCard", Schema.Struct({ invoice: Schema.Number, customer: Schema.String }), {
  policy: [Semaphore("payment-api", 2)]
})
export const RefreshCache = Contract.job("RefreshCache", Schema.Struct({ region: Schema.String }), { policy: [Mutex("cache-refresh")] })
export const SyncLedger = Contract.job("SyncLedger", Schema.Struct({ account: Schema.String }))
export const Hostile = Contract.job(hostile, Schema.Struct({ note: Schema.String }))

const handlers = [
  Handler.job(ChargeCard, () => Effect.sleep("25 millis")),
  Handler.job(RefreshCache, () => Effect.sleep("60 millis")),
  Handler.job(SyncLedger, ({ account }) => Effect.fail(new Error(`ledger ${account} is locked`))),
  Handler.job(Hostile, () => Effect.void)
] as const

/** What the seed produced. */
export interface Seeded {
  /** A ChargeCard job that ran, stamped with the contract's Semaphore("payment-api", 2) (the most requeued one). */
  readonly charge: string
  /** The job whose type, payload and concurrency key are {@link hostile}. */
  readonly hostileJob: string
  /** Every job id. */
  readonly all: ReadonlyArray<string>
}

/** The services the dashboard suites use. */
export type Env = JobStore | Publisher.Publisher | Registry.Registry

/** Enqueues work, runs a worker until it drains, then leaves a few jobs Enqueued and one Scheduled. */
export const seed: Effect.Effect<Seeded, unknown, Env> = Effect.gen(function* () {
  const p = yield* Publisher.Publisher
  const charges = yield* Effect.forEach(Array.from({ length: 8 }, (_, i) => i), (i) => p.enqueue(ChargeCard, { invoice: 1000 + i, customer: `c-${i % 3}` }))
  const caches = yield* Effect.forEach(["eu", "us", "ap", "eu"], (region) => p.enqueue(RefreshCache, { region }))
  const ledgers = yield* Effect.forEach(["acme", "globex"], (account) => p.enqueue(SyncLedger, { account }))
  const hostileJob = yield* p.enqueue(Hostile, { note: hostile }, JobParameters.make().withSemaphore(hostile, 2))
  // the concurrency addon runs with the app's limits and provider where the app has them (the PostgreSQL
  // app); the memory app's worker gets in-memory ones of its own, so its dashboard still has no limits
  // manager (a worker without the addon refuses the contracts' Mutex / Semaphore)
  const manager = yield* Effect.serviceOption(ConcurrencyLimitManager)
  const provider = yield* Effect.serviceOption(SemaphoreProvider)
  const options = { concurrency: 4, pollInterval: "10 millis", addons: [Concurrency.addon] } as const
  const worker =
    Option.isSome(manager) && Option.isSome(provider)
      ? Worker.make(options).pipe(
          Effect.provideService(ConcurrencyLimitManager, manager.value),
          Effect.provideService(SemaphoreProvider, provider.value)
        )
      : Worker.make(options).pipe(Effect.provide(Layer.merge(Concurrency.layerMemoryLimits, SemaphoreProviderMemory.layer)))
  yield* Effect.scoped(Effect.andThen(worker, drained(30_000)))
  const waiting = yield* Effect.forEach([1, 2], (i) => p.enqueue(ChargeCard, { invoice: 2000 + i, customer: "c-late" }))
  const later = yield* p.schedule(ChargeCard, { invoice: 3000, customer: "c-tomorrow" }, new Date(Date.now() + 86_400_000))
  // the ChargeCard with the most requeues (there usually are some: 2 slots, 4 worker fibers)
  const store = yield* JobStore
  const requeues = yield* Effect.forEach(charges, (id) =>
    Effect.map(store.get(id), (d) => (d._tag === "Some" ? d.value.logs.filter((l) => l.kind === "Requeued").length : 0))
  )
  const charge = charges[requeues.indexOf(Math.max(...requeues))]!
  return { charge, hostileJob, all: [...charges, ...caches, ...ledgers, hostileJob, ...waiting, later] }
})

/** The services of {@link pgWithAddon}. */
export type PgEnv = Env | ConcurrencyLimitManager | SqlClient.SqlClient

/** The app on PostgreSQL with the concurrency addon (a fresh database). */
export const pgWithAddon = (): Layer.Layer<PgEnv, unknown> => pgWorkerEnv(handlers, 20)

/** The app in memory without the concurrency addon. */
export const memoryWithoutAddon = (): Layer.Layer<Env> =>
  Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers })),
    Layer.provideMerge(SemaphoreProviderMemory.layer),
    Layer.provideMerge(JobStoreMemory.layer)
  ) as Layer.Layer<Env>

/** A built environment: its context, a runner, and its disposal. */
export interface App<R> {
  readonly context: Context.Context<R>
  readonly run: <A, E>(effect: Effect.Effect<A, E, R>) => Promise<A>
  readonly seeded: Seeded
  readonly dispose: () => Promise<void>
}

/** Builds an environment and seeds it. */
export const startApp = async <R>(layer: Layer.Layer<R, unknown>): Promise<App<R>> => {
  const runtime = ManagedRuntime.make(layer)
  const context = await runtime.runPromise(Effect.context<R>())
  const seeded = await runtime.runPromise(seed as Effect.Effect<Seeded, unknown, R>)
  return { context, run: (e) => runtime.runPromise(e), seeded, dispose: () => runtime.dispose() }
}

/** A dashboard served on an ephemeral loopback port over an environment's context. */
export const serve = async <R>(
  app: App<R>,
  options: Dashboard.ServeOptions = {}
): Promise<{ readonly url: string; readonly origin: string; readonly close: () => Promise<void> }> => {
  const runtime = ManagedRuntime.make(
    Dashboard.layer({ host: "127.0.0.1", port: 0, ...options }).pipe(Layer.provide(Layer.succeedContext(app.context))) as Layer.Layer<
      Dashboard.DashboardServer,
      HttpServerError.ServeError
    >
  )
  const url = await runtime.runPromise(Dashboard.url)
  return { url, origin: new URL(url).origin, close: () => runtime.dispose() }
}

/** The admin rows, read straight from the table. */
export const limitRows = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ key: string; slots: number }>`SELECT key, slots FROM warp_concurrency_limits ORDER BY key`
).pipe(Effect.map((rows) => rows.map((r) => ({ key: r.key, slots: Number(r.slots) }))))

export { ConcurrencyLimitManager }
export { JobStore as JobStoreTag } from "../../src/internal/store/JobStore.js"
