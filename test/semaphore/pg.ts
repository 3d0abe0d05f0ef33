import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import pg from "pg"
import { afterAll } from "vitest"
import { createDatabase, dropDatabase } from "../support/db.js"

/**
 * One database per test file, created on first use and dropped after the file; each call of
 * `pool(n)` is a fresh PgClient pool on it (semaphore keys are unique per test, so tests share
 * the database but not the pool); `applicationName` tags its connections in `pg_stat_activity`.
 */
export const sharedDatabase = () => {
  let url: Promise<string> | undefined
  const get = () => (url ??= createDatabase())
  afterAll(async () => {
    if (url !== undefined) await dropDatabase(await url)
  })
  return {
    url: get,
    pool: (maxConnections = 40, applicationName?: string) =>
      Layer.unwrap(
        Effect.map(Effect.promise(get), (u) =>
          PgClient.layer({ url: Redacted.make(u), maxConnections, idleTimeout: "30 seconds", applicationName })
        )
      ),
    /** A plain client on the database (another "process"), closed with the scope. */
    client: Effect.acquireRelease(
      Effect.promise(async () => {
        const c = new pg.Client({ connectionString: await get() })
        c.on("error", () => {})
        await c.connect()
        return c
      }),
      (c) => Effect.promise(() => c.end().catch(() => {}))
    )
  }
}
