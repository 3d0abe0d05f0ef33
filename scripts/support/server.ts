/**
 * What the measuring scripts share about the PostgreSQL server they run on: its URL (`DATABASE_URL`,
 * else the local server), a statement run on its admin database, and the URL of another database there.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import pg from "pg"
import { Concurrency, type Handler, JobStorePg, Publisher, Registry, SemaphoreProviderPg } from "../../src/index.js"

/** The server's URL: `DATABASE_URL`, else the local PostgreSQL. */
export const base = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** Runs `q` on `base` over a connection of its own (CREATE / DROP DATABASE, settings). */
export const admin = async (q: string): Promise<void> => {
  const c = new pg.Client({ connectionString: base })
  await c.connect()
  try {
    await c.query(q)
  } finally {
    await c.end()
  }
}

/** The URL of database `db` on the same server. */
export const urlOf = (db: string): string => {
  const u = new URL(base)
  u.pathname = `/${db}`
  return u.toString()
}

let databases = 0

/**
 * Runs `f` on a fresh database `{prefix}_{pid}_{n}` of the server, dropped after; `settings`: statements
 * run on the admin database after the creation (`{db}` stands for the database's name).
 */
export const withDatabase = async <A>(prefix: string, f: (url: string) => Promise<A>, settings: ReadonlyArray<string> = []): Promise<A> => {
  const db = `${prefix}_${process.pid}_${databases++}`
  await admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
  await admin(`CREATE DATABASE ${db}`)
  for (const s of settings) await admin(s.replaceAll("{db}", db))
  try {
    return await f(urlOf(db))
  } finally {
    await admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
  }
}

/**
 * A worker's environment on the database at `url`: publisher, registry of `handlers`, the concurrency
 * addon's limits, the PostgreSQL provider and store, a pool of 30.
 */
export const pgEnv = (url: string, handlers: ReadonlyArray<Handler.JobHandler<any, any, never>>) =>
  Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers })),
    Layer.provideMerge(Concurrency.layer),
    Layer.provideMerge(SemaphoreProviderPg.layer()),
    Layer.provideMerge(JobStorePg.layer),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 30 }))
  )
