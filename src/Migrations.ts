/**
 * The SQL migrations, for applications that migrate on their own (with the `...WithoutMigrations` Layers).
 *
 * @since 0.1.0
 */
import * as internal from "./internal/store/Migrations.js"

/**
 * A migration run's result: the migrations applied now.
 *
 * @since 0.1.0
 * @category models
 */
export type MigrationRun = internal.MigrationRun

/**
 * Creates or upgrades the core tables (`warp_jobs`, `warp_job_logs`, `warp_counters` and the view
 * `warp_counter_totals`, …).
 *
 * @since 0.1.0
 * @category migrations
 */
export const core = internal.core

/**
 * Creates or upgrades the concurrency addon's table (`warp_concurrency_limits`).
 *
 * @since 0.1.0
 * @category migrations
 */
export const concurrency = internal.concurrency
