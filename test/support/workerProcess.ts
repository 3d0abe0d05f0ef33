/**
 * A worker process for the multi-process tests and the soak:
 * `node --import tsx test/support/workerProcess.ts '<json config>'`.
 *
 * JobStorePg + SemaphoreProviderPg (or SemaphoreProviderRedis) + Concurrency.layer on the given database, running
 * {@link recordingHandler}. Prints `READY` once its worker has started. SIGTERM/SIGINT stop it
 * gracefully; SIGUSR2 interrupts its running attempts (worker restarted with a zero grace period),
 * which is the "interrupted fibers" fault of the soak.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as SqlClient from "effect/sql/SqlClient"
import { Concurrency, JobStorePg, Registry, SemaphoreProviderPg, Worker } from "warp-effect"
import { SemaphoreProviderRedis } from "warp-effect/redis"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { SemaphoreProvider, type SemaphoreProviderService, slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { recordingHandler } from "../soak/workload.js"

/** The configuration a parent passes as the first argument. */
export interface ChildConfig {
  readonly url: string
  /** Process label (also its PostgreSQL `application_name`, so a harness can find its backends). */
  readonly name: string
  readonly fibers: number
  readonly pollMs: number
  readonly leaseMs: number
  readonly pingMs: number
  /** The PostgreSQL provider's slot deadline (the provider's default, 10 s, when absent). */
  readonly slotDeadlineMs?: number
  /** The PostgreSQL provider's lock-delay (its default, on, when absent). */
  readonly lockDelay?: boolean
  readonly graceMs: number
  readonly pool: number
  /** How often the worker asks for cancels of the jobs it runs (the worker's default, 1 s, when absent). */
  readonly cancelCheckMs?: number
  /** Turn on the worker's slot reuse for Wait-mode keys (off by default). */
  readonly slotReuse?: boolean
  /** The semaphore provider: PostgreSQL advisory locks (default) or Redis leases. */
  readonly provider?: "pg" | "redis"
  /** Redis provider: server URL, key prefix and lease. */
  readonly redis?: { readonly url: string; readonly prefix: string; readonly leaseMs: number }
  /**
   * `false`: the slots this process holds never report a lapse (`Slot.lapsed` removed), so the worker's
   * check before the finalizing write is off — an ablation, to see the pause checks fail without it.
   */
  readonly lapseCheck?: boolean
  /**
   * `true`: the slots this process holds never report their loss (`Slot.lost` never completes), so a
   * handler runs on after its slot is gone — an ablation, with `lapseCheck: false` the holder that
   * notices nothing, to see the pause checks fail.
   */
  readonly ignoreSlotLoss?: boolean
}

const config = JSON.parse(process.argv[2] ?? "{}") as ChildConfig

// Installed first: a SIGUSR2 arriving while the process still starts must not kill it (the default
// action); it interrupts the attempts of the first worker instead.
let pendingInterrupts = 0
let onInterrupt: (() => void) | undefined
process.on("SIGUSR2", () => {
  if (onInterrupt === undefined) pendingInterrupts++
  else onInterrupt()
})

const sqlLayer = PgClient.layer({
  url: Redacted.make(config.url),
  maxConnections: config.pool,
  applicationName: config.name,
  idleTimeout: "30 seconds",
  connectTimeout: "5 seconds"
})

/**
 * WARP_SOAK_DIAG=1: every slot handed out is checked at once against pg_locks (which backends, of
 * which process, hold its lock), into `rel_acquired` — to tell a slot handed out without its lock
 * from a lock lost after the acquisition.
 */
const diagnosed = (inner: SemaphoreProviderService, sql: SqlClient.SqlClient): SemaphoreProviderService => ({
  tryAcquire: (name, limit, timeout) =>
    Effect.tap(inner.tryAcquire(name, limit, timeout), (slot) =>
      Option.isNone(slot)
        ? Effect.void
        : sql`
            INSERT INTO rel_acquired (proc, name, index, at, holders)
            SELECT ${config.name}, ${name}, ${slot.value.index}, clock_timestamp(),
                   (SELECT array_agg(a.application_name || '/' || l.pid) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
                      AND ((l.classid::bigint << 32) | l.objid::bigint)::text = ${lockId(slotName(name, slot.value.index))})`.pipe(Effect.ignore)
    )
})

const pgProviderOptions: SemaphoreProviderPg.PgProviderOptions = {
  pingInterval: Duration.millis(config.pingMs),
  ...(config.slotDeadlineMs === undefined ? {} : { deadline: Duration.millis(config.slotDeadlineMs) }),
  ...(config.lockDelay === undefined ? {} : { lockDelay: config.lockDelay })
}

const pgProvider =
  process.env.WARP_SOAK_DIAG === "1"
    ? Layer.effect(
        SemaphoreProvider,
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          Effect.map(SemaphoreProviderPg.make(pgProviderOptions), (inner) => diagnosed(inner, sql))
        )
      )
    : SemaphoreProviderPg.layer(pgProviderOptions)

const providerLayer =
  config.provider === "redis" && config.redis !== undefined
    ? Layer.orDie(
        SemaphoreProviderRedis.layer({
          redis: config.redis.url,
          prefix: config.redis.prefix,
          lease: `${config.redis.leaseMs} millis`,
          heartbeat: `${Math.max(1, Math.floor(config.redis.leaseMs / 4))} millis`
        })
      )
    : pgProvider

/**
 * The ablations (see `ChildConfig.lapseCheck`, `ignoreSlotLoss`): every slot handed out without
 * `lapsed`, and with `ignoreSlotLoss` a `lost` that never completes.
 */
const ablated = <E, R>(layer: Layer.Layer<SemaphoreProvider, E, R>): Layer.Layer<SemaphoreProvider, E, R> =>
  Layer.flatMap(layer, (context) => {
    const inner = Context.get(context, SemaphoreProvider)
    return Layer.succeed(SemaphoreProvider, {
      tryAcquire: (name, limit, timeout) =>
        // the slot itself, not a copy: the PostgreSQL provider's fused release is found by the slot's identity
        Effect.tap(inner.tryAcquire(name, limit, timeout), (slot) =>
          Effect.sync(() => {
            if (Option.isNone(slot)) return
            const mutable = slot.value as { lapsed?: unknown; lost: unknown }
            if (config.lapseCheck === false) mutable.lapsed = undefined
            if (config.ignoreSlotLoss === true) mutable.lost = Effect.never
          })
        )
    })
  })

const env = Registry.layer({ handlers: [recordingHandler({ proc: config.name, pid: process.pid })] }).pipe(
  Layer.provideMerge(Concurrency.layer),
  Layer.provideMerge(config.lapseCheck === false || config.ignoreSlotLoss === true ? ablated(providerLayer) : providerLayer),
  Layer.provideMerge(JobStorePg.layerWithoutMigrations),
  Layer.provideMerge(sqlLayer)
)

const main = Effect.gen(function* () {
  const restart = yield* Queue.unbounded<void>()
  onInterrupt = () => void Queue.offerUnsafe(restart, undefined)
  for (; pendingInterrupts > 0; pendingInterrupts--) onInterrupt()
  let generation = 0
  while (true) {
    yield* Effect.scoped(
      Effect.gen(function* () {
        yield* Worker.make({ addons: [Concurrency.addon],
          concurrency: config.fibers,
          pollInterval: `${config.pollMs} millis`,
          lease: `${config.leaseMs} millis`,
          gracePeriod: `${config.graceMs} millis`,
          slotReuse: config.slotReuse === true ? {} : false,
          ...(config.cancelCheckMs === undefined ? {} : { cancelCheckInterval: `${config.cancelCheckMs} millis` as const }),
          workerId: `${config.name}/${process.pid}/g${generation}`
        })
        if (generation === 0) process.stdout.write("READY\n")
        generation++
        yield* Queue.take(restart)
      })
    )
  }
})

NodeRuntime.runMain(
  main.pipe(Effect.provide(env), Effect.provideService(References.MinimumLogLevel, "Error")),
  { disableErrorReporting: false }
)
