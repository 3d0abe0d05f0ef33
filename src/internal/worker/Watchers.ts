/**
 * The worker's background fibers besides its lanes: the heartbeat that renews the leases of the jobs it
 * holds (and its entry in the store's worker registry), and the watch for operators' cancels.
 *
 * @since 0.3.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import { hostname } from "node:os"
import type { JobStoreService, ReportedJob } from "../store/JobStore.js"
import type { WorkerState } from "./WorkerState.js"

/** This worker's entry in the store's registry (`JobStoreService.workers`), renewed with each heartbeat. */
const report = (store: JobStoreService, state: WorkerState) =>
  Effect.suspend(() => {
    const outage = state.health.lastOutage()
    const held = new Map<string, { held: number; jobs: Array<ReportedJob> }>()
    for (const [id, key] of state.runningKeys) {
      const entry = held.get(key) ?? { held: 0, jobs: [] }
      entry.held++
      const unstamped = state.unstamped.get(id)
      if (unstamped !== undefined) entry.jobs.push({ id, ...unstamped })
      held.set(key, entry)
    }
    return store.reportWorker({
      slots: [...held]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([key, e]) => ({ key, held: e.held, ...(e.jobs.length === 0 ? {} : { jobs: e.jobs }) })),
      workerId: state.config.workerId,
      host: hostname(),
      pid: process.pid,
      lanes: state.config.lanes,
      inFlight: state.inFlight.size,
      heartbeatMs: state.config.heartbeatMs,
      lastOutage: outage === undefined ? undefined : { ms: outage.ms, endedAt: new Date(outage.endedAt) }
    })
  }).pipe(state.health.observe, Effect.catch((e) => Effect.logDebug("worker registry report failed", e)))

/** Renews the leases of the jobs in flight every third of the lease; a failed renewal is retried until the store answers. */
export const heartbeat = (store: JobStoreService, state: WorkerState): Effect.Effect<unknown, unknown> =>
  Effect.suspend(() => {
    const { inFlight, leaseUntil, config } = state
    const ids = [...inFlight]
    return Effect.flatMap(Clock.currentTimeMillis, (started) =>
      state.health.retrying(store.heartbeat(config.workerId, ids, config.lease)).pipe(
        Effect.tap(() =>
          Effect.sync(() => {
            for (const id of ids) if (inFlight.has(id)) leaseUntil.set(id, started + config.leaseMs)
            for (const id of leaseUntil.keys()) if (!inFlight.has(id)) leaseUntil.delete(id)
          })
        ),
        Effect.andThen(report(store, state))
      )
    )
  }).pipe(Effect.repeat(Schedule.spaced(Duration.millis(state.config.heartbeatMs))))

/**
 * Reports to the registry soon after a handler starts holding a key its row does not carry yet
 * (`WorkerState.reportSoon`): asks that come within 50 ms of each other share one report.
 */
export const reportSoon = (store: JobStoreService, state: WorkerState): Effect.Effect<never> =>
  Queue.take(state.reportSoon).pipe(
    Effect.andThen(Effect.sleep("50 millis")),
    Effect.andThen(report(store, state)),
    Effect.forever
  )

/** Learns of the cancels asked for jobs this worker holds (only while it holds some), and signals their handlers. */
export const cancelWatch = (store: JobStoreService, state: WorkerState): Effect.Effect<unknown> =>
  Effect.suspend(() => {
    const { cancelAsked, inFlight } = state
    for (const id of cancelAsked.keys()) if (!inFlight.has(id)) cancelAsked.delete(id)
    const ids = [...inFlight]
    if (ids.length === 0) return Effect.void
    return store.cancelRequests(state.config.workerId, ids).pipe(
      Effect.flatMap((asked) =>
        Effect.forEach(asked, ({ cause, id }) =>
          Effect.suspend(() => {
            if (!inFlight.has(id) || cancelAsked.has(id)) return Effect.void
            cancelAsked.set(id, cause)
            const signal = state.cancelSignals.get(id)
            return Effect.andThen(Effect.logInfo(`cancel of ${id}: ${cause}`), signal === undefined ? Effect.void : signal(cause))
          })
        )
      ),
      // the store is out of reach: the heartbeat and the finalize report it; asked again at the next tick
      Effect.catch(() => Effect.void)
    )
  }).pipe(Effect.repeat(Schedule.spaced(state.config.cancelCheck)))
