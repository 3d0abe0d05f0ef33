/**
 * `warp-effect/testing/vitest`: the vitest-bound part of the test kit, the `SemaphoreProvider`
 * contract suite. It imports `vitest` and `@effect/vitest` (optional peer dependencies), so it lives
 * on its own subpath and `warp-effect/testing` loads without them.
 *
 * @since 0.2.0
 * @module warp-effect/testing/vitest
 */

/**
 * The `SemaphoreProvider` contract suite, for vitest: `ProviderContract.suite(name, () => layer)`.
 *
 * @since 0.1.0
 * @category modules
 */
export * as ProviderContract from "./ProviderContract.js"
