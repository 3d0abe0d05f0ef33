/**
 * Schema migrations, run by @effect/sql's Migrator from the files in `migrations/<set>/`
 * (`NNNN_name.ts`, default export an Effect). The core runtime and the concurrency addon keep
 * separate migration tables, so the addon's schema arrives only when the addon is registered.
 *
 * @since 0.1.0
 */
import * as Migrator from "@effect/sql/Migrator"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Effect from "effect/Effect"
import { readdirSync } from "node:fs"
import { fileURLToPath, pathToFileURL } from "node:url"

/** The migration files of one set, imported from this module (so TypeScript loaders apply). */
const loader = (set: string): Migrator.Loader => {
  const dir = fileURLToPath(new URL(`../../migrations/${set}/`, import.meta.url))
  const files = readdirSync(dir).filter((f) => /^\d+_[^.]+\.(ts|js)$/.test(f))
  return Migrator.fromGlob(Object.fromEntries(files.map((f) => [f, () => import(pathToFileURL(`${dir}${f}`).href)])))
}

const run = (set: string, table: string) => Migrator.make({})({ loader: loader(set), table })

/** A migration run's result: the migrations applied now. */
export type MigrationRun = Effect.Effect<ReadonlyArray<readonly [number, string]>, Migrator.MigrationError | SqlError, SqlClient.SqlClient>

/** Creates or upgrades the core tables (`warp_jobs`, `warp_job_logs`, `warp_counters`). */
export const core: MigrationRun = run("core", "warp_migrations")

/** Creates or upgrades the concurrency addon's tables (`warp_concurrency_limits`). */
export const concurrency: MigrationRun = run("concurrency", "warp_concurrency_migrations")
