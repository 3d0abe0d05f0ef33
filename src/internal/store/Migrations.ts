/**
 * Schema migrations, run by @effect/sql's Migrator. The schema lives in `migrations/<set>/`
 * (`NNNN_name.ts`, default export an Effect); the files are imported statically here and handed to
 * `Migrator.fromRecord`, so nothing reads the filesystem and a bundler sees every migration. The core
 * runtime and the concurrency addon keep separate migration tables, so the addon's schema arrives only
 * when the addon is registered.
 *
 * @since 0.1.0
 */
import * as Migrator from "effect/sql/Migrator"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type * as Effect from "effect/Effect"
import concurrency0001 from "../../../migrations/concurrency/0001_warp_concurrency_limits.js"
import concurrency0002 from "../../../migrations/concurrency/0002_warp_concurrency_limits_expiry.js"
import concurrency0003 from "../../../migrations/concurrency/0003_warp_concurrency_group_limits.js"
import core0001 from "../../../migrations/core/0001_warp_jobs.js"
import core0002 from "../../../migrations/core/0002_warp_policy_state.js"
import core0003 from "../../../migrations/core/0003_warp_jobs_fifo.js"
import core0004 from "../../../migrations/core/0004_warp_jobs_origin.js"
import core0005 from "../../../migrations/core/0005_warp_counters_shards.js"
import core0006 from "../../../migrations/core/0006_warp_cancel_workers.js"
import core0007 from "../../../migrations/core/0007_warp_jobs_key_insight.js"
import core0008 from "../../../migrations/core/0008_warp_workers_application_name.js"
import core0009 from "../../../migrations/core/0009_warp_slot_audit.js"
import core0010 from "../../../migrations/core/0010_warp_jobs_fair_share.js"
import core0011 from "../../../migrations/core/0011_warp_jobs_drop_due.js"
import core0012 from "../../../migrations/core/0012_warp_counters_from_logs.js"
import core0013 from "../../../migrations/core/0013_warp_retention.js"
import core0014 from "../../../migrations/core/0014_warp_jobs_priority.js"
import core0015 from "../../../migrations/core/0015_warp_jobs_job_key.js"

const run = (migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>>, table: string) =>
  Migrator.make({})({ loader: Migrator.fromRecord(migrations), table })

/** A migration run's result: the migrations applied now. */
export type MigrationRun = Effect.Effect<ReadonlyArray<readonly [number, string]>, Migrator.MigrationError | SqlError, SqlClient.SqlClient>

/** The core migrations by name, in order (`core` runs them). */
export const coreMigrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_warp_jobs": core0001,
  "0002_warp_policy_state": core0002,
  "0003_warp_jobs_fifo": core0003,
  "0004_warp_jobs_origin": core0004,
  "0005_warp_counters_shards": core0005,
  "0006_warp_cancel_workers": core0006,
  "0007_warp_jobs_key_insight": core0007,
  "0008_warp_workers_application_name": core0008,
  "0009_warp_slot_audit": core0009,
  "0010_warp_jobs_fair_share": core0010,
  "0011_warp_jobs_drop_due": core0011,
  "0012_warp_counters_from_logs": core0012,
  "0013_warp_retention": core0013,
  "0014_warp_jobs_priority": core0014,
  "0015_warp_jobs_job_key": core0015
}

/**
 * Creates or upgrades the core tables (`warp_jobs`, `warp_job_logs`, `warp_counters`, `warp_counters_rolled`,
 * `warp_workers`, `warp_slot_audit`, `warp_job_tombstones`, `warp_key_history`).
 */
export const core: MigrationRun = run(coreMigrations, "warp_migrations")

/**
 * Creates or upgrades the concurrency addon's tables (`warp_concurrency_limits`, with `expires_at` from
 * 0002; `warp_concurrency_group_limits`, the total caps' overrides, from 0003).
 */
export const concurrency: MigrationRun = run(
  {
    "0001_warp_concurrency_limits": concurrency0001,
    "0002_warp_concurrency_limits_expiry": concurrency0002,
    "0003_warp_concurrency_group_limits": concurrency0003
  },
  "warp_concurrency_migrations"
)
