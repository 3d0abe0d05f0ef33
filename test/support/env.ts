import * as Layer from "effect/Layer"
import * as Concurrency from "../../src/internal/concurrency/ConcurrencyAddon.js"
import type * as Handler from "../../src/internal/job/Handler.js"
import * as Publisher from "../../src/internal/job/Publisher.js"
import * as Registry from "../../src/internal/job/Registry.js"
import * as SemaphoreProviderPg from "../../src/internal/semaphore/SemaphoreProviderPg.js"
import * as JobStorePg from "../../src/internal/store/JobStorePg.js"
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
