/**
 * `npm run pause-limit`: does the PostgreSQL provider's `deadlineBy` lift the pause limit (issue 23,
 * item 4)? For each mode (`idle-session-timeout`, `tcp`) and fault, a holder process
 * (`test/support/slotHolder.ts`) takes slot 0 of a key of limit 1; the fault lasts three deadlines;
 * this process tries to take the key meanwhile and reports when it got it; then the holder is asked
 * whether it still holds.
 *
 * Faults:
 * - `pause`: SIGSTOP of the holder process (its kernel still answers TCP);
 * - `cut behind a proxy`: the holder reaches PostgreSQL through a TCP proxy
 *   (`test/support/faults/TcpProxy.ts`) that stops forwarding without closing anything (a partition
 *   as a proxy or pooler sees it: the proxy's kernel still answers the server's keepalives).
 *
 * A cut on a direct connection (packets dropped between holder and server) needs a packet filter
 * (`tc` with netem or a drop action, or iptables), which this sandbox's kernel does not offer; it is
 * not measured here.
 *
 * Uses DATABASE_URL (a direct TCP connection, e.g. postgres://postgres@127.0.0.1:5432/test) or an
 * embedded PostgreSQL. Prints a table; a figure, not a test.
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { EmbeddedPostgres } from "warp-effect/testing"
import { lockId } from "../src/internal/semaphore/lockId.js"
import { slotName } from "../src/internal/semaphore/SemaphoreProvider.js"
import { startProxy } from "../test/support/faults/TcpProxy.js"

const DEADLINE_MS = Number(process.env.DEADLINE_MS ?? 2000)
const FAULT_MS = 3 * DEADLINE_MS
const holderEntry = fileURLToPath(new URL("../test/support/slotHolder.ts", import.meta.url))
const root = fileURLToPath(new URL("../", import.meta.url))

type Mode = "idle-session-timeout" | "tcp"

const startHolder = (url: string, name: string, deadlineBy: Mode) => {
  const child = spawn(process.execPath, ["--import", "tsx", holderEntry, JSON.stringify({ url, name, deadlineMs: DEADLINE_MS, deadlineBy })], {
    cwd: root,
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, NODE_OPTIONS: "" }
  })
  let out = ""
  let err = ""
  child.stdout.setEncoding("utf8").on("data", (d: string) => void (out += d))
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (err += d))
  const next = async (prefix: string, timeoutMs = 20_000): Promise<string> => {
    const until = Date.now() + timeoutMs
    while (Date.now() < until) {
      const lines = out.split("\n")
      const i = lines.findIndex((l) => l.startsWith(prefix))
      if (i >= 0) {
        out = lines.slice(i + 1).join("\n")
        return lines[i]!
      }
      if (child.exitCode !== null) throw new Error(`holder exited before '${prefix}': ${err}`)
      await new Promise((r) => setTimeout(r, 10))
    }
    throw new Error(`no '${prefix}' from the holder within ${timeoutMs} ms`)
  }
  return { child, next, send: (line: string) => void child.stdin.write(`${line}\n`) }
}

const main = async () => {
  const given = process.env.DATABASE_URL
  const server = given !== undefined && given !== "" ? undefined : await EmbeddedPostgres.start()
  const url = given !== undefined && given !== "" ? given : server!.url
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  const rows: Array<string> = []
  const target = new URL(url)
  const faults = ["pause", "cut behind a proxy"] as const
  try {
    for (const fault of faults) {
      for (const mode of ["idle-session-timeout", "tcp"] as const) {
        const name = `pause-limit:${fault}:${mode}:${Math.random().toString(36).slice(2)}`
        const id = lockId(slotName(name, 0))
        const proxy = fault === "pause" ? undefined : await startProxy(Number(target.port || 5432))
        const viaProxy = new URL(url)
        if (proxy !== undefined) {
          viaProxy.hostname = "127.0.0.1"
          viaProxy.port = String(proxy.port)
        }
        const h = startHolder(viaProxy.toString(), name, mode)
        try {
          await h.next("HELD")
          const t0 = Date.now()
          if (fault === "pause") h.child.kill("SIGSTOP")
          else proxy!.stall()
          // another holder (this process) tries for the whole fault: advisory lock + marker, as the provider's scan does
          let gotAfter: number | undefined
          const other = new pg.Client({ connectionString: url })
          await other.connect()
          while (Date.now() - t0 < FAULT_MS) {
            const r = await other.query<{ ok: boolean }>(
              `SELECT pg_try_advisory_lock($1::bigint) AND NOT EXISTS (
                 SELECT 1 FROM warp_semaphore_marker WHERE lock_id = $1::bigint AND until > clock_timestamp()) AS ok`,
              [id]
            )
            if (r.rows[0]!.ok) {
              gotAfter = Date.now() - t0
              break
            }
            await other.query("SELECT pg_advisory_unlock_all()")
            await new Promise((r) => setTimeout(r, 50))
          }
          await other.end()
          if (fault === "pause") h.child.kill("SIGCONT")
          h.send("check")
          const check = await h.next("CHECK")
          rows.push(
            `| ${fault}, ${FAULT_MS / 1000} s | ${mode} | ${gotAfter === undefined ? "not taken" : `taken after ${(gotAfter / 1000).toFixed(2)} s`} | ${check.replace("CHECK ", "")} |`
          )
        } finally {
          h.child.kill("SIGKILL")
          await proxy?.close()
        }
      }
    }
  } finally {
    await client.end()
    await server?.stop()
  }
  console.log(`deadline ${DEADLINE_MS} ms; fault ${FAULT_MS} ms; another process tries the key throughout`)
  console.log("| fault | deadlineBy | the key, for another process | the holder after the fault |")
  console.log("|---|---|---|---|")
  for (const r of rows) console.log(r)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
