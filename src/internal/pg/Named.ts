/**
 * Named prepared statements on one `pg` client: each connection parses and plans such a statement once
 * and then only binds and runs it. The statements this library runs on a `pg` client of its own — the
 * semaphore provider's slot scan and release, the pings, and a store's finalizing statement fused with
 * a slot's release — go through the driver's own `query({ name, text, values })` (see `Driver.ts`).
 * (@effect/sql-pg 0.53 sent every statement unnamed; @effect/sql-pg 4 prepares and caches statements
 * by itself, so a statement run through the `SqlClient` needs none of this.) The name is a digest of
 * the text, so a statement whose text differs is another statement. A prepared statement the server no
 * longer accepts ("cached plan must not change result type", after a migration changed a table under a
 * running worker) is deallocated and prepared again, once.
 *
 * @since 0.3.0
 */
import * as PgTypes from "@effect/sql-pg/PgTypes"
import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import type { DriverClient } from "./Driver.js"

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
 * A value compiled by an @effect/sql-pg 4 client, as `pg` sends it: its `PgTypes` parameters (`sql.json`
 * makes a `jsonb` one) by their value (JSON as its text); any other value as it is.
 */
const driverValue = (value: unknown): unknown => {
  if (!PgTypes.isParameter(value)) return value
  if (value.value === null || value.value === undefined) return null
  return value.oid === PgTypes.OID.json || value.oid === PgTypes.OID.jsonb ? JSON.stringify(value.value) : value.value
}

/** `values` as `pg` sends them (see {@link driverValue}); the same array when none needs a change. */
const driverValues = (values: ReadonlyArray<unknown>): ReadonlyArray<unknown> =>
  values.some(PgTypes.isParameter) ? values.map(driverValue) : values

/**
 * Sends `text` with `values` on `client` as the named statement of its text and calls `done` once with
 * its rows or its error: a statement found stale is deallocated (on the server and in the driver's
 * cache of the connection) and sent again, once.
 */
export const queryNamed = (
  client: DriverClient,
  text: string,
  values: ReadonlyArray<unknown>,
  done: (err: unknown, rows: ReadonlyArray<any>) => void
): void => {
  const name = nameOf(text)
  values = driverValues(values)
  client.query({ name, text, values }, (err, result) => {
    if (err === undefined || err === null) return done(undefined, result.rows)
    if (!staleType(err)) return done(err, [])
    const parsed = (client as { connection?: { parsedStatements?: Record<string, unknown> } }).connection?.parsedStatements
    if (parsed !== undefined) delete parsed[name]
    client.query(`DEALLOCATE "${name}"`, () =>
      client.query({ name, text, values }, (again, result2) => (again ? done(again, []) : done(undefined, result2.rows)))
    )
  })
}

/**
 * Runs `text` with `values` on `client` as the named statement of its text (see {@link queryNamed}); rows
 * come back as the driver returns them. `onInterrupt`: what an interruption does while the statement
 * runs (it is awaited after that either way, so the connection is idle when this ends); without it, the
 * statement is not interruptible.
 */
export const runNamed = (
  client: DriverClient,
  text: string,
  values: ReadonlyArray<unknown>,
  onInterrupt?: Effect.Effect<void>
): Effect.Effect<ReadonlyArray<any>, unknown> => {
  const run = Effect.callback<ReadonlyArray<any>, unknown>((resume) => {
    let settle: () => void = () => {}
    const settled = new Promise<void>((r) => (settle = r))
    queryNamed(client, text, values, (err, rows) => {
      settle()
      resume(err !== undefined ? Effect.fail(err) : Effect.succeed(rows))
    })
    return Effect.andThen(onInterrupt ?? Effect.void, Effect.promise(() => settled))
  })
  return onInterrupt === undefined ? Effect.uninterruptible(run) : run
}
