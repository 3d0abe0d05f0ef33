/**
 * The worker's hot statements (the claim, the finalizing writes) as named prepared statements: each
 * connection parses and plans such a statement once and then only binds and runs it. Unnamed, the
 * claim statement spent more time being planned than run (on PostgreSQL 15, 2 CPUs, 8 lanes: a median
 * of 4.4 ms to bind and plan, 1.6 ms to execute, for every claim; see bench/README.md).
 *
 * @effect/sql-pg sends every statement unnamed, so these run on a connection reserved from the same
 * pool through the driver's own `query({ name, text, values })`, when the client is @effect/sql-pg's
 * (see `pg/Driver.ts`; `SemaphoreProviderPg` reads it too, for a connection's end). Any
 * other `SqlClient`, a connection inside the caller's transaction, or `preparedStatements: false` in
 * the store's options (a pooler in transaction mode that cannot keep prepared statements) run the
 * statement as usual. Run this way, a statement has no @effect/sql `sql.execute` span of its own (the
 * worker's `warp.claim` and `warp.attempt` spans still cover it). The name is a digest of the text, so
 * a statement whose text differs is another statement. A prepared statement the server no longer accepts ("cached plan must not change result type", after
 * a migration changed a table under a running worker) is deallocated and prepared again, once.
 *
 * @since 0.3.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { TransactionConnection } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import { type DriverClient, driverOf } from "../../pg/Driver.js"

const names = new Map<string, string>()
/** The statement's name: a digest of its text (kept for the last 256 texts). */
const nameOf = (text: string): string => {
  let name = names.get(text)
  if (name === undefined) {
    name = "warp_" + createHash("sha1").update(text).digest("hex").slice(0, 24)
    if (names.size >= 256) names.clear()
    names.set(text, name)
  }
  return name
}

/** SQLSTATE 0A000 with this text: a prepared statement whose result type changed (a table changed). */
const staleType = (e: unknown): boolean =>
  (e as { code?: unknown }).code === "0A000" && /cached plan must not change result type/.test(String((e as { message?: unknown }).message))

/**
 * The statement on `client`; interrupted, it is cancelled on the server (`pg_cancel_backend`, through
 * the pool, as @effect/sql-pg cancels its own) and its reply awaited, so the connection goes back to the
 * pool idle.
 */
const run = (sql: SqlClient.SqlClient, client: DriverClient, name: string, text: string, values: ReadonlyArray<unknown>) =>
  Effect.async<ReadonlyArray<unknown>, unknown>((resume) => {
    let settle: () => void = () => {}
    const settled = new Promise<void>((r) => (settle = r))
    client.query({ name, text, values }, (err, result) => {
      settle()
      resume(err ? Effect.fail(err) : Effect.succeed(result.rows))
    })
    return Effect.zipRight(
      // best effort, as @effect/sql-pg's own cancel (which gives up after 5 s too)
      client.processID === undefined ? Effect.void : Effect.ignore(Effect.timeout(sql`SELECT pg_cancel_backend(${client.processID})`, "5 seconds")),
      Effect.promise(() => settled)
    )
  })

/** Deallocates `name` on the server and forgets it in the driver's cache of the connection. */
const deallocate = (client: DriverClient, name: string) =>
  Effect.async<void>((resume) => {
    const parsed = (client as { connection?: { parsedStatements?: Record<string, unknown> } }).connection?.parsedStatements
    if (parsed !== undefined) delete parsed[name]
    client.query(`DEALLOCATE "${name}"`, () => resume(Effect.void))
  })

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
                  const name = nameOf(text)
                  return run(sql, client, name, text, values).pipe(
                    Effect.catchIf(staleType, () => Effect.zipRight(deallocate(client, name), run(sql, client, name, text, values))),
                    Effect.mapError(failed)
                  )
                })
              ),
              // not @effect/sql-pg's client: the statement as usual, once the reserved connection is back
              (rows) => (rows === undefined ? statement : Effect.succeed(rows))
            )
      )
