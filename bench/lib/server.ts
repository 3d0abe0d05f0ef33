/**
 * The PostgreSQL server of a bench run (DATABASE_URL, else an embedded server), fresh databases per
 * measured run, and the server-side counters every run is charged with.
 */
import pg from "pg"
import * as EmbeddedPostgres from "../../src/internal/testing/EmbeddedPostgres.js"

/** A server for one pass of the run. */
export interface Server {
  readonly url: string
  readonly description: string
  readonly stop: () => Promise<void>
}

/**
 * `fast`: an embedded server with fsync and synchronous_commit off. `durable`: DATABASE_URL when set,
 * else an embedded server with both on (PostgreSQL's defaults: every commit waits for its WAL flush).
 * Both with room for 1,000+ connections. The embedded ones load `pg_stat_statements` (created in
 * `template1`, so every fresh bench database has it): statements per job are counted from it.
 */
export const startServer = async (kind: "fast" | "durable"): Promise<Server> => {
  const given = process.env.DATABASE_URL
  if (kind === "durable" && given !== undefined && given !== "") return { url: given, description: "DATABASE_URL", stop: async () => {} }
  const server = await EmbeddedPostgres.start({
    maxConnections: 1200,
    durable: kind === "durable",
    settings: { shared_preload_libraries: "pg_stat_statements", "pg_stat_statements.track": "top", "pg_stat_statements.max": "10000" }
  })
  await withClient(withDatabase(server.url, "template1"), (c) => c.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
  return {
    url: server.url,
    description: kind === "durable" ? "embedded (fsync=on, synchronous_commit=on)" : "embedded (fsync=off, synchronous_commit=off)",
    stop: server.stop
  }
}

const withDatabase = (url: string, database: string): string => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

/** Runs `f` on a short-lived client of `url`. */
export const withClient = async <A>(url: string, f: (c: pg.Client) => Promise<A>): Promise<A> => {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    return await f(c)
  } finally {
    await c.end()
  }
}

let counter = 0

/** Creates a fresh database on the server; returns its URL. */
export const createDatabase = async (serverUrl: string): Promise<string> => {
  const name = `warp_bench_${process.pid}_${Date.now().toString(36)}_${counter++}`
  await withClient(serverUrl, (c) => c.query(`CREATE DATABASE ${name}`))
  return withDatabase(serverUrl, name)
}

/** Drops a database made by {@link createDatabase}. */
export const dropDatabase = async (serverUrl: string, url: string): Promise<void> => {
  const name = new URL(url).pathname.slice(1)
  await withClient(serverUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
}

/** A fresh database for the duration of `f`. */
export const withDatabase_ = async <A>(serverUrl: string, f: (url: string) => Promise<A>): Promise<A> => {
  const url = await createDatabase(serverUrl)
  try {
    return await f(url)
  } finally {
    await dropDatabase(serverUrl, url)
  }
}
export { withDatabase_ as withFreshDatabase }

/** Server-side counters of one database. */
export interface DbCounters {
  /** Committed transactions (every autocommit statement is one). */
  readonly xactCommit: number
  /** Rows inserted + updated (+ deleted, reported apart) in user tables of every schema. */
  readonly tupIns: number
  readonly tupUpd: number
  readonly tupDel: number
  /**
   * Statements the server ran for this database, top level (`pg_stat_statements` calls; each is one
   * round trip of a client, BEGIN and COMMIT included); NaN where the extension is not there.
   */
  readonly statements: number
}

/** A moment for backends that just exited to publish their statistics. */
const published = () => new Promise((r) => setTimeout(r, 300))

/**
 * Reads the counters of `url`'s database. PostgreSQL publishes a backend's counters when it goes
 * idle (at most once a second) or exits, so callers close their pools first, then call this.
 */
export const readCounters = (url: string): Promise<DbCounters> =>
  withClient(url, async (c) => {
    await published()
    // first: a statement is counted when it ends, so this read is not in its own count, and the three
    // below are in the next read's (taken out by `diffCounters`)
    const statements = await c
      .query(`SELECT coalesce(sum(calls), 0)::bigint AS n FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`)
      .then((r) => Number(r.rows[0].n), () => Number.NaN)
    await c.query("SELECT pg_stat_clear_snapshot()")
    const d = await c.query(`SELECT xact_commit::bigint AS x FROM pg_stat_database WHERE datname = current_database()`)
    const t = await c.query(
      `SELECT coalesce(sum(n_tup_ins),0)::bigint AS i, coalesce(sum(n_tup_upd),0)::bigint AS u, coalesce(sum(n_tup_del),0)::bigint AS d FROM pg_stat_user_tables`
    )
    return {
      // this client's own two reads above are not the system's work
      xactCommit: Number(d.rows[0].x),
      tupIns: Number(t.rows[0].i),
      tupUpd: Number(t.rows[0].u),
      tupDel: Number(t.rows[0].d),
      statements
    }
  })

/** Row inserts, updates and deletes per table of `url`'s database (`pg_stat_user_tables`), for a breakdown of the writes. */
export const readTableWrites = (url: string): Promise<Record<string, { ins: number; upd: number; del: number }>> =>
  withClient(url, async (c) => {
    await published()
    await c.query("SELECT pg_stat_clear_snapshot()")
    const t = await c.query(`SELECT relname, n_tup_ins::bigint AS i, n_tup_upd::bigint AS u, n_tup_del::bigint AS d FROM pg_stat_user_tables`)
    return Object.fromEntries(t.rows.map((r: any) => [String(r.relname), { ins: Number(r.i), upd: Number(r.u), del: Number(r.d) }]))
  })

/** The difference of two counter reads; the reading client's own transactions and statements are taken out. */
export const diffCounters = (a: DbCounters, b: DbCounters): DbCounters => ({
  xactCommit: b.xactCommit - a.xactCommit - 4,
  tupIns: b.tupIns - a.tupIns,
  tupUpd: b.tupUpd - a.tupUpd,
  tupDel: b.tupDel - a.tupDel,
  statements: b.statements - a.statements - 3
})

/** The server's version string, e.g. "17.5". */
export const serverVersion = (url: string): Promise<string> => withClient(url, async (c) => String((await c.query("SHOW server_version")).rows[0].server_version))

/** Backends connected to `url`'s database (from pg_stat_activity). */
export const connectionsTo = (url: string, observer: pg.Client): Promise<number> =>
  observer
    .query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [new URL(url).pathname.slice(1)])
    .then((r) => Number(r.rows[0].n))
