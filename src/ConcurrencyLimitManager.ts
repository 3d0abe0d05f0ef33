/**
 * Admin overrides of concurrency limits: sticky rows (`warp_concurrency_limits`); precedence admin row
 * > declared limit > 1. Total caps have overrides of their own, per group
 * (`warp_concurrency_group_limits`): admin row > declared `total.limit`.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/concurrency/ConcurrencyLimitManager.js"

/**
 * One admin override.
 *
 * @since 0.1.0
 * @category models
 */
export const ConcurrencyLimit = internal.ConcurrencyLimit

/**
 * One admin override.
 *
 * @since 0.1.0
 * @category models
 */
export type ConcurrencyLimit = internal.ConcurrencyLimit

/**
 * One admin override of a total cap: the limit in force for a group (the `group` of
 * `total: { group, limit }` declarations) instead of the declared `limit`.
 *
 * @since 0.3.0
 * @category models
 */
export const ConcurrencyGroupLimit = internal.ConcurrencyGroupLimit

/**
 * One admin override of a total cap.
 *
 * @since 0.3.0
 * @category models
 */
export type ConcurrencyGroupLimit = internal.ConcurrencyGroupLimit

/**
 * How long an override applies: `expiresAt` (an instant) or `expiresIn` (a duration from the write, on
 * the storage's clock); neither = sticky until removed. An expired override is ignored by the claim,
 * `get` and `list` (not returned), and purged lazily.
 *
 * @since 0.3.0
 * @category models
 */
export type LimitExpiry = internal.LimitExpiry

/**
 * The limit table could not be read or written.
 *
 * @since 0.1.0
 * @category errors
 */
export const LimitStoreError = internal.LimitStoreError

/**
 * The limit table could not be read or written.
 *
 * @since 0.1.0
 * @category errors
 */
export type LimitStoreError = internal.LimitStoreError

/**
 * The admin limit operations: set, clear, get, list.
 *
 * @since 0.1.0
 * @category models
 */
export type ConcurrencyLimitManagerService = internal.ConcurrencyLimitManagerService

/**
 * The admin limit service tag.
 *
 * @since 0.1.0
 * @category services
 */
export const ConcurrencyLimitManager = internal.ConcurrencyLimitManager

/**
 * The admin limit service tag.
 *
 * @since 0.1.0
 * @category services
 */
export type ConcurrencyLimitManager = internal.ConcurrencyLimitManager

/**
 * In-memory overrides.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = internal.layerMemory

/**
 * PostgreSQL overrides; runs the concurrency addon's migration when built.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPg = internal.layerPg

/**
 * PostgreSQL overrides without running the migration (when the app migrates on its own).
 *
 * @since 0.2.0
 * @category layers
 */
export const layerPgWithoutMigrations = internal.layerPgWithoutMigrations
