/**
 * The `SemaphoreProvider` contract suite, for vitest: run it against your own provider.
 *
 * @since 0.1.0
 */
import * as internal from "../internal/testing/ProviderContract.js"

/**
 * Options of {@link suite}.
 *
 * @since 0.1.0
 * @category models
 */
export type SuiteOptions = internal.SuiteOptions

/**
 * Registers the contract tests (`describe`/`it`) for the provider built by `makeLayer`.
 *
 * @since 0.1.0
 * @category testing
 */
export const suite = internal.suite
