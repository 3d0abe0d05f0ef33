/**
 * `warp-effect/redis`: a `SemaphoreProvider` on Redis (leased slots). Needs the optional peer
 * `ioredis`; without it, `SemaphoreProviderRedis.layer` fails with `MissingPeerDependency`.
 *
 * @since 0.1.0
 */

/**
 * The Redis semaphore provider.
 *
 * @since 0.1.0
 * @category providers
 */
export * as SemaphoreProviderRedis from "./internal/semaphore/SemaphoreProviderRedis.js"
