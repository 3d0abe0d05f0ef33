/**
 * The outage scenario of issue 21, shared by the CI tests (test/outage/*.test.ts, scaled down) and
 * `npm run faults` (full size): a private PostgreSQL, a TCP proxy in front of it, worker processes
 * (test/support/faults/outageWorker.ts) that reach the server only through the proxy, keyed
 * (`Semaphore(key, 2)`, Wait) and keyless jobs, and one fault while they run:
 *
 * - `restart`: `pg_ctl stop -m immediate`, down for `downMs`, started again on the same data directory;
 * - `failover`: the same, but the server comes back on another port and the proxy is re-pointed to it;
 * - `stall`: every open connection through the proxy stops forwarding without closing (half-open) for
 *   good; connections opened later work.
 *
 * The handlers record enter and exit in files (the machine's monotonic clock); the figures are computed
 * from those records, the jobs' final states and their audit trails.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import { Concurrency, JobParameters, JobStorePg, Publisher, Registry, SemaphoreProviderMemory } from "warp-effect"
import { checkOverlaps, type Interval, type KeyReport } from "../../soak/intervals.js"
import { bundledEntry } from "../bundle.js"
import { recordingHandler, Work } from "../../soak/workload.js"
import type { OutageWorkerConfig, Record } from "./outageWorker.js"
import { type PrivatePg, freePort, startPrivatePg } from "./PrivatePg.js"
import { type TcpProxy, startProxy } from "./TcpProxy.js"

const entry = fileURLToPath(new URL("./outageWorker.ts", import.meta.url))
const root = fileURLToPath(new URL("../../../", import.meta.url))

/** Worker processes started and not yet exited. */
const children = new Set<OutageChild>()

/**
 * Kills every worker process this process started that is still running: for an `afterAll`, since a
 * scenario that times out never stops its own workers (they would retry against a dead server forever).
 */
export const stopAllChildren = (): Promise<void> => Promise.all([...children].map((c) => c.stop(1_000))).then(() => undefined)

/** One worker process of the scenario. */
export class OutageChild {
  readonly process: ChildProcess
  readonly ready: Promise<void>
  readonly exited: Promise<void>
  private out = ""
  private err = ""

  constructor(readonly config: OutageWorkerConfig) {
    this.process = spawn(process.execPath, [bundledEntry(entry), JSON.stringify(config)], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NODE_OPTIONS: "" }
    })
    this.process.stdout!.setEncoding("utf8")
    this.process.stderr!.setEncoding("utf8")
    this.process.stderr!.on("data", (d: string) => (this.err = (this.err + d).slice(-20_000)))
    children.add(this)
    this.exited = new Promise((resolve) => this.process.once("exit", () => resolve()))
    void this.exited.then(() => children.delete(this))
    this.ready = new Promise((resolve, reject) => {
      this.process.stdout!.on("data", (d: string) => {
        this.out = (this.out + d).slice(-200_000)
        if (this.out.includes("READY")) resolve()
      })
      void this.exited.then(() => reject(new Error(`worker ${config.name} exited before READY:\n${this.err}`)))
    })
  }

  get alive(): boolean {
    return this.process.exitCode === null && this.process.signalCode === null
  }
  /** What the process logged (stdout: Effect's logger) — the tail. */
  get logs(): string {
    return this.out
  }
  get errors(): string {
    return this.err
  }

  async stop(ms = 15_000): Promise<void> {
    if (!this.alive) return
    this.process.kill("SIGTERM")
    const timer = setTimeout(() => this.alive && this.process.kill("SIGKILL"), ms)
    await this.exited
    clearTimeout(timer)
  }
}

/** The scenario's size and timings. */
export interface Scenario {
  readonly fault: "restart" | "failover" | "stall"
  readonly keyedJobs: number
  readonly keys: number
  readonly limit: number
  readonly keylessJobs: number
  /** Handler time: uniform in [min, max] ms. */
  readonly jobMs: readonly [number, number]
  readonly processes: number
  readonly lanes: number
  readonly leaseMs: number
  /** The fault starts once this many jobs have succeeded. */
  readonly faultAfterSucceeded: number
  /** How long the server stays down (restart, failover). */
  readonly downMs: number
  /** The driver's query and connect timeout in the workers. */
  readonly queryTimeoutMs?: number
  /** The workers close a connection whose server has not answered within this many ms (needed for a stall). */
  readonly answerTimeoutMs?: number
  /** Bound of the wait for every job to finish after the fault (ms). */
  readonly drainTimeoutMs: number
}

/** What a run measured. */
export interface Figures {
  readonly jobs: number
  readonly states: Readonly<globalThis.Record<string, number>>
  readonly handlerRuns: number
  /** Jobs whose handler completed (result ok) more than once. */
  readonly completedTwice: ReadonlyArray<string>
  /** Jobs whose handler ran more than once (any result). */
  readonly rerun: ReadonlyArray<string>
  /** Jobs with a handler run inside at the fault's start or ending after it, and entered before the server's return. */
  readonly inFlightAtFault: ReadonlyArray<string>
  /** Jobs with a handler completed during the outage (exit between stop and return). */
  readonly completedDuringOutage: ReadonlyArray<string>
  /** Jobs whose trail says a result was lost in an outage, with the texts. */
  readonly lostTexts: ReadonlyArray<{ readonly id: string; readonly texts: ReadonlyArray<string> }>
  /** Per key: the overlap report (limit, most inside at once, violations). */
  readonly overlaps: ReadonlyArray<KeyReport>
  /** Interrupted handler runs (slot lost when the connection died). */
  readonly interrupted: number
  /** Outage as the parent saw it (ms): stop issued .. server accepting again. */
  readonly outageMs: number
  /** From the server's return to the last result of a handler completed during the outage (ms, server clock). */
  readonly pendingWrittenMs: number | undefined
  /**
   * From the server's return to every job finished (ms). "The return" in these figures: the server
   * accepting connections again, as the parent saw it (the stall: the fault's start).
   */
  readonly allDoneMs: number
  /** From the server process's start to its accepting connections (crash recovery, ms; restart, failover). */
  readonly serverStartMs: number | undefined
  /** Jobs not yet Succeeded at the server's return (restart, failover). */
  readonly leftAtReturn: number | undefined
  /** Jobs Succeeded in the first second after the server's return. */
  readonly firstSecondJobs: number | undefined
  /** Jobs per second from one second after the return to the last job (the workers' steady pace). */
  readonly steadyRate: number | undefined
  /**
   * `allDoneMs` minus the time the jobs left at the return take at `steadyRate`: what the outage
   * itself added after the return (ms).
   */
  readonly addedByOutageMs: number | undefined
  /** From the server's return (as the parent saw it) to the first handler started after it (ms). */
  readonly resumedMs: number | undefined
  /** From the server's return (as the parent saw it) to the last handler run of a job in flight at the fault (ms). */
  readonly inFlightDoneMs: number | undefined
  /** Worker log lines about the store's reachability. */
  readonly unreachableLogs: number
  readonly reachableLogs: number
  /** Stalled connections through the proxy at the end (stall). */
  readonly stalledConnections: number
  readonly workersAlive: boolean
}

const lines = (dir: string): Array<Record> =>
  readdirSync(dir)
    .filter((f) => f.endsWith(".jsonl"))
    .flatMap((f) =>
      readFileSync(join(dir, f), "utf8")
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as Record)
    )

/** The handler runs recorded in `dir`, as the soak's intervals (times in ns of the monotonic clock). */
export const loadRecords = (dir: string): Array<Interval> => {
  const byRun = new Map<string, { enter?: Record; exit?: Record }>()
  for (const r of lines(dir)) {
    const k = `${r.job}#${r.attempt}#${r.pid}`
    const run = byRun.get(k) ?? {}
    if (r.e === "enter") run.enter = r
    else run.exit = r
    byRun.set(k, run)
  }
  const out: Array<Interval> = []
  for (const { enter, exit } of byRun.values()) {
    if (enter === undefined) continue
    out.push({
      jobId: enter.job,
      attempt: enter.attempt,
      key: enter.key,
      limit: enter.limit,
      proc: enter.proc,
      pid: enter.pid,
      claimedAt: Number(enter.ns),
      entered: Number(enter.ns),
      exited: exit === undefined ? Number.POSITIVE_INFINITY : Number(exit.ns),
      exitSource: exit === undefined ? "open" : "recorded",
      result: exit?.result ?? null
    })
  }
  return out
}

const now = () => Number(process.hrtime.bigint())

/** Runs the scenario once and returns its figures (everything it started is stopped and removed). */
export const runScenario = (s: Scenario, log: (line: string) => void = () => {}): Promise<Figures> =>
  Effect.runPromise(Effect.scoped(scenario(s, log)))

const scenario = (s: Scenario, log: (line: string) => void) =>
  Effect.gen(function* () {
    const server: PrivatePg = yield* Effect.acquireRelease(
      Effect.promise(() => startPrivatePg({ maxConnections: 300 })),
      (pg) => Effect.promise(() => pg.destroy())
    )
    const proxy: TcpProxy = yield* Effect.acquireRelease(
      Effect.promise(() => startProxy(server.port())),
      (p) => Effect.promise(() => p.close())
    )
    const dir = mkdtempSync(join(tmpdir(), "warp-outage-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const viaProxy = `postgres://postgres@127.0.0.1:${proxy.port}/postgres`
    // the parent talks to the server directly (it is not under test), through a layer of its own
    const direct = () =>
      PgClient.layer({ url: Redacted.make(server.url()), maxConnections: 8, idleTimeout: "5 seconds", connectTimeout: "2 seconds" })
    const parentEnv = () =>
      Publisher.layer.pipe(
        Layer.provideMerge(Registry.layer({ handlers: [recordingHandler({ proc: "parent", pid: process.pid })] })),
        Layer.provideMerge(Concurrency.layer.pipe(Layer.provide(SemaphoreProviderMemory.layer))),
        Layer.provideMerge(JobStorePg.layer),
        Layer.provideMerge(direct())
      )
    const retrying = Schedule.max([Schedule.spaced("50 millis"), Schedule.recurs(600)])

    // migrate, start the workers, enqueue
    const ids = yield* Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const children: Array<OutageChild> = []
      for (let i = 0; i < s.processes; i++) {
        children.push(
          new OutageChild({
            url: viaProxy,
            name: `w${i}`,
            fibers: s.lanes,
            pollMs: 20,
            leaseMs: s.leaseMs,
            pingMs: 200,
            graceMs: 5_000,
            pool: s.lanes * 2 + 4,
            recordFile: join(dir, `w${i}.jsonl`),
            ...(s.queryTimeoutMs === undefined ? {} : { queryTimeoutMs: s.queryTimeoutMs }),
            ...(s.answerTimeoutMs === undefined ? {} : { answerTimeoutMs: s.answerTimeoutMs })
          })
        )
      }
      yield* Effect.addFinalizer(() => Effect.promise(() => Promise.all(children.map((c) => c.stop()))))
      yield* Effect.promise(() => Promise.all(children.map((c) => c.ready)))
      const ms = () => s.jobMs[0] + Math.floor(Math.random() * (s.jobMs[1] - s.jobMs[0] + 1))
      const specs: Array<JobParameters.JobParameters> = []
      for (let i = 0; i < s.keyedJobs; i++) specs.push(JobParameters.make().withSemaphore(`key-${i % s.keys}`, s.limit, "Wait"))
      for (let i = 0; i < s.keylessJobs; i++) specs.push(JobParameters.make())
      // interleave keyed and keyless jobs
      specs.sort(() => Math.random() - 0.5)
      const ids = yield* Effect.forEach(specs, (params) => p.enqueue(Work, { ms: ms(), fail: false }, params), { concurrency: 8 })
      return { ids, children }
    }).pipe(Effect.provide(parentEnv()))
    const children = ids.children
    log(`${ids.ids.length} jobs enqueued; ${s.processes} workers x ${s.lanes} lanes, lease ${s.leaseMs} ms`)

    // wait for the fault's moment
    yield* Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      while (true) {
        const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM warp_jobs WHERE state = 'Succeeded'`
        if (row!.n >= s.faultAfterSucceeded) return
        yield* Effect.sleep("10 millis")
      }
    }).pipe(Effect.provide(direct()))

    const stopAt = now()
    const stopWall = Date.now()
    if (s.fault === "stall") {
      proxy.stall()
      log(`stalled ${proxy.stalled()} connections`)
    } else {
      yield* Effect.promise(() => server.stopHard())
      log(`server stopped hard`)
      yield* Effect.sleep(`${s.downMs} millis`)
      if (s.fault === "failover") {
        const port = yield* Effect.promise(freePort)
        yield* Effect.promise(() => server.start(port))
        proxy.retarget(port)
        log(`server back on port ${port}; proxy re-pointed`)
      } else {
        yield* Effect.promise(() => server.start())
        log(`server back`)
      }
    }
    const startAt = now()
    // the server's return: accepting connections again (after its crash recovery), as the parent saw it
    const startWall = Date.now()

    // every job finished, then read the trails
    return yield* Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const started = Date.now()
      while (true) {
        const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM warp_jobs WHERE state IN ('Enqueued', 'Scheduled', 'Processing')`.pipe(
          Effect.retry(retrying)
        )
        if (row!.n === 0) break
        if (Date.now() - started > s.drainTimeoutMs) {
          log(`not drained after ${s.drainTimeoutMs} ms: ${row!.n} jobs left`)
          break
        }
        yield* Effect.sleep("20 millis")
      }
      const states = yield* sql<{ state: string; n: number }>`SELECT state, count(*)::int AS n FROM warp_jobs GROUP BY state`
      const lost = yield* sql<{ job_id: string; message: string }>`
        SELECT job_id, message FROM warp_job_logs WHERE message LIKE 'Result of attempt % lost in a database outage%' ORDER BY id`
      // the server's start (restart/failover): the return above is later by its crash recovery
      const [times] = yield* sql<{ back: string; done: string }>`
        SELECT (extract(epoch FROM pg_postmaster_start_time()) * 1000)::float8::text AS back,
               (extract(epoch FROM (SELECT max(updated_at) FROM warp_jobs)) * 1000)::float8::text AS done`
      const intervals = loadRecords(dir)
      const completedDuring = new Set(
        intervals.filter((i) => i.result === "ok" && i.exited >= stopAt && i.exited <= startAt).map((i) => i.jobId)
      )
      let pendingWrittenMs: number | undefined
      if (completedDuring.size > 0) {
        const [w] = yield* sql<{ at: string | null }>`
          SELECT (extract(epoch FROM max(l.at)) * 1000)::float8::text AS at FROM warp_job_logs l
          WHERE l.kind = 'Succeeded' AND l.job_id IN ${sql.in([...completedDuring])}`
        if (w?.at != null) pendingWrittenMs = Number(w.at) - startWall
      }
      const runs = new Map<string, Array<Interval>>()
      for (const i of intervals) runs.set(i.jobId, [...(runs.get(i.jobId) ?? []), i])
      const lostTexts = new Map<string, Array<string>>()
      for (const l of lost) lostTexts.set(l.job_id, [...(lostTexts.get(l.job_id) ?? []), l.message])
      const logs = children.map((c) => c.logs).join("\n")
      const back = s.fault === "stall" ? undefined : startWall
      // the pace after the return, from the jobs' final writes (server clock)
      const [pace] = back === undefined ? [undefined] : yield* sql<{ left: number; first: number; later: number }>`
        SELECT count(*) FILTER (WHERE updated_at >= to_timestamp(${back / 1000}))::int AS left,
               count(*) FILTER (WHERE updated_at >= to_timestamp(${back / 1000}) AND updated_at < to_timestamp(${back / 1000 + 1}))::int AS first,
               count(*) FILTER (WHERE updated_at >= to_timestamp(${back / 1000 + 1}))::int AS later
        FROM warp_jobs`
      const doneMs = Number(times!.done) - (back ?? 0)
      const steadyRate = pace === undefined || doneMs <= 1500 ? undefined : pace.later / ((doneMs - 1000) / 1000)
      const inFlightIds = new Set([...runs].filter(([, rs]) => rs.some((r) => r.entered <= startAt && r.exited >= stopAt)).map(([id]) => id))
      const enteredAfter = intervals.filter((i) => i.entered > startAt).map((i) => i.entered)
      const inFlightExits = intervals.filter((i) => inFlightIds.has(i.jobId) && Number.isFinite(i.exited)).map((i) => i.exited)
      const figures: Figures = {
        jobs: ids.ids.length,
        states: Object.fromEntries(states.map((r) => [r.state, r.n])),
        handlerRuns: intervals.length,
        completedTwice: [...runs].filter(([, rs]) => rs.filter((r) => r.result === "ok").length > 1).map(([id]) => id),
        rerun: [...runs].filter(([, rs]) => rs.length > 1).map(([id]) => id),
        inFlightAtFault: [...runs]
          .filter(([, rs]) => rs.some((r) => r.entered <= startAt && r.exited >= stopAt))
          .map(([id]) => id),
        completedDuringOutage: [...completedDuring],
        lostTexts: [...lostTexts].map(([id, texts]) => ({ id, texts })),
        overlaps: checkOverlaps(intervals),
        interrupted: intervals.filter((i) => i.result === "interrupted").length,
        outageMs: (startAt - stopAt) / 1e6,
        pendingWrittenMs: back === undefined ? undefined : pendingWrittenMs,
        allDoneMs: Number(times!.done) - (back ?? stopWall),
        serverStartMs: back === undefined ? undefined : startWall - Number(times!.back),
        leftAtReturn: pace?.left,
        firstSecondJobs: pace?.first,
        steadyRate,
        addedByOutageMs: pace === undefined || steadyRate === undefined ? undefined : doneMs - (pace.left / steadyRate) * 1000,
        resumedMs: enteredAfter.length === 0 ? undefined : (Math.min(...enteredAfter) - startAt) / 1e6,
        inFlightDoneMs: inFlightExits.length === 0 ? undefined : (Math.max(...inFlightExits) - startAt) / 1e6,
        unreachableLogs: (logs.match(/job store unreachable/g) ?? []).length,
        reachableLogs: (logs.match(/job store reachable again/g) ?? []).length,
        stalledConnections: proxy.stalled(),
        workersAlive: children.every((c) => c.alive)
      }
      if (process.env.WARP_OUTAGE_DEBUG === "1" && back !== undefined) {
        const early = yield* sql<{ kind: string; msg: string; n: number; first: string; last: string }>`
          SELECT kind, regexp_replace(message, '[0-9a-f-]{36}|key-[0-9]+|w[0-9]+-[0-9a-z-]+', '*', 'g') AS msg, count(*)::int AS n,
                 round(extract(epoch FROM min(at)) * 1000 - ${back})::text AS first, round(extract(epoch FROM max(at)) * 1000 - ${back})::text AS last
          FROM warp_job_logs WHERE at >= to_timestamp(${back / 1000}) AND at < to_timestamp(${back / 1000 + 2}) GROUP BY 1, 2 ORDER BY 3 DESC`
        for (const r of early) log(`after the return: ${r.n} x ${r.kind} '${r.msg}' (${r.first}..${r.last} ms)`)
      }
      if (process.env.WARP_OUTAGE_DEBUG === "1") {
        for (const c of children) log(`--- ${c.config.name} logs:\n${c.logs.split("\n").filter((l) => !l.includes("READY")).slice(-60).join("\n")}`)
        log(`lost texts: ${JSON.stringify(figures.lostTexts)}`)
      }
      if (!figures.workersAlive) for (const c of children) if (!c.alive) log(`worker ${c.config.name} died:\n${c.errors}`)
      return figures
    }).pipe(Effect.provide(direct()))
  })

const secs = (ms: number | undefined) => (ms === undefined ? "-" : `${(ms / 1000).toFixed(2)} s`)

/** A one-line summary of a run's figures. */
export const summary = (name: string, f: Figures): string => {
  const worst = f.overlaps.reduce((m, r) => Math.max(m, r.maxInside), 0)
  const violations = f.overlaps.reduce((n, r) => n + r.violations, 0)
  return [
    `${name}: ${f.jobs} jobs, states ${JSON.stringify(f.states)}, ${f.handlerRuns} handler runs`,
    `outage ${(f.outageMs / 1000).toFixed(1)} s (server start to accepting ${secs(f.serverStartMs)}); in flight at the fault ${f.inFlightAtFault.length}; completed during the outage ${f.completedDuringOutage.length}`,
    `re-run ${f.rerun.length} (interrupted runs ${f.interrupted}); completed twice ${f.completedTwice.length}; results lost in the outage (audit) ${f.lostTexts.length}`,
    `cap: most inside a key ${worst}, violations ${violations}`,
    `pending results written ${f.pendingWrittenMs === undefined ? "-" : `${(f.pendingWrittenMs / 1000).toFixed(2)} s`} after the return; all done ${(f.allDoneMs / 1000).toFixed(2)} s after it`,
    `first handler started ${secs(f.resumedMs)} after the return; last run of a job in flight at the fault ended ${secs(f.inFlightDoneMs)} after it`,
    `jobs left at the return ${f.leftAtReturn ?? "-"}: ${f.firstSecondJobs ?? "-"} done in its first second, then ${f.steadyRate === undefined ? "-" : f.steadyRate.toFixed(0)} jobs/s; the outage added ${secs(f.addedByOutageMs)} to the drain`,
    `worker logs: unreachable ${f.unreachableLogs}, reachable again ${f.reachableLogs}`
  ].join("\n  ")
}
