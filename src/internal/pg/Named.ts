/**
 * Named prepared statements on one `pg` client: each connection parses and plans such a statement once
 * and then only binds and runs it. @effect/sql-pg sends every statement unnamed (parsed and planned
 * again at each run), so the worker's hot statements — the store's claim and finalizing writes, the
 * semaphore provider's slot scan and release — go through the driver's own `query({ name, text, values })`
 * (see `Driver.ts`). The name is a digest of the text, so a statement whose text differs is another
 * statement. A prepared statement the server no longer accepts ("cached plan must not change result
 * type", after a migration changed a table under a running worker) is deallocated and prepared again, once.
 *
 * @since 0.3.0
 */
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
  const run = Effect.async<ReadonlyArray<any>, unknown>((resume) => {
    let settle: () => void = () => {}
    const settled = new Promise<void>((r) => (settle = r))
    queryNamed(client, text, values, (err, rows) => {
      settle()
      resume(err !== undefined ? Effect.fail(err) : Effect.succeed(rows))
    })
    return Effect.zipRight(onInterrupt ?? Effect.void, Effect.promise(() => settled))
  })
  return onInterrupt === undefined ? Effect.uninterruptible(run) : run
}
