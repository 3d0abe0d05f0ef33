/**
 * A worker process for the outage tests: `node --import tsx test/support/faults/outageWorker.ts '<json>'`.
 *
 * Like `test/support/workerProcess.ts` (JobStorePg + SemaphoreProviderPg + Concurrency, the soak's
 * {@link Work} contract), except that the handler records its enter and exit in a local file, not in
 * the database: the database is what the tests take away. Each record carries the machine's monotonic
 * clock (`process.hrtime`, CLOCK_MONOTONIC, one clock for every process of the machine) in nanoseconds.
 * Enter is written once the concurrency gate holds the slot, exit before the slot is released.
 * Prints `READY` once its worker has started; SIGTERM stops it gracefully.
 */
import { appendFileSync } from "node:fs"
import { Socket } from "node:net"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import { Concurrency, Handler, Job, JobStorePg, Registry, SemaphoreProviderPg, Worker } from "warp-effect"
import { Work } from "../../soak/workload.js"

/** The configuration a parent passes as the first argument. */
export interface OutageWorkerConfig {
  readonly url: string
  readonly name: string
  readonly fibers: number
  readonly pollMs: number
  readonly leaseMs: number
  readonly pingMs: number
  readonly graceMs: number
  readonly pool: number
  /** The file the handler's enter/exit records are appended to (JSON lines). */
  readonly recordFile: string
  /** The driver's `query_timeout` and `connectionTimeoutMillis` (ms), if set. */
  readonly queryTimeoutMs?: number
  /**
   * Closes a connection whose server has not answered a request within this many ms (an application-level
   * keepalive: a half-open path is noticed by the client only this way, TCP keepalives being answered by
   * whatever holds the other end of the socket). Off if unset.
   */
  readonly answerTimeoutMs?: number
}

/** One line of a record file. */
export interface Record {
  readonly e: "enter" | "exit"
  readonly job: string
  readonly attempt: number
  readonly key: string | null
  readonly limit: number | null
  readonly proc: string
  readonly pid: number
  /** process.hrtime.bigint(), as a decimal string (ns). */
  readonly ns: string
  readonly result?: "ok" | "failed" | "interrupted"
}

const config = JSON.parse(process.argv[2] ?? "{}") as OutageWorkerConfig

const record = (r: Omit<Record, "proc" | "pid" | "ns">) =>
  appendFileSync(config.recordFile, JSON.stringify({ ...r, proc: config.name, pid: process.pid, ns: process.hrtime.bigint().toString() }) + "\n")

const handler = Handler.job(Work, ({ ms }, info) =>
  Effect.gen(function* () {
    const attempt = yield* Effect.serviceOption(Job.CurrentAttempt)
    const policy = Option.flatMap(attempt, (a) => Option.fromNullishOr(a.policies.concurrency))
    const key = Option.match(policy, { onNone: () => null, onSome: (p) => p.key })
    const limit = Option.match(policy, { onNone: () => null, onSome: (p) => p.limit })
    const base = { job: info.jobId, attempt: info.attempt, key, limit }
    yield* Effect.acquireUseRelease(
      Effect.sync(() => record({ e: "enter", ...base })),
      () => Effect.sleep(Duration.millis(ms)),
      (_, exit) =>
        Effect.sync(() => record({ e: "exit", ...base, result: Exit.isSuccess(exit) ? "ok" : Exit.hasInterrupts(exit) ? "interrupted" : "failed" }))
    )
  })
)

const url = new URL(config.url)
if (config.queryTimeoutMs !== undefined) url.searchParams.set("query_timeout", String(config.queryTimeoutMs))

/**
 * The driver's socket, closed when bytes written to it have waited `ms` for the first byte of an answer
 * (an idle connection is never closed: nothing is awaited on it). The error carries ETIMEDOUT, like a
 * TCP keepalive giving up. (Watches `bytesWritten`: net.Socket puts its own `write` back on connect.)
 */
const answerWatchdog = (ms: number) => () => {
  const socket = new Socket()
  let answered = 0
  let waitingSince: number | undefined
  socket.on("data", () => {
    answered = socket.bytesWritten
    waitingSince = undefined
  })
  const timer = setInterval(() => {
    const now = Date.now()
    if (socket.bytesWritten <= answered) return
    if (waitingSince === undefined) waitingSince = now
    else if (now - waitingSince > ms) {
      socket.destroy(Object.assign(new Error(`no answer from the server within ${ms} ms`), { code: "ETIMEDOUT" }))
    }
  }, Math.max(10, ms / 8))
  timer.unref()
  socket.once("close", () => clearInterval(timer))
  // @effect/sql-pg 4 writes to the stream it is handed at once: it must be connected (or connecting) here
  socket.connect(Number(url.port || 5432), url.hostname)
  return socket
}

const sqlLayer = PgClient.layer({
  ...(config.answerTimeoutMs === undefined ? {} : { stream: answerWatchdog(config.answerTimeoutMs) }),
  url: Redacted.make(url.toString()),
  maxConnections: config.pool,
  applicationName: config.name,
  idleTimeout: "30 seconds",
  connectTimeout: config.queryTimeoutMs === undefined ? "5 seconds" : Duration.millis(config.queryTimeoutMs)
})

const env = Registry.layer({ handlers: [handler] }).pipe(
  Layer.provideMerge(Concurrency.layer),
  Layer.provideMerge(SemaphoreProviderPg.layer({ pingInterval: `${config.pingMs} millis` })),
  Layer.provideMerge(JobStorePg.layerWithoutMigrations),
  Layer.provideMerge(sqlLayer)
)

const main = Effect.gen(function* () {
  yield* Worker.make({
    addons: [Concurrency.addon],
    concurrency: config.fibers,
    pollInterval: `${config.pollMs} millis`,
    lease: `${config.leaseMs} millis`,
    gracePeriod: `${config.graceMs} millis`,
    workerId: `${config.name}/${process.pid}`
  })
  process.stdout.write("READY\n")
  return yield* Effect.never
}).pipe(Effect.scoped)

NodeRuntime.runMain(main.pipe(Effect.provide(env), Effect.provideService(References.MinimumLogLevel, "Info")), {
  disableErrorReporting: false
})
