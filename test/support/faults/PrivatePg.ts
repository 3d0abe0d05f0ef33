/**
 * A private PostgreSQL server for fault tests: its own data directory and port, which a test can stop
 * hard (`pg_ctl stop -m immediate`: every backend dies at once, like a crashed server) and start again
 * on the same data directory — on the same port, or on another one (a failover target).
 *
 * Uses the PostgreSQL binaries of the machine (`WARP_PG_BIN`, default /usr/lib/postgresql/15/bin, else
 * whatever `initdb` is on the PATH). As root, the server runs as the `postgres` OS user.
 */
import { execFile } from "node:child_process"
import { appendFileSync, chmodSync, existsSync, mkdtempSync, rmSync } from "node:fs"
import * as EmbeddedPostgres from "../../../src/internal/testing/EmbeddedPostgres.js"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"

const run = promisify(execFile)

const binDir = (): string => {
  const given = process.env.WARP_PG_BIN
  if (given !== undefined && given !== "") return given
  for (const v of ["17", "16", "15", "14"]) {
    const dir = `/usr/lib/postgresql/${v}/bin`
    if (existsSync(join(dir, "pg_ctl"))) return dir
  }
  return ""
}

/** A free TCP port on 127.0.0.1. */
export const freePort = EmbeddedPostgres.freePort

/** A private server. */
export interface PrivatePg {
  /** The port it listens on now. */
  readonly port: () => number
  /** The URL of database `database` (default `postgres`) on the server's current port. */
  readonly url: (database?: string) => string
  /** `pg_ctl stop -m immediate`: the server dies at once, open connections break. */
  readonly stopHard: () => Promise<void>
  /** Starts the server again on the same data directory (on `port`, default the previous one); resolves once it accepts connections. */
  readonly start: (port?: number) => Promise<void>
  /** Stops the server (fast) and deletes its data directory. */
  readonly destroy: () => Promise<void>
}

/** initdb into a temporary directory and start the server on a free port. */
export const startPrivatePg = async (
  options: {
    readonly maxConnections?: number
    /** Addresses to listen on besides 127.0.0.1 (clients of the server's own subnets are then trusted: `samenet`). */
    readonly alsoListenOn?: ReadonlyArray<string>
  } = {}
): Promise<PrivatePg> => {
  const bin = binDir()
  const exe = (name: string) => (bin === "" ? name : join(bin, name))
  const root = mkdtempSync(join(tmpdir(), "warp-fault-pg-"))
  chmodSync(root, 0o777)
  const data = join(root, "data")
  const logFile = join(root, "server.log")
  const asRoot = process.getuid?.() === 0
  // as root, PostgreSQL refuses to run: run its tools as the `postgres` OS user
  const pgTool = (name: string, args: ReadonlyArray<string>) =>
    asRoot ? run("runuser", ["-u", "postgres", "--", exe(name), ...args]) : run(exe(name), [...args])

  await pgTool("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
  const also = options.alsoListenOn ?? []
  if (also.length > 0) appendFileSync(join(data, "pg_hba.conf"), "host all all samenet trust\n")
  let port = await freePort()
  const settings = [
    `-c listen_addresses=${["127.0.0.1", ...also].join(",")}`,
    `-c unix_socket_directories=${root}`,
    `-c max_connections=${options.maxConnections ?? 200}`,
    // fsync is about the machine crashing; a commit acknowledged must survive the server's crash, so
    // synchronous_commit stays on (off, an immediate stop loses the last commits the clients were told of)
    "-c fsync=off",
    "-c full_page_writes=off"
  ].join(" ")
  const start = async (p?: number) => {
    if (p !== undefined) port = p
    await pgTool("pg_ctl", ["-D", data, "-l", logFile, "-o", `-p ${port} ${settings}`, "-w", "-t", "60", "start"])
  }
  const stop = (mode: "immediate" | "fast") => pgTool("pg_ctl", ["-D", data, "-m", mode, "-w", "-t", "60", "stop"]).then(() => undefined)
  await start()
  const server: PrivatePg = {
    port: () => port,
    url: (database = "postgres") => `postgres://postgres@127.0.0.1:${port}/${database}`,
    stopHard: () => stop("immediate"),
    start,
    destroy: async () => {
      live.delete(server)
      await stop("fast").catch(() => {})
      rmSync(root, { recursive: true, force: true })
    }
  }
  live.add(server)
  return server
}

/** Servers started and not yet destroyed. */
const live = new Set<PrivatePg>()

/**
 * Destroys every server this process started and has not destroyed: for an `afterAll`, since a test
 * that times out never runs its own cleanup and `pg_ctl` servers outlive the test process.
 */
export const destroyAll = (): Promise<void> => Promise.all([...live].map((s) => s.destroy())).then(() => undefined)
