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
export const nameOf = (text: string): string => {
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

/** Deallocates `name` on the server and forgets it in the driver's cache of the connection. */
const deallocate = (client: DriverClient, name: string) =>
  Effect.async<void>((resume) => {
    const parsed = (client as { connection?: { parsedStatements?: Record<string, unknown> } }).connection?.parsedStatements
    if (parsed !== undefined) delete parsed[name]
    client.query(`DEALLOCATE "${name}"`, () => resume(Effect.void))
  })

/**
 * Runs `text` with `values` on `client` as the named statement of its text; rows come back as the
 * driver returns them. `onInterrupt`: what an interruption does while the statement runs (it is awaited
 * after that either way, so the connection is idle when this ends); without it, the statement is not
 * interruptible.
 */
export const runNamed = (
  client: DriverClient,
  text: string,
  values: ReadonlyArray<unknown>,
  onInterrupt?: Effect.Effect<void>
): Effect.Effect<ReadonlyArray<any>, unknown> => {
  const name = nameOf(text)
  const once = Effect.async<ReadonlyArray<any>, unknown>((resume) => {
    let settle: () => void = () => {}
    const settled = new Promise<void>((r) => (settle = r))
    client.query({ name, text, values }, (err, result) => {
      settle()
      resume(err ? Effect.fail(err) : Effect.succeed(result.rows))
    })
    return Effect.zipRight(onInterrupt ?? Effect.void, Effect.promise(() => settled))
  })
  const run = Effect.catchIf(once, staleType, () => Effect.zipRight(deallocate(client, name), once))
  return onInterrupt === undefined ? Effect.uninterruptible(run) : run
}
