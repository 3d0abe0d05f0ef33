/**
 * The Redis semaphore provider: one leased field of one hash per semaphore, renewed by a heartbeat.
 *
 * @since 0.1.0
 */
import * as internal from "../internal/semaphore/SemaphoreProviderRedis.js"

/**
 * Options of the Redis provider: key `prefix`, `lease`, `heartbeat`, `retryInterval`.
 *
 * @since 0.1.0
 * @category models
 */
export type RedisProviderOptions = internal.RedisProviderOptions

/**
 * Options of {@link layer}: the provider options and the connection.
 *
 * @since 0.1.0
 * @category models
 */
export type RedisLayerOptions = internal.RedisLayerOptions

/**
 * The connection of {@link layer}: a URL or ioredis options.
 *
 * @since 0.2.0
 * @category models
 */
export type RedisConnectionOptions = internal.RedisConnectionOptions

/**
 * The part of an ioredis client the provider uses (for {@link make} with your own client).
 *
 * @since 0.2.0
 * @category models
 */
export type RedisClient = internal.RedisClient

/**
 * Builds the provider on a client you own.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = internal.make

/**
 * A Redis provider Layer owning its own ioredis client (connected when built, closed with the Layer).
 * Fails with `MissingPeerDependency` when `ioredis` is not installed.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer
