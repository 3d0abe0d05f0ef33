import * as Layer from "effect/Layer"
import { SemaphoreProviderPg } from "warp-effect"
import { ProviderContract } from "warp-effect/testing/vitest"
import { sharedDatabase } from "./pg.js"

const db = sharedDatabase()

ProviderContract.suite("postgres (one connection per held slot)", () =>
  SemaphoreProviderPg.layer().pipe(Layer.provide(db.pool(40)))
)

ProviderContract.suite("postgres (multiplexed on 2 connections)", () =>
  SemaphoreProviderPg.layer({ multiplex: { connections: 2 } }).pipe(Layer.provide(db.pool(4)))
)
