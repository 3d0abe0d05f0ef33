/**
 * The soak / fault harness. Worker processes (`test/support/workerProcess.ts`) run a mixed
 * Mutex/Semaphore, Skip/Wait workload against one PostgreSQL database while the harness injects
 * faults:
 *
 * - `kill`: SIGKILL a random worker process (its death time is recorded just before the signal),
 *   and start a new one in its place after a short delay;
 * - `terminate`: `pg_terminate_backend` every backend of a random worker process (found by its
 *   `application_name`), recording which keys it held advisory locks of at that instant;
 * - `interrupt`: SIGUSR2 a random worker process, which interrupts its running attempts (the
 *   worker is restarted with a zero grace period; interrupted attempts are requeued).
 *
 * Afterwards the checker proves, from the handlers' enter/exit records and the job rows: never more
 * than N holders of a key at any instant (see `intervals.ts` for lost slots), no job lost, no job
 * succeeded twice or ran after succeeding, Wait-mode jobs all Succeeded (or Failed by their own
 * handler), Skip-mode jobs Succeeded or Deleted with the exact audit text, the stats counters equal
 * the rows, and no advisory lock left in `pg_locks` (checked while the workers still run, and after
 * they stopped).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import { Redis } from "ioredis"
import pg from "pg"
import { Concurrency, JobMetadata, JobParameters, JobStorePg, type NewJob, SemaphoreProviderMemory } from "warp-effect"
import { cancelledText, LOCK_PREFIX } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import * as JobId from "../../src/internal/job/JobId.js"
import { publishMetadata } from "../../src/internal/job/Publisher.js"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Redacted from "effect/Redacted"
import { type ChildWorker, spawnWorker } from "./children.js"
import { checkOverlaps, loadIntervals, loadTerminations, summarize } from "./intervals.js"
import { createTables, HANDLER_FAILURE, Work } from "./workload.js"

/** What to run. */
export interface SoakOptions {
  /** A server URL; a fresh database is created on it (and dropped afterwards unless `keep`). */
  readonly serverUrl: string
  readonly processes: number
  readonly fibers: number
  readonly jobs: number
  readonly keys: number
  /** Mean time between faults; 0 disables faults. */
  readonly faultEveryMs: number
  /** Relative weights of the fault kinds. */
  readonly weights: { readonly kill: number; readonly terminate: number; readonly interrupt: number }
  /** Handler time, uniform in 0 .. maxHandlerMs. */
  readonly maxHandlerMs: number
  /** Share of jobs whose handler fails. */
  readonly failRate: number
  readonly pingMs: number
  readonly leaseMs: number
  readonly pollMs: number
  /** Run the workers with slot reuse for Wait-mode keys on. */
  readonly slotReuse: boolean
  /**
   * The workers' semaphore provider. With `redis` (at `redisUrl`), slots are Redis leases: a connection
   * termination frees none of them, so the checker counts every handler as holding its slot (no
   * lost-slot allowance), and "every slot free" means no unexpired lease left under the run's prefix.
   */
  readonly provider: "pg" | "redis"
  readonly redisUrl: string
  /** Redis lease of a held slot (a killed worker's slots are free again after it). */
  readonly redisLeaseMs: number
  /** Delay before a killed worker is replaced. */
  readonly restartMs: number
  /** Give up (and report) after this long. */
  readonly timeoutMs: number
  readonly seed: number
  readonly keep: boolean
  readonly log: (line: string) => void
}

/** Defaults of `npm run soak`. */
export const defaults: Omit<SoakOptions, "serverUrl"> = {
  processes: 4,
  fibers: 6,
  jobs: 100_000,
  keys: 100,
  faultEveryMs: 2_000,
  weights: { kill: 1, terminate: 1, interrupt: 1 },
  maxHandlerMs: 4,
  failRate: 0.01,
  pingMs: 100,
  leaseMs: 4_000,
  pollMs: 20,
  slotReuse: false,
  provider: "pg",
  redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
  redisLeaseMs: 2_000,
  restartMs: 300,
  timeoutMs: 14 * 60_000,
  seed: 1,
  keep: false,
  log: (line) => console.log(line)
}

/** The result of a soak run. */
export interface SoakSummary {
  readonly jobs: number
  readonly processes: number
  readonly fibers: number
  readonly keys: number
  readonly slotReuse: boolean
  readonly provider: "pg" | "redis"
  readonly durationMs: number
  readonly runMs: number
  readonly faults: Record<string, number>
  readonly states: Record<string, number>
  readonly handlerRuns: number
  readonly exits: Record<string, number>
  readonly counters: { readonly succeeded: number; readonly failed: number; readonly deleted: number; readonly requeued: number }
  readonly recovered: number
  readonly slotLostRequeues: number
  readonly interruptedRequeues: number
  readonly gateUnavailableRequeues: number
  readonly maxInsideOverLimit: number
  /** `holding > limit` episodes: must be 0. */
  readonly violations: number
  /** `inside > limit` episodes explained by lost slots (a connection terminated under a running handler). */
  readonly lostSlotOverlaps: number
  /** Every other broken promise, by kind (must all be 0). */
  readonly problems: Record<string, number>
  readonly examples: ReadonlyArray<string>
  readonly advisoryLocksWhileRunning: number
  readonly advisoryLocksAfterStop: number
  readonly timedOut: boolean
}

/** A small seeded PRNG (mulberry32), so a workload can be replayed. */
const prng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const withDatabase = (url: string, database: string) => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

const admin = async <A>(url: string, f: (c: pg.Client) => Promise<A>): Promise<A> => {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    return await f(c)
  } finally {
    await c.end()
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The limit of key `i`: a third Mutex, the rest Semaphore(2, 3 or 5). */
export const limitOfKey = (i: number): number => (i % 3 === 0 ? 1 : [2, 3, 5][i % 3 === 1 ? (i >> 1) % 3 : (i >> 2) % 3]!)

/** Unexpired slot leases in the hashes under `prefix` (a slot field's value is `token|expiryMs`). */
const redisSlotsHeld = async (redis: Redis, prefix: string): Promise<number> => {
  const [seconds, micros] = await redis.time()
  const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
  let held = 0
  for (const key of await redis.keys(`${prefix}*`)) {
    for (const [field, value] of Object.entries(await redis.hgetall(key))) {
      // slot fields are the indices; `fence` holds the name's last fencing token
      if (/^\d+$/.test(field) && Number(value.slice(value.lastIndexOf("|") + 1)) > now) held++
    }
  }
  return held
}

const deleteRedisPrefix = async (redis: Redis, prefix: string) => {
  const keys = await redis.keys(`${prefix}*`)
  if (keys.length > 0) await redis.del(...keys)
}

/** Runs a soak and returns its summary. */
export const runSoak = async (options: SoakOptions): Promise<SoakSummary> => {
  const o = options
  const t0 = Date.now()
  const random = prng(o.seed)
  const dbName = `warp_soak_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 6)}`
  await admin(o.serverUrl, (c) => c.query(`CREATE DATABASE ${dbName}`))
  const url = withDatabase(o.serverUrl, dbName)
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(JobStorePg.layer, Concurrency.layer.pipe(Layer.provide(SemaphoreProviderMemory.layer))).pipe(
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 4, applicationName: "warp-soak-harness" }))
    )
  )
  const run = <A, E>(effect: Effect.Effect<A, E, JobStore | SqlClient.SqlClient>) => runtime.runPromise(effect)
  const control = new pg.Client({ connectionString: url, application_name: "warp-soak-control" })
  const redisPrefix = `warp:soak:${dbName}:`
  const redis = o.provider === "redis" ? new Redis(o.redisUrl, { maxRetriesPerRequest: 2 }) : undefined
  redis?.on("error", (e) => o.log(`redis error: ${e.message}`))
  const children = new Map<string, ChildWorker>()
  const faults: Record<string, number> = { kill: 0, terminate: 0, interrupt: 0 }
  let incarnation = 0
  let timedOut = false
  let stopping = false
  let unexpectedExits = 0
  let keepForDiagnosis = false

  try {
    await run(createTables)
    control.on("error", (e) => o.log(`control connection error: ${e.message}`))
    await control.connect()

    // the workload
    const keys = Array.from({ length: o.keys }, (_, i) => ({ name: `soak-key-${i}`, limit: limitOfKey(i) }))
    const lockKeys = new Map<string, string>()
    for (const k of keys) for (let s = 0; s < k.limit; s++) lockKeys.set(lockId(slotName(LOCK_PREFIX + k.name, s)), k.name)
    const now = new Date()
    const rows: Array<NewJob> = []
    for (let n = 0; n < o.jobs; n++) {
      const k = keys[Math.floor(random() * keys.length)]!
      const mode = random() < 0.5 ? "Skip" : "Wait"
      const params = k.limit === 1 ? JobParameters.make().withMutex(k.name, mode) : JobParameters.make().withSemaphore(k.name, k.limit, mode)
      rows.push({
        id: JobId.make(),
        type: Work.name,
        handler: null,
        payload: { ms: Math.floor(random() * (o.maxHandlerMs + 1)), fail: random() < o.failRate },
        state: "Enqueued",
        scheduleTime: now,
        metadata: JobMetadata.encode(publishMetadata(Work, params, now))
      })
    }
    for (let i = 0; i < rows.length; i += 2_000) await run(Effect.flatMap(JobStore, (s) => s.insert(rows.slice(i, i + 2_000))))
    o.log(`inserted ${rows.length} jobs over ${keys.length} keys in ${Date.now() - t0} ms`)

    // the workers: one supervised slot per process; a slot whose process exits is refilled
    const ready = new Set<ChildWorker>()
    const killedByUs = new Set<ChildWorker>()
    const start = (slot: number): ChildWorker => {
      const name = `soak-w${slot}-${incarnation++}`
      const child = spawnWorker({
        url,
        name,
        fibers: o.fibers,
        pollMs: o.pollMs,
        leaseMs: o.leaseMs,
        pingMs: o.pingMs,
        graceMs: 0,
        pool: 2 * o.fibers + 4,
        slotReuse: o.slotReuse,
        provider: o.provider,
        redis: { url: o.redisUrl, prefix: redisPrefix, leaseMs: o.redisLeaseMs }
      })
      children.set(`w${slot}`, child)
      child.ready.then(
        () => void ready.add(child),
        () => {}
      )
      void child.exited.then(({ code, signal }) => {
        ready.delete(child)
        if (stopping) return
        if (!killedByUs.has(child)) {
          unexpectedExits++
          o.log(`worker ${name} exited unexpectedly (code ${code}, signal ${signal}):\n${child.errors.slice(-2_000)}`)
        }
        setTimeout(() => {
          if (!stopping) start(slot)
        }, o.restartMs)
      })
      return child
    }
    await Promise.all(Array.from({ length: o.processes }, (_, i) => start(i).ready))
    const runStart = Date.now()
    o.log(`${o.processes} worker processes x ${o.fibers} fibers ready after ${runStart - t0} ms`)

    // each branch matches a partial index of warp_jobs: no full scan of the table per poll
    const pending = async () =>
      Number(
        (
          await control.query(
            `SELECT (SELECT count(*) FROM warp_jobs WHERE state IN ('Scheduled','Enqueued'))
                  + (SELECT count(*) FROM warp_jobs WHERE state = 'Processing') AS n`
          )
        ).rows[0].n
      )

    const inject = async () => {
      // only processes past startup: their signal handlers and connections are in place
      const alive = [...ready].filter((c) => c.alive)
      if (alive.length === 0) return
      const victim = alive[Math.floor(random() * alive.length)]!
      const w = o.weights
      const draw = random() * (w.kill + w.terminate + w.interrupt)
      if (draw < w.kill) {
        // the handler cannot run after the process is gone; its locks are freed only after that
        const at = (await control.query(`SELECT clock_timestamp() AS at`)).rows[0].at
        killedByUs.add(victim)
        victim.signal("SIGKILL")
        faults.kill!++
        await control.query(`INSERT INTO rel_deaths (pid, proc, at) VALUES ($1, $2, $3)`, [victim.pid, victim.config.name, at])
      } else if (draw < w.kill + w.terminate) {
        // a window [started, at]: the time, then the victim backends and the advisory locks they hold,
        // then every victim signalled at once (no wait per backend: terminating them one by one, each
        // waited for, stretched the window to seconds), then, once all are gone, the time again
        // (the locks are read and the backends signalled in one statement: held is materialized first,
        // the CASE makes every signal wait for it)
        const started = (await control.query(`SELECT clock_timestamp() AS at`)).rows[0].at
        const r = await control.query(
          `WITH victims AS MATERIALIZED (SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()),
                held AS MATERIALIZED (SELECT DISTINCT ((l.classid::bigint << 32) | l.objid::bigint)::text AS id
                         FROM pg_locks l JOIN victims v USING (pid) WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted),
                signalled AS MATERIALIZED (SELECT v.pid, CASE WHEN (SELECT count(*) FROM held) >= 0 THEN pg_terminate_backend(v.pid) ELSE false END AS ok
                                           FROM victims v)
           SELECT ARRAY(SELECT pid FROM signalled) AS pids, ARRAY(SELECT id FROM held) AS held`,
          [victim.config.name]
        )
        const pids: Array<number> = r.rows[0].pids ?? []
        for (let i = 0; i < 1_000; i++) {
          if (Number((await control.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY($1::int[])`, [pids])).rows[0].n) === 0) break
          await sleep(2)
        }
        const at = (await control.query(`SELECT clock_timestamp() AS at`)).rows[0].at
        const held: Array<string> = r.rows[0].held ?? []
        const heldKeys = [...new Set(held.map((id) => lockKeys.get(id) ?? `unknown-lock:${id}`))]
        faults.terminate!++
        await control.query(`INSERT INTO rel_faults (kind, proc, pid, started, at, locks) VALUES ('terminate', $1, $2, $3, $4, $5)`, [
          victim.config.name,
          victim.pid,
          started,
          at,
          heldKeys
        ])
      } else {
        victim.signal("SIGUSR2")
        faults.interrupt!++
        await control.query(`INSERT INTO rel_faults (kind, proc, pid, at) VALUES ('interrupt', $1, $2, clock_timestamp())`, [victim.config.name, victim.pid])
      }
    }

    let nextFault = Date.now() + (o.faultEveryMs > 0 ? o.faultEveryMs * (0.5 + random()) : Number.POSITIVE_INFINITY)
    let nextReport = Date.now() + 10_000
    while (true) {
      const left = await pending()
      if (left === 0) break
      if (Date.now() - t0 > o.timeoutMs) {
        timedOut = true
        o.log(`timed out with ${left} jobs pending`)
        break
      }
      if (Date.now() >= nextReport) {
        o.log(`${Math.round((Date.now() - runStart) / 1000)} s: ${o.jobs - left}/${o.jobs} done; faults ${JSON.stringify(faults)}`)
        nextReport += 10_000
      }
      if (Date.now() >= nextFault) {
        await inject()
        nextFault = Date.now() + o.faultEveryMs * (0.5 + random())
      }
      await sleep(Math.min(250, Math.max(20, nextFault - Date.now())))
    }
    stopping = true
    const runMs = Date.now() - runStart

    // every slot is free while the workers still run (released on completion, not by disconnection):
    // advisory locks in this database, or unexpired leases under this run's Redis prefix
    const advisory = async () =>
      redis !== undefined
        ? redisSlotsHeld(redis, redisPrefix)
        : Number(
            (
              await control.query(
                `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
              )
            ).rows[0].n
          )
    // a worker restarted moments ago may still hold a slot of a just-finished attempt: settle briefly;
    // a Redis slot of a killed worker is free once its lease runs out
    const settleRounds = redis !== undefined ? Math.ceil(o.redisLeaseMs / 100) + 20 : 20
    let advisoryLocksWhileRunning = await advisory()
    for (let i = 0; i < settleRounds && advisoryLocksWhileRunning > 0; i++) {
      await sleep(100)
      advisoryLocksWhileRunning = await advisory()
    }
    await Promise.all([...children.values()].map((c) => c.stop()))
    const advisoryLocksAfterStop = await advisory()

    // the checks
    const intervals = await run(loadIntervals)
    // a connection termination frees PostgreSQL advisory locks, never Redis leases
    const terminations = o.provider === "pg" ? await run(loadTerminations) : []
    const reports = checkOverlaps(intervals, terminations)
    const overlap = summarize(reports)
    const maxInsideOverLimit = Math.max(0, ...reports.map((r) => r.maxInside - r.limit))
    // for each violation: the faults that struck the processes inside, around that instant
    const faultRows = (
      await control.query(
        `SELECT kind, proc, pid, (extract(epoch from at) * 1000000)::bigint::text AS at, locks FROM rel_faults
         UNION ALL SELECT 'kill', proc, pid, (extract(epoch from at) * 1000000)::bigint::text, '{}' FROM rel_deaths`
      )
    ).rows.map((f: any) => ({ ...f, at: Number(f.at) }))
    const context = reports.flatMap((r) =>
      r.episodes.map((e) => {
        const pids = new Set(e.inside.map((i) => i.pid))
        const near = faultRows.filter((f: any) => pids.has(Number(f.pid)) && f.at > e.at - 2_000_000 && f.at < e.at + 500_000)
        return `  faults near the violation on '${r.key}' at ${new Date(e.at / 1000).toISOString()}: ${
          near.map((f: any) => `${f.kind} ${f.proc} at ${new Date(f.at / 1000).toISOString()}${f.kind === "terminate" ? ` (held ${JSON.stringify(f.locks)})` : ""}`).join("; ") || "none"
        }; inside: ${e.inside.map((i) => `${i.jobId}#${i.attempt}@${i.proc} claimed ${new Date(i.claimedAt / 1000).toISOString()}`).join(", ")}`
      })
    )
    const q = async (text: string) => Number((await control.query(text)).rows[0].n)
    const states: Record<string, number> = {}
    for (const r of (await control.query(`SELECT state, count(*)::int AS n FROM warp_jobs GROUP BY state`)).rows) states[r.state] = r.n
    const exits: Record<string, number> = {}
    for (const i of intervals) exits[`${i.exitSource}:${i.result ?? "none"}`] = (exits[`${i.exitSource}:${i.result ?? "none"}`] ?? 0) + 1
    const counter = async (k: string) => Number((await control.query(`SELECT coalesce((SELECT sum(value) FROM warp_counters WHERE key = $1), 0) AS n`, [k])).rows[0].n)
    const counters = {
      succeeded: await counter("stats:succeeded"),
      failed: await counter("stats:failed"),
      deleted: await counter("stats:deleted"),
      requeued: await counter("stats:requeued")
    }
    const mode = `(metadata #>> '{policies,concurrency,value,mode}')`
    const key = `(metadata #>> '{policies,concurrency,value,key}')`
    const limit = `(metadata #>> '{policies,concurrency,value,limit}')`
    const lastLog = (col: string) => `(SELECT ${col} FROM warp_job_logs l WHERE l.job_id = j.id ORDER BY l.id DESC LIMIT 1)`
    const fail = `(payload ->> 'fail')::boolean`
    const problems: Record<string, number> = {
      jobsMissing: o.jobs - (await q(`SELECT count(*)::int AS n FROM warp_jobs`)),
      notTerminal: await q(`SELECT count(*)::int AS n FROM warp_jobs WHERE state NOT IN ('Succeeded','Failed','Deleted')`),
      waitNotAsHandlerSaid: await q(
        `SELECT count(*)::int AS n FROM warp_jobs j WHERE ${mode} = 'Wait' AND state <> CASE WHEN ${fail} THEN 'Failed' ELSE 'Succeeded' END`
      ),
      skipNotAsHandlerSaid: await q(
        `SELECT count(*)::int AS n FROM warp_jobs j WHERE ${mode} = 'Skip' AND state <> 'Deleted' AND state <> CASE WHEN ${fail} THEN 'Failed' ELSE 'Succeeded' END`
      ),
      failedNotByHandler: await q(`SELECT count(*)::int AS n FROM warp_jobs j WHERE state = 'Failed' AND position('${HANDLER_FAILURE}' in ${lastLog("message")}) = 0`),
      deletedWithoutExactText: 0,
      succeededTwice: await q(
        `SELECT count(*)::int AS n FROM (SELECT job_id FROM warp_job_logs WHERE kind = 'Succeeded' GROUP BY job_id HAVING count(*) > 1) x`
      ),
      succeededWithoutLog: await q(
        `SELECT count(*)::int AS n FROM warp_jobs j WHERE state = 'Succeeded' AND NOT EXISTS (SELECT 1 FROM warp_job_logs l WHERE l.job_id = j.id AND l.kind = 'Succeeded')`
      ),
      ranAfterSucceeded: await q(
        `SELECT count(*)::int AS n FROM rel_intervals i JOIN warp_job_logs l ON l.job_id = i.job_id AND l.kind = 'Succeeded' WHERE i.entered > l.at`
      ),
      counterMismatch:
        Number(counters.succeeded !== (states.Succeeded ?? 0)) + Number(counters.failed !== (states.Failed ?? 0)) + Number(counters.deleted !== (states.Deleted ?? 0)),
      openIntervals: intervals.filter((i) => i.exitSource === "open").length,
      unexpectedExits,
      advisoryLocksLeft: advisoryLocksWhileRunning + advisoryLocksAfterStop
    }
    // exact audit text of every Skip-mode drop
    for (const r of (await control.query(`SELECT ${key} AS key, ${limit}::int AS lim, ${lastLog("kind")} AS kind, ${lastLog("message")} AS message FROM warp_jobs j WHERE state = 'Deleted'`)).rows) {
      if (r.kind !== "Cancelled" || r.message !== cancelledText(r.key, r.lim)) problems.deletedWithoutExactText!++
    }
    keepForDiagnosis = overlap.violations > 0 || Object.values(problems).some((n) => n !== 0)
    const recovered = await q(`SELECT count(*)::int AS n FROM warp_job_logs WHERE kind = 'Recovered'`)
    const logsLike = (pattern: string) => q(`SELECT count(*)::int AS n FROM warp_job_logs WHERE kind = 'Requeued' AND message LIKE '${pattern}'`)
    return {
      jobs: o.jobs,
      processes: o.processes,
      fibers: o.fibers,
      keys: o.keys,
      slotReuse: o.slotReuse,
      provider: o.provider,
      durationMs: Date.now() - t0,
      runMs,
      faults,
      states,
      handlerRuns: intervals.length,
      exits,
      counters,
      recovered,
      slotLostRequeues: await logsLike("Slot of % lost while running%"),
      interruptedRequeues: await logsLike("Attempt interrupted%"),
      gateUnavailableRequeues: await logsLike("Concurrency gate unavailable%"),
      maxInsideOverLimit,
      violations: overlap.violations,
      lostSlotOverlaps: overlap.lostSlotOverlaps,
      problems,
      examples: [...overlap.examples, ...context].slice(0, 20),
      advisoryLocksWhileRunning,
      advisoryLocksAfterStop,
      timedOut
    }
  } finally {
    await Promise.all([...children.values()].map((c) => c.stop(2_000).catch(() => {})))
    await control.end().catch(() => {})
    if (redis !== undefined) {
      await deleteRedisPrefix(redis, redisPrefix).catch(() => {})
      redis.disconnect()
    }
    await runtime.dispose()
    if (!o.keep && !keepForDiagnosis) await admin(o.serverUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)).catch(() => {})
    else o.log(`database ${dbName} kept for diagnosis`)
  }
}

/** The summary as text. */
export const formatSummary = (s: SoakSummary): string => {
  const ok = s.violations === 0 && Object.values(s.problems).every((n) => n === 0) && !s.timedOut
  return [
    `soak ${ok ? "PASSED" : "FAILED"}: ${s.jobs} jobs, ${s.keys} keys, ${s.processes} processes x ${s.fibers} fibers${s.slotReuse ? ", slot reuse on" : ""}${s.provider === "redis" ? ", Redis provider" : ""}`,
    `  duration ${(s.durationMs / 1000).toFixed(1)} s (workers ran ${(s.runMs / 1000).toFixed(1)} s, ${Math.round(s.jobs / (s.runMs / 1000))} jobs/s)`,
    `  faults injected: ${Object.entries(s.faults).map(([k, n]) => `${k} ${n}`).join(", ")}`,
    `  final states: ${Object.entries(s.states).map(([k, n]) => `${k} ${n}`).join(", ")}`,
    `  handler runs ${s.handlerRuns} (${Object.entries(s.exits).map(([k, n]) => `${k} ${n}`).join(", ")})`,
    `  counters: succeeded ${s.counters.succeeded}, failed ${s.counters.failed}, deleted ${s.counters.deleted}, requeued ${s.counters.requeued}`,
    `  recovered after lease expiry ${s.recovered}; requeued: slot lost ${s.slotLostRequeues}, interrupted ${s.interruptedRequeues}, gate unavailable ${s.gateUnavailableRequeues}`,
    `  violations (more than N holders of a key whose locks were held) ${s.violations}`,
    `  lost-slot overlaps (a terminated connection's handler still running while its slot was retaken) ${s.lostSlotOverlaps}, max over limit ${s.maxInsideOverLimit}`,
    `  other checks: ${Object.entries(s.problems).map(([k, n]) => `${k} ${n}`).join(", ")}`,
    `  ${s.provider === "redis" ? "Redis slot leases" : "advisory locks"} left: ${s.advisoryLocksWhileRunning} while running, ${s.advisoryLocksAfterStop} after stop${s.timedOut ? "; TIMED OUT" : ""}`,
    ...s.examples.map((e) => `  ${e}`)
  ].join("\n")
}

/** Whether a summary shows every guarantee kept. */
export const passed = (s: SoakSummary): boolean => s.violations === 0 && Object.values(s.problems).every((n) => n === 0) && !s.timedOut
