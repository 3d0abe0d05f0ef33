/**
 * The worker's hot statements (the claim, the finalizing writes) as named prepared statements (see
 * `pg/Named.ts`). Unnamed, the claim statement spent more time being planned than run (on PostgreSQL
 * 15, 2 CPUs, 8 lanes: a median of 4.4 ms to bind and plan, 1.6 ms to execute, for every claim; see
 * bench/README.md).
 *
 * They run on a connection reserved from the same pool, when the client is @effect/sql-pg's (see
 * `pg/Driver.ts`). Any other `SqlClient`, a connection inside the caller's transaction, or
 * `preparedStatements: false` in the store's options (a pooler in transaction mode that cannot keep
 * prepared statements) run the statement as usual. Run this way, a statement has no @effect/sql
 * `sql.execute` span of its own (the worker's `warp.claim` and `warp.attempt` spans still cover it).
 *
 * @since 0.3.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { TransactionConnection } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import { driverOf } from "../../pg/Driver.js"
import { runNamed } from "../../pg/Named.js"

/** Clients found not to be @effect/sql-pg's: their statements run as usual, without reserving first. */
const notPg = new WeakSet<SqlClient.SqlClient>()

const failed = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })

/**
 * Runs `statement` as a named prepared statement (see the module note), or as usual where that is not
 * possible. Rows come back as the driver returns them (no result-name transforms: the store sets none).
 */
export const runPrepared = (
  sql: SqlClient.SqlClient,
  statement: Statement.Statement<unknown>,
  enabled: boolean
): Effect.Effect<ReadonlyArray<any>, SqlError> =>
  !enabled || notPg.has(sql)
    ? statement
    : Effect.flatMap(Effect.serviceOption(TransactionConnection), (inTransaction) =>
        inTransaction._tag === "Some"
          ? statement
          : Effect.flatMap(
              Effect.scoped(
                Effect.flatMap(sql.reserve, (conn) => {
                  const client = driverOf(conn)
                  if (client === undefined) {
                    notPg.add(sql)
                    return Effect.succeed(undefined)
                  }
                  const [text, values] = statement.compile()
                  // interrupted: cancelled on the server (`pg_cancel_backend`, through the pool, best effort
                  // and given up after 5 s, as @effect/sql-pg cancels its own), its reply awaited, so the
                  // connection goes back to the pool idle
                  const cancel =
                    client.processID === undefined ? Effect.void : Effect.ignore(Effect.timeout(sql`SELECT pg_cancel_backend(${client.processID})`, "5 seconds"))
                  return Effect.mapError(runNamed(client, text, values, cancel), failed)
                })
              ),
              // not @effect/sql-pg's client: the statement as usual, once the reserved connection is back
              (rows) => (rows === undefined ? statement : Effect.succeed(rows))
            )
      )
