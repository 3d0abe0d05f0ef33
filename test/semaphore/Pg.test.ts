import * as Layer from "effect/Layer"
import * as SemaphoreProviderPg from "../../src/internal/semaphore/SemaphoreProviderPg.js"
import * as ProviderContract from "../../src/internal/testing/ProviderContract.js"
import { sharedDatabase } from "./pg.js"

const db = sharedDatabase()

ProviderContract.suite("postgres (one connection per held slot)", () =>
  SemaphoreProviderPg.layer().pipe(Layer.provide(db.pool(40)))
)

ProviderContract.suite("postgres (multiplexed on 2 connections)", () =>
  SemaphoreProviderPg.layer({ multiplex: { connections: 2 } }).pipe(Layer.provide(db.pool(4)))
)
