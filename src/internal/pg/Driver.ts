/**
 * The `pg` driver, for what @effect/sql-pg does not give: a connection's end and errors as events (the
 * PostgreSQL semaphore provider's lost-slot signal) on a connection this library holds for itself.
 *
 * Up to @effect/sql-pg 0.53 every connection of the `SqlClient` was a `pg` client, kept in a `pg` field.
 * @effect/sql-pg 4 speaks the wire protocol itself: its connections have no `pg` client, cache their
 * prepared statements by themselves, and tell of
 * their death only to their pool (an internal hook) or through a `LISTEN` queue. So the semaphore
 * provider opens its slot connections with `pg` itself, through a small pool of its own
 * ({@link makeDriverPool}) built from the `PgClient`'s settings ({@link driverConfigOf}).
 *
 * Rows from such a pool are decoded as @effect/sql-pg 4 decodes them where the two differ for this
 * library's tables (`int8` and `int8[]` as `bigint`), and parameters compiled by an @effect/sql-pg 4
 * client (its `PgTypes` parameters, as `sql.json` makes) are sent as `pg` sends their values (see
 * `Named.ts`), so a statement a store compiled with the `SqlClient` runs alike on either.
 *
 * @since 0.3.0
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { runNamed } from "./Named.js"

/** What this library uses of a `pg` client. */
export interface DriverClient {
  readonly processID?: number | undefined
  query(config: { name: string; text: string; values: ReadonlyArray<unknown> }, cb: (err: Error | undefined, result: { rows: Array<unknown> }) => void): unknown
  query(text: string, cb: (err: Error | undefined) => void): unknown
  on(event: string, listener: () => void): unknown
  off(event: string, listener: () => void): unknown
}

/**
 * The settings of a {@link makeDriverPool}: those of an @effect/sql-pg client that `pg` can honour
 * (`stream` cannot be: a client with one has no driver pool), and the pool's size.
 */
export type DriverConfig = Pick<
  PgClient.PgPoolConfig,
  | "url"
  | "host"
  | "port"
  | "path"
  | "ssl"
  | "database"
  | "username"
  | "password"
  | "applicationName"
  | "startupParameters"
  | "startupOptions"
  | "connectTimeout"
  | "keepAlive"
  | "maxConnections"
  | "idleTimeout"
>

/**
 * The driver settings of `sql` when it is an @effect/sql-pg client (its `config`), with `override`'s
 * fields over them; `override` alone for any other client; none when neither applies or the client
 * connects through a custom `stream`.
 */
export const driverConfigOf = (sql: unknown, override?: DriverConfig): DriverConfig | undefined => {
  const config = (sql as { config?: unknown } | undefined)?.config as (PgClient.PgPoolConfig & { stream?: unknown }) | undefined
  // a SqlClient is a function (the `sql` template tag) with the client's fields
  const isPg = (typeof sql === "function" || (typeof sql === "object" && sql !== null)) && PgClient.TypeId in sql && typeof config === "object" && config !== null
  if (isPg && config.stream !== undefined && override === undefined) return undefined
  if (!isPg) return override
  return override === undefined ? config : { ...config, ...override }
}

/** A client checked out of a {@link DriverPool}; `release` gives it back (once). */
export interface PooledClient extends DriverClient {
  release(err?: Error | boolean): void
}

/** A small `pg` pool of the library's own. */
export interface DriverPool {
  /** Checks a client out (the caller releases it). */
  readonly connect: Effect.Effect<PooledClient, unknown>
  /** Runs one statement on a client of the pool (as a named prepared statement, see `Named.ts`). */
  readonly query: (text: string, values: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<any>, unknown>
}

interface UrlConfig {
  host?: string
  port?: number
  username?: string
  password?: string
  database?: string
  applicationName?: string
  options?: string
  connectTimeoutMs?: number
  ssl?: boolean
}

/** A libpq URI's settings, as @effect/sql-pg reads them. */
const parseUrl = (raw: string): UrlConfig => {
  const url = new URL(raw)
  const out: UrlConfig = {}
  if (url.hostname !== "") out.host = url.hostname.startsWith("[") && url.hostname.endsWith("]") ? url.hostname.slice(1, -1) : decodeURIComponent(url.hostname)
  if (url.port !== "") out.port = Number(url.port)
  if (url.username !== "") out.username = decodeURIComponent(url.username)
  if (url.password !== "") out.password = decodeURIComponent(url.password)
  const database = decodeURIComponent(url.pathname.replace(/^\//, ""))
  if (database !== "") out.database = database
  for (const [key, value] of url.searchParams) {
    switch (key) {
      case "host":
        out.host = value
        break
      case "port":
        out.port = Number(value)
        break
      case "user":
        out.username = value
        break
      case "password":
        out.password = value
        break
      case "dbname":
        out.database = value
        break
      case "application_name":
        out.applicationName = value
        break
      case "options":
        out.options = value
        break
      case "connect_timeout":
        out.connectTimeoutMs = Number(value) * 1000
        break
      case "sslmode":
        // `prefer`/`allow` (TLS when the server offers it) have no `pg` equivalent: plain, as a server
        // without TLS answers them (give `ssl` to require it)
        out.ssl = value === "require" || value === "verify-ca" || value === "verify-full"
        break
    }
  }
  return out
}

/** `-c name=value` for `options`, escaped as PostgreSQL reads it. */
const startupOption = (name: string, value: string) => `-c ${name}=${value.replace(/\\/g, "\\\\").replace(/ /g, "\\ ")}`

/** The int8 decoder of @effect/sql-pg 4 (a `bigint`), for text values. */
const parseInt8 = (text: string) => BigInt(text)

/**
 * A `pg` pool on `config` (closed with the scope; checked-out clients end when they are released).
 * `pg` is loaded on first use.
 */
export const makeDriverPool = (config: DriverConfig): Effect.Effect<DriverPool, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { default: pg } = yield* Effect.promise(() => import("pg"))
    const url = config.url === undefined ? {} : parseUrl(Redacted.value(config.url))
    let host = config.host ?? url.host ?? "localhost"
    let port = config.port ?? url.port ?? 5432
    if (config.path !== undefined) {
      // a socket path `dir/.s.PGSQL.port`: `pg` takes the directory and the port
      const m = /^(.*)\/\.s\.PGSQL\.(\d+)$/.exec(config.path)
      host = m === null ? config.path : m[1]!
      if (m !== null) port = Number(m[2])
    }
    const named = Object.entries(config.startupParameters ?? {}).map(([k, v]) => [k.toLowerCase(), v] as const)
    const applicationName = config.applicationName ?? named.find(([k]) => k === "application_name")?.[1] ?? url.applicationName ?? "@effect/sql-pg"
    const options = [
      config.startupOptions ?? url.options,
      ...named.filter(([k]) => k !== "application_name" && k !== "client_encoding").map(([k, v]) => startupOption(k, v)),
      ...(named.some(([k]) => k === "plan_cache_mode") ? [] : [startupOption("plan_cache_mode", "force_generic_plan")])
    ]
      .filter((o): o is string => o !== undefined && o !== "")
      .join(" ")
    const password = config.password ?? (url.password === undefined ? undefined : Redacted.make(url.password))
    const keepAliveMs = config.keepAlive === undefined ? undefined : Option.map(Duration.fromInput(config.keepAlive), Duration.toMillis)
    // @effect/sql-pg's default (5 s); `pg` reads 0 as none. `pg` also bounds the wait for a free client by it
    const connectMs = config.connectTimeout !== undefined ? Duration.toMillis(config.connectTimeout) : (url.connectTimeoutMs ?? 5000)
    const connectTimeoutMs = Number.isFinite(connectMs) && connectMs > 0 ? Math.max(1, Math.round(connectMs)) : 0
    const base = pg.types
    // the parser `pg` has for int8[] (1016, an oid outside pg-types' list of builtins)
    const int8Array = (base.getTypeParser as (oid: number, format: "text") => (text: string) => unknown)(1016, "text")
    const pool = new pg.Pool({
      host,
      port,
      user: config.username ?? url.username ?? process.env.USER ?? process.env.USERNAME,
      database: config.database ?? url.database,
      password:
        password === undefined
          ? undefined
          : Redacted.isRedacted(password)
            ? Redacted.value(password)
            : () => Effect.runPromise(Effect.map(password, Redacted.value)),
      ssl: config.ssl ?? url.ssl ?? false,
      application_name: applicationName,
      ...(options === "" ? {} : { options }),
      connectionTimeoutMillis: connectTimeoutMs,
      ...(keepAliveMs !== undefined && Option.isSome(keepAliveMs) ? { keepAlive: true, keepAliveInitialDelayMillis: keepAliveMs.value } : {}),
      max: config.maxConnections ?? 10,
      idleTimeoutMillis: Duration.toMillis(config.idleTimeout ?? "60 seconds"),
      types: {
        getTypeParser: ((oid: number, format?: "text" | "binary") =>
          oid === 20
            ? parseInt8
            : oid === 1016
              ? (text: string) => (int8Array(text) as Array<string | null>).map((v) => (v === null ? null : BigInt(v)))
              : base.getTypeParser(oid, format ?? "text")) as typeof base.getTypeParser
      }
    })
    // an idle client's error is handled by the pool (it drops the client); without a listener the
    // pool would throw it
    pool.on("error", () => {})
    yield* Effect.addFinalizer(() =>
      Effect.promise(() => pool.end().catch(() => {})).pipe(Effect.timeoutOption("5 seconds"), Effect.asVoid)
    )
    // a checked-out client has no listener of the pool's: one of its own, for as long as it lives (a
    // client whose `error` event finds no listener throws it, and the process dies), whoever holds it.
    // Attached on the pool's `connect` event, which pg-pool emits synchronously before it hands the new
    // client out: a listener added once `pool.connect()` resolves (a microtask later) missed an error the
    // server sent in the same read as its ReadyForQuery (a backend terminated while connecting).
    pool.on("connect", (client) => {
      client.on("error", () => {})
    })
    const connect: Effect.Effect<PooledClient, unknown> = Effect.tryPromise({
      try: () => pool.connect().then((client) => client satisfies PooledClient),
      catch: (cause) => cause
    })
    return {
      connect,
      // never interrupted: the client goes back to the pool idle
      query: (text, values) =>
        Effect.uninterruptible(
          Effect.acquireUseRelease(
            connect,
            (client) => runNamed(client, text, values),
            (client) => Effect.sync(() => client.release())
          )
        )
    } satisfies DriverPool
  })
