/**
 * A private redis-server for fault runs: its own free port, nothing kept on disk (`--save ''`,
 * `--appendonly no`), so a restart forgets every key. A harness may SIGKILL it and start it again on
 * the same port, or SIGSTOP it for a while (a stall) — never the shared Redis other tests use.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { Redis } from "ioredis"
import { freePort } from "../../../src/internal/testing/EmbeddedPostgres.js"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Whether a `redis-server` binary is on the PATH. */
export const available = (): Promise<boolean> =>
  new Promise((resolve) => {
    const p = spawn("redis-server", ["--version"], { stdio: "ignore" })
    p.on("error", () => resolve(false))
    p.on("exit", (code) => resolve(code === 0))
  })

/** A running private server. */
export interface PrivateRedis {
  readonly url: string
  /** The server process's id now (a restart changes it). */
  readonly pid: number
  /** SIGKILL, then a new server on the same port; resolves once it answers PING. */
  readonly restart: () => Promise<void>
  /** SIGSTOP for `ms`, then SIGCONT. */
  readonly stall: (ms: number) => Promise<void>
  /** SIGKILL (a stopped server too). */
  readonly stop: () => Promise<void>
}

const spawnServer = async (port: number): Promise<ChildProcess> => {
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" })
  const probe = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  probe.on("error", () => {})
  try {
    for (let i = 0; ; i++) {
      if (child.exitCode !== null) throw new Error(`redis-server on port ${port} exited with code ${child.exitCode}`)
      try {
        if (probe.status !== "ready") await probe.connect()
        if ((await probe.ping()) === "PONG") return child
      } catch {
        if (i > 200) throw new Error(`redis-server on port ${port} did not answer within 10 s`)
        probe.disconnect()
        await sleep(50)
      }
    }
  } finally {
    probe.disconnect()
  }
}

const kill = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("exit", () => resolve())
    child.kill("SIGKILL")
  })

/** Starts a private server on a free port; resolves once it answers PING. */
export const start = async (): Promise<PrivateRedis> => {
  const port = await freePort()
  let child = await spawnServer(port)
  return {
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return child.pid!
    },
    restart: async () => {
      await kill(child)
      child = await spawnServer(port)
    },
    stall: async (ms) => {
      child.kill("SIGSTOP")
      try {
        await sleep(ms)
      } finally {
        child.kill("SIGCONT")
      }
    },
    stop: () => kill(child)
  }
}
