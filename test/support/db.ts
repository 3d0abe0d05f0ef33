import type * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import pg from "pg"
import { inject } from "vitest"
import { pgLayer } from "./pgLayer.js"

/** The server URL for this test run. */
export const serverUrl = (): string => inject("databaseUrl")

const withDatabase = (url: string, database: string) => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

const admin = async <A>(f: (c: pg.Client) => Promise<A>): Promise<A> => {
  const c = new pg.Client({ connectionString: serverUrl() })
  await c.connect()
  try {
    return await f(c)
  } finally {
    await c.end()
  }
}

/** Creates a fresh database and returns its URL. */
export const createDatabase = async (): Promise<string> => {
  const name = `warp_t_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`
  await admin((c) => c.query(`CREATE DATABASE ${name}`))
  return withDatabase(serverUrl(), name)
}

/** Drops a database created by {@link createDatabase}. */
export const dropDatabase = async (url: string): Promise<void> => {
  const name = new URL(url).pathname.slice(1)
  await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
}

/** A fresh database for the lifetime of the layer. */
export const freshDatabaseUrl: Effect.Effect<string, never, import("effect/Scope").Scope> = Effect.acquireRelease(
  Effect.promise(createDatabase),
  (url) => Effect.promise(() => dropDatabase(url))
)

export { pgLayer }

/** A PgClient on a fresh database, dropped when the layer is released. */
export const freshPgLayer = (maxConnections = 20): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, unknown> =>
  Layer.unwrap(Effect.map(freshDatabaseUrl, (url) => pgLayer(url, maxConnections)))
