/**
 * The `pg` driver's client behind a connection of @effect/sql-pg, for what @effect/sql does not expose:
 * the connection's end and errors (the PostgreSQL semaphore provider's lost-slot signal) and named
 * prepared statements (the store's hot statements). @effect/sql-pg's connection keeps its client in a
 * `pg` field; any other `SqlClient` has none, and callers fall back to @effect/sql's own means.
 *
 * @since 0.3.0
 */

/** What this library uses of a `pg` client. */
export interface DriverClient {
  readonly processID?: number | undefined
  query(config: { name: string; text: string; values: ReadonlyArray<unknown> }, cb: (err: Error | undefined, result: { rows: Array<unknown> }) => void): unknown
  query(text: string, cb: (err: Error | undefined) => void): unknown
  on(event: string, listener: () => void): unknown
  off(event: string, listener: () => void): unknown
}

/** The driver's client behind `conn` (a connection reserved from @effect/sql-pg), if that is what it is. */
export const driverOf = (conn: unknown): DriverClient | undefined => {
  const client = (conn as { pg?: unknown } | undefined)?.pg as { query?: unknown; on?: unknown; off?: unknown } | undefined
  return typeof client?.query === "function" && typeof client.on === "function" && typeof client.off === "function" ? (client as DriverClient) : undefined
}
