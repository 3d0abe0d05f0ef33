import * as Layer from "effect/Layer"
import { Concurrency, type Handler, JobStorePg, Publisher, Registry, SemaphoreProviderPg } from "warp-effect"
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
