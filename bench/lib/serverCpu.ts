/**
 * The PostgreSQL server's CPU time, from the operating system's process accounting: the postmaster and
 * every process below it (backends, autovacuum, checkpointer, WAL writer...), read from
 * `/proc/<pid>/stat`. A process's `utime + stime` is its own CPU time; `cutime + cstime` that of its
 * children it has reaped, so the postmaster's count keeps the CPU time of every backend that exited
 * (a pool's connection closed during the run), and the sum over the live tree plus the reaped children
 * only grows. The difference of two reads is the server's CPU time between them.
 *
 * The postmaster is found from SQL: the pid of this client's own backend (`pg_backend_pid()`), whose
 * parent is the postmaster; where the data directory is readable, its `postmaster.pid` must name the
 * same process. A server this machine's `/proc` cannot see (another host, another container's pid
 * namespace) reads as NaN ("n/a"), never as a guess.
 *
 * Caveats: the resolution is one clock tick (10 ms at the usual `CLK_TCK` of 100) per process; a
 * process that exits between the postmaster's read and its own read is missed once (under-count, never
 * double-counted: the postmaster is read first); on a server shared with other clients (a
 * `DATABASE_URL` server used by others at the same time) their work is counted too.
 */
import { spawnSync } from "node:child_process"
import { readFileSync, readdirSync } from "node:fs"
import { join } from "node:path"
import { withClient } from "./server.js"

/** A server's CPU clock: `read()` is its CPU time so far in ms (NaN when it cannot be read). */
export interface ServerCpu {
  /** The postmaster's pid, when found. */
  readonly postmaster: number | undefined
  /** Why the server's CPU cannot be read (undefined when it can). */
  readonly unavailable: string | undefined
  /** The CPU time of the postmaster and every process below it (live and reaped), ms. */
  readonly read: () => number
}

/** Clock ticks per second of `/proc/<pid>/stat`'s times (`getconf CLK_TCK`, 100 on Linux as a rule). */
const ticksPerSecond = (() => {
  let cached: number | undefined
  return () => {
    if (cached === undefined) {
      const r = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" })
      const n = Number(r.stdout?.trim())
      cached = r.status === 0 && Number.isFinite(n) && n > 0 ? n : 100
    }
    return cached
  }
})()

interface Stat {
  readonly pid: number
  readonly comm: string
  readonly ppid: number
  /** utime + stime + cutime + cstime, in clock ticks. */
  readonly ticks: number
}

/** One `/proc/<pid>/stat`, or undefined if the process is gone (or unreadable). */
const statOf = (pid: number): Stat | undefined => {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8")
  } catch {
    return undefined
  }
  // "pid (comm) state ppid ..." — comm may hold spaces and parentheses: split after the last ")"
  const close = text.lastIndexOf(")")
  const comm = text.slice(text.indexOf("(") + 1, close)
  const f = text.slice(close + 2).split(" ")
  // f[0] = state (field 3), f[1] = ppid (4), f[11..14] = utime, stime, cutime, cstime (14..17)
  return { pid, comm, ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]) }
}

/** CPU ms of `postmaster` and every live process below it, plus the children they reaped. */
const treeCpuMs = (postmaster: number): number => {
  // the postmaster first: a child reaped after this read is missed once rather than counted twice
  const root = statOf(postmaster)
  if (root === undefined) return Number.NaN
  const children = new Map<number, Array<Stat>>()
  for (const name of readdirSync("/proc")) {
    const pid = Number(name)
    if (!Number.isInteger(pid) || pid === postmaster) continue
    const s = statOf(pid)
    if (s === undefined) continue
    const siblings = children.get(s.ppid)
    if (siblings === undefined) children.set(s.ppid, [s])
    else siblings.push(s)
  }
  let ticks = root.ticks
  const queue = [postmaster]
  while (queue.length > 0) {
    for (const child of children.get(queue.pop()!) ?? []) {
      ticks += child.ticks
      queue.push(child.pid)
    }
  }
  return (ticks * 1000) / ticksPerSecond()
}

const found = new Map<string, Promise<ServerCpu>>()

/** The server's origin (host and port): one postmaster per origin. */
const originOf = (url: string) => {
  const u = new URL(url)
  return `${u.hostname}:${u.port || "5432"}`
}

const unavailable = (why: string): ServerCpu => ({ postmaster: undefined, unavailable: why, read: () => Number.NaN })

/**
 * The CPU clock of the server `url` points at (found once per host and port, and again when that
 * postmaster is gone: a later embedded server may get the same port).
 */
export const serverCpu = async (url: string): Promise<ServerCpu> => {
  const origin = originOf(url)
  const cached = await found.get(origin)
  if (cached !== undefined && (cached.postmaster === undefined || /^(postgres|postmaster)/.test(statOf(cached.postmaster)?.comm ?? ""))) return cached
  const p = find(url).catch((e) => unavailable(`lookup failed: ${String((e as Error)?.message ?? e)}`))
  found.set(origin, p)
  return p
}

const find = (url: string): Promise<ServerCpu> =>
  // looked at while this client's backend is connected
  withClient(url, async (c) => {
    const r = await c.query(`SELECT pg_backend_pid() AS pid, current_setting('data_directory', true) AS dir`)
    const pid = Number(r.rows[0].pid)
    const dataDirectory = r.rows[0].dir as string | null
    const own = statOf(pid)
    if (own === undefined) return unavailable(`no /proc/${pid}/stat for this client's backend: the server is not visible in this machine's /proc`)
    if (!/^(postgres|postmaster)/.test(own.comm)) return unavailable(`/proc/${pid} is "${own.comm}", not a PostgreSQL backend: another pid namespace`)
    const postmaster = own.ppid
    if (dataDirectory !== null) {
      try {
        const first = Number(readFileSync(join(dataDirectory, "postmaster.pid"), "utf8").split("\n")[0])
        if (first !== postmaster) return unavailable(`the backend's parent ${postmaster} is not the data directory's postmaster ${first}`)
      } catch {
        // the data directory is not readable here: the backend's parent, checked by its name below
      }
    }
    const root = statOf(postmaster)
    if (root === undefined || !/^(postgres|postmaster)/.test(root.comm)) return unavailable(`the backend's parent ${postmaster} is not a PostgreSQL process`)
    return { postmaster, unavailable: undefined, read: () => treeCpuMs(postmaster) }
  })

/** The live children of `pid` (`/proc/<pid>/task/<pid>/children`), or undefined where the kernel has no such file. */
const childrenOf = (pid: number): Array<number> | undefined => {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(" ").filter((x) => x !== "").map(Number)
  } catch {
    return undefined
  }
}

/** The database a backend serves, from its process title (`postgres: [cluster: ]user database host(port) state`). */
const servesDatabase = (pid: number, database: string): boolean | undefined => {
  let title: string
  try {
    title = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim()
  } catch {
    return false
  }
  // a backend not yet authenticated still carries the postmaster's command line: ask again later
  if (!title.startsWith("postgres: ")) return undefined
  return title.split(/\s+/).includes(database)
}

/**
 * The CPU time of the backends of one database, polled every `everyMs` while the window is open (a
 * backend that exits in the window keeps what the last poll saw of it: under-counted by at most one
 * interval's work). A backend alive when the window opens counts from there, one born in it from 0.
 */
const databaseBackends = (postmaster: number, database: string, everyMs = 50) => {
  const tracked = new Map<number, { readonly base: number; last: number; ours: boolean | undefined }>()
  let opened = false
  const poll = () => {
    const pids = childrenOf(postmaster)
    if (pids === undefined) return false
    for (const pid of pids) {
      let t = tracked.get(pid)
      if (t === undefined) {
        const s = statOf(pid)
        if (s === undefined) continue
        t = { base: opened ? 0 : s.ticks, last: s.ticks, ours: undefined }
        tracked.set(pid, t)
      }
      if (t.ours === undefined) t.ours = servesDatabase(pid, database)
      if (t.ours === true) {
        const s = statOf(pid)
        if (s !== undefined) t.last = s.ticks
      }
    }
    return true
  }
  if (!poll()) return undefined
  opened = true
  const timer = setInterval(poll, everyMs)
  return {
    end: () => {
      poll()
      clearInterval(timer)
      let ticks = 0
      for (const t of tracked.values()) if (t.ours === true) ticks += t.last - t.base
      return (ticks * 1000) / ticksPerSecond()
    }
  }
}

/**
 * A measured window: the CPU time of this process (`process.cpuUsage`: the process that runs the
 * worker) and of the server, from its start to `end()`; both reads are synchronous, taken at the
 * window's edges. With `database`, also the CPU time of that database's backends alone (polled every
 * 50 ms from this process: the server's figure counts every client of a shared server, this one only
 * the run's own connections, not the server's background processes).
 */
export const cpuWindow = (server: ServerCpu, database?: string) => {
  const backends = server.postmaster === undefined || database === undefined ? undefined : databaseBackends(server.postmaster, database)
  const s0 = server.read()
  const c0 = process.cpuUsage()
  return {
    end: (): { readonly cpuMs: number; readonly serverCpuMs: number; readonly databaseCpuMs: number } => {
      const c = process.cpuUsage(c0)
      const s1 = server.read()
      return { cpuMs: (c.user + c.system) / 1000, serverCpuMs: s1 - s0, databaseCpuMs: backends === undefined ? Number.NaN : backends.end() }
    }
  }
}

/** The database name of a connection URL. */
export const databaseOf = (url: string) => decodeURIComponent(new URL(url).pathname.slice(1))
