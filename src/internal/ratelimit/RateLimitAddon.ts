/**
 * Registration of the rate-limit addon. A worker without it refuses handlers and contracts that declare
 * a rate limit (`UnenforcedPolicy`) and fails jobs enqueued with one.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as SqlClient from "effect/sql/SqlClient"
import { type Addon, order } from "../attempt/Pipeline.js"
import * as RateLimitBehavior from "./RateLimitBehavior.js"
import { RateLimiter, layerMemory as limiterMemory, layerPg as limiterPg } from "./RateLimiter.js"

/** The addon: hand it to the worker (`addons: [RateLimitAddon.addon]`); it needs a `RateLimiter`. */
export const addon: Addon<RateLimiter> = {
  name: "rateLimit",
  enforces: ["rateLimit"],
  order: order.rateLimit,
  behavior: Effect.map(RateLimiter, RateLimitBehavior.make)
}

/** The addon on PostgreSQL: windows are shared by every worker on the database. */
export const layer: Layer.Layer<RateLimiter, never, SqlClient.SqlClient> = limiterPg

/** The addon with in-process windows (one process, tests). */
export const layerMemory: Layer.Layer<RateLimiter> = limiterMemory
