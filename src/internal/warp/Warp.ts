/**
 * The entry Layer: one call composes the store, the registry, the publisher, the worker (with the
 * concurrency addon and, on request, the rate-limit and circuit-breaker addons), admin limits, global
 * defaults and the recurring-job scheduler. Its type names what it needs from you: a `SqlClient` (for
 * `layer`), the services your handlers require, and whatever your own `SemaphoreProvider` Layer needs.
 *
 * @since 0.2.0
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Layer from "effect/Layer"
import * as CircuitBreakerAddon from "../circuitbreaker/CircuitBreakerAddon.js"
import type { CircuitBreakerState } from "../circuitbreaker/CircuitBreakerState.js"
import * as Concurrency from "../concurrency/ConcurrencyAddon.js"
import type { ConcurrencyLimitManager, LimitStoreError } from "../concurrency/ConcurrencyLimitManager.js"
import type { AnyHandler, Requirements } from "../job/Handler.js"
import type { Addon } from "../attempt/Pipeline.js"
import * as Publisher from "../publisher/Publisher.js"
import type { Recurring } from "../job/Recurring.js"
import * as Registry from "../job/Registry.js"
import * as Scheduler from "../publisher/Scheduler.js"
import * as Worker from "../worker/Worker.js"
import type * as Declaration from "../policy/Declaration.js"
import type { UnenforcedPolicy } from "../policy/Enforcement.js"
import type { InvalidArgument } from "../error/InvalidArgument.js"
import * as GlobalPolicies from "../policy/GlobalPolicies.js"
import * as RateLimitAddon from "../ratelimit/RateLimitAddon.js"
import type { RateLimiter } from "../ratelimit/RateLimiter.js"
import type { SemaphoreProvider } from "../semaphore/SemaphoreProvider.js"
import * as SemaphoreProviderMemory from "../semaphore/SemaphoreProviderMemory.js"
import * as SemaphoreProviderPg from "../semaphore/SemaphoreProviderPg.js"
import type { JobStore } from "../store/JobStore.js"
import * as JobStoreMemory from "../store/JobStoreMemory.js"
import * as JobStorePg from "../store/JobStorePg.js"
import type { StoreError } from "../store/StoreError.js"

/** Options of {@link layer} and {@link layerMemory}. */
export interface WarpOptions<H extends ReadonlyArray<AnyHandler>, E = never, R = never> {
  /** The handlers this process runs (and whose contracts its publisher resolves). */
  readonly handlers: H
  /** Recurring (cron) registrations, fired by the scheduler when {@link WarpOptions.worker} is on. */
  readonly recurring?: ReadonlyArray<Recurring> | undefined
  /**
   * The worker's options, or `false` for a process that only publishes (no worker, no scheduler).
   * Default: a worker with the defaults of `Worker.make`.
   */
  readonly worker?: false | Omit<Worker.WorkerOptions, "addons"> | undefined
  /** Global defaults (the fourth rung: Retry, Timeout, CircuitBreaker), changeable at run time through `GlobalPolicies`. */
  readonly globals?: ReadonlyArray<Declaration.Declaration> | undefined
  /**
   * The `SemaphoreProvider` of the concurrency addon. Default: PostgreSQL advisory locks on the same
   * database (`SemaphoreProviderPg.layer()` for {@link layer}, the in-memory provider for
   * {@link layerMemory}).
   */
  readonly semaphoreProvider?: Layer.Layer<SemaphoreProvider, E, R> | undefined
  /** Options of the default PostgreSQL provider (ignored with {@link WarpOptions.semaphoreProvider}). */
  readonly semaphore?: SemaphoreProviderPg.PgProviderOptions | undefined
  /** Turns on the rate-limit addon (windows shared through the store's database). Default off. */
  readonly rateLimit?: boolean | undefined
  /** Turns on the circuit-breaker addon (breakers shared through the store's database). Default off. */
  readonly circuitBreaker?: boolean | undefined
  /** Run the core and concurrency migrations when the Layer is built (default true). */
  readonly migrate?: boolean | undefined
  /**
   * Run the worker's claim and finalizing writes as named prepared statements (default true); turn off
   * behind a connection pooler in transaction mode that cannot keep prepared statements.
   */
  readonly preparedStatements?: boolean | undefined
}

/** What the entry Layer provides. */
export type Services = Publisher.Publisher | Registry.Registry | JobStore | ConcurrencyLimitManager | SemaphoreProvider | GlobalPolicies.GlobalPolicies

/**
 * How building the entry Layer can fail: the store or the admin limits cannot be reached or migrated, or
 * a handler declares a policy that the worker's addons do not enforce (`UnenforcedPolicy`: a `RateLimit`
 * or `CircuitBreaker` without `rateLimit: true` / `circuitBreaker: true`), or the worker's or a
 * contract's `retention` cannot be honoured (`InvalidArgument`).
 */
export type BuildError = StoreError | LimitStoreError | UnenforcedPolicy | InvalidArgument

const addonsOf = (options: { readonly rateLimit?: boolean | undefined; readonly circuitBreaker?: boolean | undefined }) => {
  const addons: Array<Addon<SemaphoreProvider | ConcurrencyLimitManager | RateLimiter | CircuitBreakerState | JobStore>> = [Concurrency.addon]
  if (options.circuitBreaker === true) addons.push(CircuitBreakerAddon.addon)
  if (options.rateLimit === true) addons.push(RateLimitAddon.addon)
  return addons
}

/**
 * Warp on PostgreSQL over the `SqlClient` in context (e.g. `Database.layerFromEnv("DATABASE_URL")` or
 * `PgClient.layer`): store, registry, publisher, worker with the concurrency addon, admin limits,
 * global defaults and the scheduler of recurring jobs. Migrations run when it is built (unless
 * `migrate: false`). Closing it stops the worker gracefully.
 *
 * @example
 * const WarpLive = Warp.layer({ handlers: [sendInvoice], worker: { concurrency: 8 } }).pipe(
 *   Layer.provide(Database.layerFromEnv("DATABASE_URL"))
 * )
 */
export const layer = <const H extends ReadonlyArray<AnyHandler>, E = never, R = never>(
  options: WarpOptions<H, E, R>
): Layer.Layer<Services, BuildError | E, SqlClient.SqlClient | Requirements<H[number]> | R> => {
  const store = JobStorePg.layerWith({ migrate: options.migrate, preparedStatements: options.preparedStatements })
  const limits = options.migrate === false ? Concurrency.layerWithoutMigrations : Concurrency.layer
  const provider: Layer.Layer<SemaphoreProvider, E, SqlClient.SqlClient | R> =
    options.semaphoreProvider ?? SemaphoreProviderPg.layer(options.semaphore)
  return compose(options, Layer.mergeAll(store, limits, provider), Layer.merge(RateLimitAddon.layer, CircuitBreakerAddon.layer))
}

/**
 * Warp in memory (one process; tests, demos): the in-memory store, admin limits and semaphore
 * provider (or yours), with the same publisher, worker and addons as {@link layer}.
 */
export const layerMemory = <const H extends ReadonlyArray<AnyHandler>, E = never, R = never>(
  options: WarpOptions<H, E, R>
): Layer.Layer<Services, E | UnenforcedPolicy | InvalidArgument, Requirements<H[number]> | R> => {
  const provider: Layer.Layer<SemaphoreProvider, E, R> = options.semaphoreProvider ?? SemaphoreProviderMemory.layer
  return compose(
    options,
    Layer.mergeAll(JobStoreMemory.layer, Concurrency.layerMemoryLimits, provider),
    Layer.merge(RateLimitAddon.layerMemory, CircuitBreakerAddon.layerMemory)
  )
}

const compose = <H extends ReadonlyArray<AnyHandler>, E, R, E2, R2, R3>(
  options: WarpOptions<H, E, R>,
  infra: Layer.Layer<JobStore | ConcurrencyLimitManager | SemaphoreProvider, E2, R2>,
  addonState: Layer.Layer<RateLimiter | CircuitBreakerState, never, R3>
): Layer.Layer<Services, E2 | UnenforcedPolicy | InvalidArgument, R2 | R3 | Requirements<H[number]>> => {
  const registry = Registry.layer({ handlers: options.handlers, recurring: options.recurring ?? [] })
  const shared = Layer.mergeAll(registry, GlobalPolicies.layer(options.globals ?? []), infra)
  const processes: Layer.Layer<never, UnenforcedPolicy | InvalidArgument, JobStore | Registry.Registry | SemaphoreProvider | ConcurrencyLimitManager | R3> =
    options.worker === false
      ? Layer.empty
      : Layer.merge(
          Worker.layer({ ...options.worker, addons: addonsOf(options) }),
          (options.recurring ?? []).length > 0 ? Scheduler.layer : Layer.empty
        ).pipe(Layer.provide(addonState))
  return Layer.merge(Publisher.layer, processes).pipe(Layer.provideMerge(shared))
}
