/**
 * The vitest-bound part of the test kit: the `SemaphoreProvider` contract suite. It imports
 * `vitest` and `@effect/vitest` (optional peer dependencies), so it lives on its own subpath and
 * `warp-effect/testing` loads without them.
 *
 * @since 0.2.0
 */

/**
 * The `SemaphoreProvider` contract suite, for vitest: `ProviderContract.suite(name, () => layer)`.
 *
 * @since 0.2.0
 * @category provider contract
 */
export * as ProviderContract from "../internal/testing/ProviderContract.js"
