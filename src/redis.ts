/**
 * `warp-effect/redis`: a `SemaphoreProvider` on Redis (leased slots). Needs the optional peer
 * `ioredis`; without it, `SemaphoreProviderRedis.layer` fails with `MissingPeerDependency`.
 *
 * @since 0.1.0
 * @module warp-effect/redis
 */

/**
 * The Redis semaphore provider.
 *
 * @since 0.1.0
 * @category modules
 */
export * as SemaphoreProviderRedis from "./redis/SemaphoreProviderRedis.js"
export { MissingPeerDependency } from "./MissingPeerDependency.js"
