import * as Layer from "effect/Layer"
import { Concurrency, type Handler, JobStoreMemory, JobStorePg, Publisher, Registry, SemaphoreProviderMemory, SemaphoreProviderPg } from "warp-effect"
import { freshPgLayer } from "./db.js"

/**
 * Publisher, registry of `handlers`, the concurrency addon on the PostgreSQL provider and the
 * PostgreSQL store, on a fresh database (`maxConnections`, default 40) dropped with the layer.
 */
export const pgWorkerEnv = (
  handlers: ReadonlyArray<Handler.JobHandler<any, any, never> | Handler.MessageHandler<any, any, never>>,
  maxConnections = 40
) =>
  Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers })),
    Layer.provideMerge(Concurrency.layer),
    Layer.provideMerge(SemaphoreProviderPg.layer()),
    Layer.provideMerge(JobStorePg.layer),
    Layer.provideMerge(freshPgLayer(maxConnections))
  )

/** Publisher, registry of `handlers`, the concurrency addon with in-memory limits, provider and store. */
export const memoryWorkerEnv = (handlers: ReadonlyArray<Handler.JobHandler<any, any, never> | Handler.MessageHandler<any, any, never>>) =>
  Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers })),
    Layer.provideMerge(Concurrency.layerMemoryLimits),
    Layer.provideMerge(SemaphoreProviderMemory.layer),
    Layer.provideMerge(JobStoreMemory.layer)
  )

/** Both worker environments, by name, for suites that run on memory and on PostgreSQL. */
export const workerEnvs = [
  ["memory", (handlers: ReadonlyArray<Handler.JobHandler<any, any, never>>) => memoryWorkerEnv(handlers)],
  ["postgres", (handlers: ReadonlyArray<Handler.JobHandler<any, any, never>>) => pgWorkerEnv(handlers)]
] as const

/**
 * The concurrency addon's PostgreSQL limits, provider (pinging every second) and store on a fresh
 * database of 30 connections, shared by the fast-check models' PostgreSQL runs (total caps, CancelRunning).
 */
export const pgModelEnv = Concurrency.layer.pipe(
  Layer.provideMerge(SemaphoreProviderPg.layer({ pingInterval: "1 second" })),
  Layer.provideMerge(JobStorePg.layer),
  Layer.provideMerge(freshPgLayer(30))
)
