/**
 * Registration of the rate-limit addon. Without it the runtime ignores declared rate limits (they are
 * still resolved and stamped, like any family).
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { RateLimitAddon } from "../job/Pipeline.js"
import * as RateLimitBehavior from "./RateLimitBehavior.js"
import { RateLimiter, layerMemory as limiterMemory, layerPg as limiterPg } from "./RateLimiter.js"

/** The addon's behavior, on the `RateLimiter` in context. */
export const layerBehavior: Layer.Layer<RateLimitAddon, never, RateLimiter> = Layer.effect(
  RateLimitAddon,
  Effect.map(RateLimiter, (limiter) => ({ behavior: RateLimitBehavior.make(limiter) }))
)

/** The addon on PostgreSQL: windows are shared by every worker on the database. */
export const layer: Layer.Layer<RateLimitAddon | RateLimiter, never, SqlClient.SqlClient> = Layer.provideMerge(layerBehavior, limiterPg)

/** The addon with in-process windows (one process, tests). */
export const layerMemory: Layer.Layer<RateLimitAddon | RateLimiter> = Layer.provideMerge(layerBehavior, limiterMemory)
