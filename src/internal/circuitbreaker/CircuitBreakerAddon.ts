/**
 * Registration of the circuit-breaker addon. A worker without it refuses handlers, contracts and global
 * defaults that declare a breaker (`UnenforcedPolicy`) and fails jobs that carry one.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as SqlClient from "effect/sql/SqlClient"
import { type Addon, order } from "../attempt/Pipeline.js"
import * as CircuitBreakerBehavior from "./CircuitBreakerBehavior.js"
import { CircuitBreakerState, layerMemory as stateMemory, layerPg as statePg } from "./CircuitBreakerState.js"

/** The addon: hand it to the worker (`addons: [CircuitBreakerAddon.addon]`); it needs a `CircuitBreakerState`. */
export const addon: Addon<CircuitBreakerState> = {
  name: "circuitBreaker",
  enforces: ["circuitBreaker"],
  order: order.circuitBreaker,
  behavior: Effect.map(CircuitBreakerState, CircuitBreakerBehavior.make)
}

/** The addon on PostgreSQL: every worker on the database shares each group's breaker. */
export const layer: Layer.Layer<CircuitBreakerState, never, SqlClient.SqlClient> = statePg

/** The addon with in-process breakers (one process, tests). */
export const layerMemory: Layer.Layer<CircuitBreakerState> = stateMemory
