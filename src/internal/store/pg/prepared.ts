/**
 * The worker's hot statements (the claim, the finalizing writes) as prepared statements. Unnamed, the
 * claim statement spent more time being planned than run (on PostgreSQL 15, 2 CPUs, 8 lanes: a median
 * of 4.4 ms to bind and plan, 1.6 ms to execute, for every claim; see bench/README.md).
 *
 * @effect/sql-pg prepares every statement by default and keeps the prepared statements of each
 * connection in a cache of its own (`PgClientConfig.prepare`, `preparedStatementCacheSize`), re-preparing
 * one a migration made stale; so a statement here runs as any other, on the `SqlClient` in context
 * (inside the caller's transaction, it joins it). `preparedStatements: false` in the store's options
 * (a pooler in transaction mode that cannot keep prepared statements) runs these statements unnamed;
 * behind such a pooler, set `prepare: false` on the client too, for the store's other statements.
 *
 * @since 0.3.0
 */
import type * as Effect from "effect/Effect"
import type { SqlError } from "effect/sql/SqlError"
import type * as Statement from "effect/sql/Statement"

/**
 * Runs `statement` as a prepared statement of its connection (see the module note), or unnamed when
 * `enabled` is false. Rows come back as the client returns them (no result-name transforms: the store
 * sets none).
 */
export const runPrepared = (
  statement: Statement.Statement<unknown>,
  enabled: boolean
): Effect.Effect<ReadonlyArray<any>, SqlError> => (enabled ? statement : statement.unprepared)
