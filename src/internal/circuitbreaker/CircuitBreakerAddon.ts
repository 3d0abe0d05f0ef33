/**
 * Registration of the circuit-breaker addon. Without it the runtime ignores declared breakers (they
 * are still resolved and stamped, like any family).
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { CircuitBreakerAddon } from "../job/Pipeline.js"
import * as CircuitBreakerBehavior from "./CircuitBreakerBehavior.js"
import { CircuitBreakerState, layerMemory as stateMemory, layerPg as statePg } from "./CircuitBreakerState.js"

/** The addon's behavior, on the `CircuitBreakerState` in context. */
export const layerBehavior: Layer.Layer<CircuitBreakerAddon, never, CircuitBreakerState> = Layer.effect(
  CircuitBreakerAddon,
  Effect.map(CircuitBreakerState, (state) => ({ behavior: CircuitBreakerBehavior.make(state) }))
)

/** The addon on PostgreSQL: every worker on the database shares each group's breaker. */
export const layer: Layer.Layer<CircuitBreakerAddon | CircuitBreakerState, never, SqlClient.SqlClient> = Layer.provideMerge(
  layerBehavior,
  statePg
)

/** The addon with in-process breakers (one process, tests). */
export const layerMemory: Layer.Layer<CircuitBreakerAddon | CircuitBreakerState> = Layer.provideMerge(layerBehavior, stateMemory)
