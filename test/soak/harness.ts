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
 *   worker is restarted with a zero grace period; interrupted attempts are requeued);
 * - `pause` / `pauseLong`: SIGSTOP a worker process running a keyed handler for `pauseMs` (meant below
 *   the slot deadline: nobody may get its slots meanwhile) or `pauseLongMs` (beyond it: its slots may be
 *   granted again while it sleeps — the deadline is the longest pause that never over-admits), then
 *   SIGCONT. A run inside during a long pause must not record its handler's outcome: it is requeued as
 *   lapsed (or lost, when the driver reports the connection the server ended first); such runs are
 *   counted apart by the checker from the pause's start (`overlapsOfLapsedRuns`), every other overlap —
 *   short pauses included — stays a violation;
 * - `redisRestart` / `redisStall` (Redis provider only, on a private redis-server the harness starts on a
 *   free port, without persistence): SIGKILL the server and start it again on the same port (every lease
 *   forgotten), or SIGSTOP it for `redisStallMs` (beyond the lease), then SIGCONT.
 *
 * With `writes`, every keyed handler writes its slot's resource row once its work is done, with the
 * README's fencing pattern (`fenced`) or without it (`unfenced`, an ablation); the checker counts
 * accepted writes after a newer holder's token had already been tried on that slot
 * (`staleWritesAccepted`, must be 0).
 *
 * Besides the plain keys, a share of the jobs (`capShare`) goes to keys under one total cap
 * (`soak-gkey-{i}`, Semaphore(2) each, Skip or Wait, group `soak-group` capped at `groupTotal`) and to
 * `CancelRunning` keys (`soak-cr-{i}`, longer handlers, so newer jobs replace running ones).
 *
 * Afterwards the checker proves, from the handlers' enter/exit records and the job rows: never more
 * than N holders of a key at any instant (see `intervals.ts` for lost slots), nor more than the total
 * of the group (every run of a group key counted as a holder of the group, the same sweep), no job
 * lost, no job succeeded twice or ran after succeeding, Wait-mode jobs all Succeeded (or Failed by
 * their own handler), Skip-mode jobs Succeeded or Deleted with the exact audit text (the key's, or for
 * a group key the group's), CancelRunning jobs Succeeded (Failed by their handler) or Deleted with
 * `Cancelled — replaced by newer job {id} of '{key}'…` naming a job of the same key submitted after
 * them, the newest job of each CancelRunning key run to its end, the stats counters equal the rows,
 * and no advisory lock left in `pg_locks` (checked while the workers still run, and after they
 * stopped).
 */
import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import { Redis } from "ioredis"
import pg from "pg"
import { Concurrency, Job, JobMetadata, JobParameters, JobStorePg, SemaphoreProviderMemory } from "warp-effect"
import { cancelledText, groupCancelledText, groupRequeuedText, LOCK_PREFIX, TOTAL_PREFIX } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import * as JobId from "../../src/internal/job/JobId.js"
import { publishMetadata } from "../../src/internal/publisher/Publisher.js"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Redacted from "effect/Redacted"
import * as PrivateRedis from "../support/faults/PrivateRedis.js"
import { type ChildWorker, spawnWorker } from "./children.js"
import { asGroup, checkOverlaps, type Lapse, loadIntervals, loadTerminations, summarize } from "./intervals.js"
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
  /**
   * Faults are injected during this long from the start of the run only (default: the whole run); the
   * jobs left then drain without faults. Bounds a run's length on a slow or loaded machine, where
   * restarts and lease recoveries set the pace while faults go on.
   */
  readonly faultWindowMs?: number
  /** Relative weights of the fault kinds (the pause and Redis kinds: 0 when absent). */
  readonly weights: {
    readonly kill: number
    readonly terminate: number
    readonly interrupt: number
    readonly pause?: number
    readonly pauseLong?: number
    readonly redisRestart?: number
    readonly redisStall?: number
  }
  /** SIGSTOP time of a `pause` fault (below the slot deadline). */
  readonly pauseMs?: number
  /** SIGSTOP time of a `pauseLong` fault (beyond the slot deadline). */
  readonly pauseLongMs?: number
  /** SIGSTOP time of the private redis-server in a `redisStall` fault (beyond the Redis lease). */
  readonly redisStallMs?: number
  /** Fenced resource writes by every keyed handler (`unfenced`: without the fence condition, an ablation). */
  readonly writes?: "fenced" | "unfenced"
  /** `false`: the workers' lapse check is off (an ablation). */
  readonly lapseCheck?: boolean
  /** `true`: the workers never learn a slot was lost (an ablation; with `lapseCheck: false` the pause checks must fail). */
  readonly ignoreSlotLoss?: boolean
  /** Handler time, uniform in 0 .. maxHandlerMs. */
  readonly maxHandlerMs: number
  /** Share of jobs whose handler fails. */
  readonly failRate: number
  readonly pingMs: number
  /**
   * The PostgreSQL provider's slot deadline: a killed worker's slots are granted again once their
   * lock-delay markers expire, after at most this long.
   */
  readonly slotDeadlineMs: number
  /** The PostgreSQL provider's lock-delay (off only to measure its cost: the checker then finds lost-slot overlaps). */
  readonly lockDelay: boolean
  readonly leaseMs: number
  readonly pollMs: number
  /** Run the workers with slot reuse for Wait-mode keys on. */
  readonly slotReuse: boolean
  /**
   * The workers' semaphore provider. With `redis` (at `redisUrl`), slots are Redis leases: a connection
   * termination frees none of them, and "every slot free" means no unexpired lease left under the
   * run's prefix.
   */
  readonly provider: "pg" | "redis"
  readonly redisUrl: string
  /** Redis lease of a held slot (a killed worker's slots are free again after it). */
  readonly redisLeaseMs: number
  /**
   * Keys under a total cap (0: none): `soak-gkey-{i}`, each `Semaphore(key, 2)` (Skip or Wait) with
   * `total: { group: "soak-group", limit: groupTotal }`.
   */
  readonly groupKeys: number
  readonly groupTotal: number
  /** `CancelRunning` keys (0: none): `soak-cr-{i}`, a `Mutex`, every third a `Semaphore(key, 2)`. */
  readonly cancelRunningKeys: number
  /** Share of the jobs on the group's keys and on the CancelRunning keys (half each, when both are on). */
  readonly capShare: number
  /** Handler time of the group's jobs, uniform in 0 .. this (longer than the plain ones: the group fills up). */
  readonly groupHandlerMs: number
  /** Handler time of CancelRunning jobs, uniform in 0 .. this (long enough for newer jobs to replace them). */
  readonly cancelRunningHandlerMs: number
  /** The workers' cancel check interval (how soon a replaced holder is interrupted). */
  readonly cancelCheckMs: number
  /** Delay before a killed worker is replaced. */
  readonly restartMs: number
  /**
   * A process is killed only once it has been ready this long (default 1 s), so that every incarnation
   * runs jobs before its next kill: on a loaded machine a restart takes seconds, and kills drawn as soon
   * as a process was ready kept every worker down.
   */
  readonly minUptimeMs?: number
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
  slotDeadlineMs: 2_000,
  lockDelay: true,
  leaseMs: 4_000,
  pollMs: 20,
  slotReuse: false,
  provider: "pg",
  redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
  redisLeaseMs: 2_000,
  groupKeys: 4,
  groupTotal: 3,
  cancelRunningKeys: 3,
  capShare: 0.1,
  groupHandlerMs: 40,
  cancelRunningHandlerMs: 100,
  cancelCheckMs: 50,
  restartMs: 300,
  // the default run (100,000 jobs, a tenth on the slow total-cap and CancelRunning keys) took 13 min 39 s
  // on a 2-core machine (124 jobs/s): a timeout of 14 minutes failed runs that were only slow
  timeoutMs: 30 * 60_000,
  seed: 1,
  keep: false,
  log: (line) => console.log(line)
}

/** How the runs inside a process during its pauses of one kind were recorded. */
export interface PausedRuns {
  readonly faults: number
  /** Keyed runs inside the paused process at some instant of a pause. */
  readonly runs: number
  /** By the outcome their attempt recorded: succeeded, failed, lapsed, lost, requeued (other), deleted, none. */
  readonly outcomes: Record<string, number>
  /** Of those runs, how many had their slot taken by another run during the pause (another run of the key entered). */
  readonly overtaken: number
  /** Resource writes the paused runs tried after the pause ended, and how many were accepted. */
  readonly writesAfter: { readonly tried: number; readonly accepted: number }
  /**
   * Attempts claimed before the pause ended whose handler entered only after it, by recorded outcome (a
   * slot taken before the pause and lost in it is recorded lost or lapsed; one taken after is fresh).
   */
  readonly enteredAfter: Record<string, number>
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
  /** The total cap: its group's figures, counted like a key's (every run of a group key holds one of `total` slots). */
  readonly group: {
    readonly keys: number
    readonly total: number
    readonly runs: number
    readonly maxInside: number
    /** `holding > total` episodes: must be 0. */
    readonly violations: number
    readonly afterLostSlot: number
    readonly requeued: number
    readonly cancelled: number
  }
  /** The CancelRunning keys: jobs, how many were replaced, and how many handler runs a replacement interrupted. */
  readonly cancelRunning: { readonly keys: number; readonly jobs: number; readonly replaced: number; readonly interruptedRuns: number; readonly maxInsideOverLimit: number }
  /** `inside > limit` episodes explained by lost slots (a connection terminated under a running handler). */
  readonly afterLostSlot: number
  /**
   * Not violations: `inside > limit` episodes that are within the limit once the runs recorded as lapsed
   * under a long pause are left out from the pause's start (diagnosis; see `intervals.ts`).
   */
  readonly overlapsOfLapsedRuns: number
  /** The pause faults: what the runs inside recorded. */
  readonly pauses: { readonly short: PausedRuns; readonly long: PausedRuns }
  /** Keyed runs inside at the start of each Redis fault, summed per kind. */
  readonly redisFaultRuns: Record<string, number>
  /** The fenced resource writes (all zero without `writes`). */
  readonly writes: { readonly tried: number; readonly accepted: number; readonly staleAccepted: number }
  /** Every other broken promise, by kind (must all be 0). */
  readonly problems: Record<string, number>
  readonly examples: ReadonlyArray<string>
  readonly advisoryLocksWhileRunning: number
  readonly advisoryLocksAfterStop: number
  readonly timedOut: boolean
}

/** The group of the soak's total cap. */
export const SOAK_GROUP = "soak-group"

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
  const faults: Record<string, number> = { kill: 0, terminate: 0, interrupt: 0 }
  const w = o.weights
  const pauseKinds = (w.pause ?? 0) + (w.pauseLong ?? 0) > 0
  const redisKinds = (w.redisRestart ?? 0) + (w.redisStall ?? 0) > 0
  if (pauseKinds) Object.assign(faults, { pause: 0, pauseLong: 0 })
  if (redisKinds) {
    if (o.provider !== "redis") throw new Error("the Redis faults need the Redis provider")
    Object.assign(faults, { redisRestart: 0, redisStall: 0 })
  }
  // the Redis faults strike a private redis-server: never the shared one other tests use
  const privateRedis = redisKinds ? await PrivateRedis.start() : undefined
  const redisUrl = privateRedis?.url ?? o.redisUrl
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
  const redis = o.provider === "redis" ? new Redis(redisUrl, { maxRetriesPerRequest: 2 }) : undefined
  redis?.on("error", (e) => o.log(`redis error: ${e.message}`))
  const children = new Map<string, ChildWorker>()
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
    // the total cap's keys and the CancelRunning keys (drawn only when on: a seed without them replays as before)
    const total = { group: SOAK_GROUP, limit: o.groupTotal }
    const groupKeys = Array.from({ length: o.groupKeys }, (_, i) => ({ name: `soak-gkey-${i}`, limit: 2 }))
    const crKeys = Array.from({ length: o.cancelRunningKeys }, (_, i) => ({ name: `soak-cr-${i}`, limit: i % 3 === 2 ? 2 : 1 }))
    const lockKeys = new Map<string, string>()
    for (const k of [...keys, ...groupKeys, ...crKeys]) for (let s = 0; s < k.limit; s++) lockKeys.set(lockId(slotName(LOCK_PREFIX + k.name, s)), k.name)
    if (groupKeys.length > 0) for (let s = 0; s < total.limit; s++) lockKeys.set(lockId(slotName(TOTAL_PREFIX + total.group, s)), total.group)
    const capKinds = [...(groupKeys.length > 0 ? ["group" as const] : []), ...(crKeys.length > 0 ? ["cr" as const] : [])]
    const now = new Date()
    const rows: Array<Job.NewJob> = []
    for (let n = 0; n < o.jobs; n++) {
      const kind = capKinds.length > 0 && random() < o.capShare ? capKinds[Math.floor(random() * capKinds.length)]! : "plain"
      const pool = kind === "group" ? groupKeys : kind === "cr" ? crKeys : keys
      const k = pool[Math.floor(random() * pool.length)]!
      const mode = kind === "cr" ? "CancelRunning" : random() < 0.5 ? "Skip" : "Wait"
      const cap = kind === "group" ? total : undefined
      const params = k.limit === 1 ? JobParameters.make().withMutex(k.name, mode, cap) : JobParameters.make().withSemaphore(k.name, k.limit, mode, cap)
      rows.push({
        id: JobId.make(),
        type: Work.name,
        handler: null,
        payload: {
          ms: Math.floor(random() * ((kind === "cr" ? o.cancelRunningHandlerMs : kind === "group" ? o.groupHandlerMs : o.maxHandlerMs) + 1)),
          fail: random() < o.failRate,
          ...(o.writes === undefined ? {} : { write: o.writes })
        },
        state: "Enqueued",
        scheduleTime: now,
        metadata: JobMetadata.encode(publishMetadata(Work, params, now))
      })
    }
    for (let i = 0; i < rows.length; i += 2_000) await run(Effect.flatMap(JobStore, (s) => s.insert(rows.slice(i, i + 2_000))))
    // the fenced resources: one row per slot of every key, no token seen yet
    if (o.writes !== undefined) {
      const slots = [...keys, ...groupKeys, ...crKeys].flatMap((k) => Array.from({ length: k.limit }, (_, s) => [k.name, s] as const))
      await control.query(`INSERT INTO rel_resource (key, slot) SELECT * FROM unnest($1::text[], $2::int[])`, [slots.map(([k]) => k), slots.map(([, s]) => s)])
    }
    o.log(`inserted ${rows.length} jobs over ${keys.length} keys in ${Date.now() - t0} ms`)

    // the workers: one supervised slot per process; a slot whose process exits is refilled
    const ready = new Set<ChildWorker>()
    const killedByUs = new Set<ChildWorker>()
    const readyAt = new Map<ChildWorker, number>()
    const start = (slot: number): ChildWorker => {
      const name = `soak-w${slot}-${incarnation++}`
      const child = spawnWorker({
        url,
        name,
        fibers: o.fibers,
        pollMs: o.pollMs,
        leaseMs: o.leaseMs,
        pingMs: o.pingMs,
        slotDeadlineMs: o.slotDeadlineMs,
        lockDelay: o.lockDelay,
        graceMs: 0,
        pool: 2 * o.fibers + 4,
        slotReuse: o.slotReuse,
        cancelCheckMs: o.cancelCheckMs,
        provider: o.provider,
        redis: { url: redisUrl, prefix: redisPrefix, leaseMs: o.redisLeaseMs },
        ...(o.lapseCheck === false ? { lapseCheck: false } : {}),
        ...(o.ignoreSlotLoss === true ? { ignoreSlotLoss: true } : {})
      })
      children.set(`w${slot}`, child)
      child.ready.then(
        () => {
          ready.add(child)
          readyAt.set(child, Date.now())
        },
        () => {}
      )
      void child.exited.then(({ code, signal }) => {
        ready.delete(child)
        readyAt.delete(child)
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
      // (and not killed already: its exit may not have been reported yet)
      const alive = [...ready].filter((c) => c.alive && !killedByUs.has(c))
      if (alive.length === 0) return
      const victim = alive[Math.floor(random() * alive.length)]!
      // the pause and Redis kinds come last in the draw: with their weights 0, a seed replays as before
      const draw = random() * (w.kill + w.terminate + w.interrupt + (w.pause ?? 0) + (w.pauseLong ?? 0) + (w.redisRestart ?? 0) + (w.redisStall ?? 0))
      if (draw < w.kill) {
        // only a process that has run for a while (see `minUptimeMs`); none such: no fault this tick
        const minUptime = o.minUptimeMs ?? 1_000
        if (Date.now() - (readyAt.get(victim) ?? Date.now()) < minUptime) return
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
      } else if (draw < w.kill + w.terminate + w.interrupt) {
        victim.signal("SIGUSR2")
        faults.interrupt!++
        await control.query(`INSERT INTO rel_faults (kind, proc, pid, at) VALUES ('interrupt', $1, $2, clock_timestamp())`, [victim.config.name, victim.pid])
      } else if (draw < w.kill + w.terminate + w.interrupt + (w.pause ?? 0) + (w.pauseLong ?? 0)) {
        const long = draw >= w.kill + w.terminate + w.interrupt + (w.pause ?? 0)
        // a process running a keyed handler (holding a slot), the drawn one if it does
        const busy = new Set(
          (await control.query(`SELECT DISTINCT proc FROM rel_intervals WHERE exited IS NULL AND key IS NOT NULL`)).rows.map((r: any) => r.proc as string)
        )
        const target = busy.has(victim.config.name) ? victim : (alive.find((c) => busy.has(c.config.name)) ?? victim)
        // the window [started, at] lies inside the stop: read after SIGSTOP (the process is stopped by the
        // time the read runs; read before the signal, a run could finish inside [started, stop] and count
        // as paused) and before SIGCONT (read after it, on a loaded machine a run could enter after the
        // resume and before the read, and count as paused)
        target.signal("SIGSTOP")
        const started = (await control.query(`SELECT clock_timestamp() AS at`)).rows[0].at
        await sleep(long ? (o.pauseLongMs ?? 3_000) : (o.pauseMs ?? 500))
        const at = (await control.query(`SELECT clock_timestamp() AS at`)).rows[0].at
        target.signal("SIGCONT")
        faults[long ? "pauseLong" : "pause"]!++
        await control.query(`INSERT INTO rel_faults (kind, proc, pid, started, at) VALUES ($1, $2, $3, $4, $5)`, [
          long ? "pause-long" : "pause",
          target.config.name,
          target.pid,
          started,
          at
        ])
      } else if (privateRedis !== undefined) {
        const restart = draw < w.kill + w.terminate + w.interrupt + (w.pause ?? 0) + (w.pauseLong ?? 0) + (w.redisRestart ?? 0)
        const started = (await control.query(`SELECT clock_timestamp() AS at`)).rows[0].at
        if (restart) await privateRedis.restart()
        else await privateRedis.stall(o.redisStallMs ?? 2 * o.redisLeaseMs)
        const at = (await control.query(`SELECT clock_timestamp() AS at`)).rows[0].at
        faults[restart ? "redisRestart" : "redisStall"]!++
        await control.query(`INSERT INTO rel_faults (kind, proc, pid, started, at) VALUES ($1, 'redis', $2, $3, $4)`, [
          restart ? "redis-restart" : "redis-stall",
          privateRedis.pid,
          started,
          at
        ])
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
      if (Date.now() >= nextFault && Date.now() - runStart < (o.faultWindowMs ?? Number.POSITIVE_INFINITY)) {
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
    // the pauses: the keyed runs inside the paused process at some instant of each pause, and what their
    // attempts recorded (the first finalizing entry of the job after the run entered)
    const µsOf = (expr: string) => `(extract(epoch from ${expr}) * 1000000)::bigint::text`
    const pauseRows = (
      await control.query(`SELECT kind, proc, pid, ${µsOf("started")} AS started, ${µsOf("at")} AS at FROM rel_faults WHERE kind IN ('pause', 'pause-long')`)
    ).rows.map((r: any) => ({ long: r.kind === "pause-long", proc: r.proc as string, pid: Number(r.pid), started: Number(r.started), at: Number(r.at) }))
    // the attempts of the paused process in progress during the pause (claimed before it ended, not yet
    // out of their handler when it began); `inside`: the handler itself ran across the pause
    const pausedRuns = pauseRows.flatMap((p) =>
      intervals
        .filter((i) => i.key !== null && i.proc === p.proc && i.pid === p.pid && i.claimedAt < p.at && i.exited > p.started)
        .map((i) => ({ i, p, inside: i.entered < p.at }))
    )
    const outcomeOf = new Map<string, string>()
    if (pausedRuns.length > 0) {
      const rows = (
        await control.query(
          `SELECT r.job_id, r.attempt,
                  (SELECT l.kind || ':' || l.message FROM warp_job_logs l
                   WHERE l.job_id = r.job_id AND l.at > i.entered AND l.kind IN ('Requeued', 'Succeeded', 'Failed', 'Cancelled')
                   ORDER BY l.id LIMIT 1) AS outcome
           FROM unnest($1::text[], $2::int[]) AS r(job_id, attempt) JOIN rel_intervals i USING (job_id, attempt)`,
          [pausedRuns.map((r) => r.i.jobId), pausedRuns.map((r) => r.i.attempt)]
        )
      ).rows
      for (const r of rows) outcomeOf.set(`${r.job_id}#${r.attempt}`, r.outcome ?? "")
    }
    const classify = (outcome: string | undefined): string =>
      outcome === undefined || outcome === ""
        ? "none"
        : outcome.startsWith("Succeeded:")
          ? "succeeded"
          : outcome.startsWith("Failed:")
            ? "failed"
            : outcome.startsWith("Cancelled:")
              ? "deleted"
              : /^Requeued:Slot of (group )?'.*' lapsed while running/.test(outcome)
                ? "lapsed"
                : /^Requeued:Slot of (group )?'.*' lost (while running|after its handler ended)/.test(outcome)
                  ? "lost"
                  : "requeued"
    // An attempt of the paused process in progress during a pause that lasted at least the slot deadline
    // (the Redis lease) — its handler running, or its slot taken and its handler not yet entered — whose
    // attempt was requeued because its slot was gone, recorded as lapsed, or as lost (on resume the driver
    // may report the connection the server ended during the pause, idle_session_timeout, before the
    // handler's own timers run), leaves the checker's count from the pause's start (or its entry, if
    // later): its slot could be granted again while it slept, the trade-off of the deadline. Nothing else
    // does: short pauses, and runs that recorded anything else, are counted as always.
    const deadlineMs = o.provider === "redis" ? o.redisLeaseMs : o.slotDeadlineMs
    const lapses: Array<Lapse> = pausedRuns
      .filter(({ i, p }) => p.long && (p.at - p.started) / 1000 >= deadlineMs && ["lapsed", "lost"].includes(classify(outcomeOf.get(`${i.jobId}#${i.attempt}`))))
      .map(({ i, p }) => ({ jobId: i.jobId, attempt: i.attempt, at: p.started }))
    const pausedFigures = async (long: boolean): Promise<PausedRuns> => {
      const runs = pausedRuns.filter((r) => r.p.long === long && r.inside)
      const enteredAfter = pausedRuns.filter((r) => r.p.long === long && !r.inside)
      const after: Record<string, number> = {}
      for (const { i } of enteredAfter) {
        const c = classify(outcomeOf.get(`${i.jobId}#${i.attempt}`))
        after[c] = (after[c] ?? 0) + 1
      }
      const outcomes: Record<string, number> = {}
      for (const { i } of runs) {
        const c = classify(outcomeOf.get(`${i.jobId}#${i.attempt}`))
        outcomes[c] = (outcomes[c] ?? 0) + 1
      }
      // overtaken: another run of its key entered during the pause, while it was inside
      const overtaken = runs.filter(({ i, p }) =>
        intervals.some((o) => o !== i && o.key === i.key && o.entered >= Math.max(p.started, i.entered) && o.entered < Math.min(p.at, i.exited))
      ).length
      let tried = 0
      let accepted = 0
      if (o.writes !== undefined && runs.length > 0) {
        const r = (
          await control.query(
            `SELECT count(*)::int AS tried, count(*) FILTER (WHERE w.accepted)::int AS accepted
             FROM unnest($1::text[], $2::int[], $3::bigint[]) AS p(job_id, attempt, after) JOIN rel_writes w USING (job_id, attempt)
             WHERE (extract(epoch from w.at) * 1000000)::bigint > p.after`,
            [runs.map((x) => x.i.jobId), runs.map((x) => x.i.attempt), runs.map((x) => String(x.p.at))]
          )
        ).rows[0]
        tried = r.tried
        accepted = r.accepted
      }
      return { faults: pauseRows.filter((p) => p.long === long).length, runs: runs.length, outcomes, overtaken, writesAfter: { tried, accepted }, enteredAfter: after }
    }
    const pauses = { short: await pausedFigures(false), long: await pausedFigures(true) }
    // the Redis faults: the keyed runs inside at each one's start
    const redisFaultRuns: Record<string, number> = {}
    for (const r of (await control.query(`SELECT kind, ${µsOf("started")} AS started FROM rel_faults WHERE kind LIKE 'redis-%'`)).rows) {
      const t = Number(r.started)
      redisFaultRuns[r.kind] = (redisFaultRuns[r.kind] ?? 0) + intervals.filter((i) => i.key !== null && i.entered <= t && i.exited > t).length
    }
    // the fenced writes: an accepted write whose slot had already seen a newer holder's token is stale
    const writes =
      o.writes === undefined
        ? { tried: 0, accepted: 0, staleAccepted: 0 }
        : (
            await control.query(
              `SELECT count(*)::int AS tried, count(*) FILTER (WHERE accepted)::int AS accepted,
                      count(*) FILTER (WHERE accepted AND EXISTS (
                        SELECT 1 FROM rel_writes n WHERE n.key = w.key AND n.slot = w.slot AND n.token > w.token AND n.at < w.at))::int AS "staleAccepted"
               FROM rel_writes w`
            )
          ).rows[0]
    const reports = checkOverlaps(intervals, terminations, lapses)
    const overlap = summarize(reports)
    // the group: every run of one of its keys counted as one holder of the group's `total` slots (a
    // terminated holder's group slot is lost with its connection, as its key's is)
    const inGroup = new Set(groupKeys.map((k) => k.name))
    const groupIntervals = asGroup(intervals, inGroup, total.group, total.limit)
    const groupReport = checkOverlaps(groupIntervals, terminations, lapses)[0]
    const crNames = new Set(crKeys.map((k) => k.name))
    const maxInsideOverLimit = Math.max(0, ...reports.map((r) => r.maxInside - r.limit))
    // for each violation: the faults that struck the processes inside, around that instant
    const faultRows = (
      await control.query(
        `SELECT kind, proc, pid, (extract(epoch from at) * 1000000)::bigint::text AS at, locks FROM rel_faults
         UNION ALL SELECT 'kill', proc, pid, (extract(epoch from at) * 1000000)::bigint::text, '{}' FROM rel_deaths`
      )
    ).rows.map((f: any) => ({ ...f, at: Number(f.at) }))
    const context = [...reports, ...(groupReport === undefined ? [] : [groupReport])].flatMap((r) =>
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
    const counter = async (k: string) => Number((await control.query(`SELECT coalesce((SELECT value FROM warp_counter_totals WHERE key = $1), 0) AS n`, [k])).rows[0].n)
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
      advisoryLocksLeft: advisoryLocksWhileRunning + advisoryLocksAfterStop,
      // CancelRunning: every job ends Succeeded (Failed when its handler fails) or Deleted by a replacement
      cancelRunningNotTerminal: await q(
        `SELECT count(*)::int AS n FROM warp_jobs j WHERE ${mode} = 'CancelRunning' AND state <> 'Deleted' AND state <> CASE WHEN ${fail} THEN 'Failed' ELSE 'Succeeded' END`
      ),
      // the newest job of each CancelRunning key is never replaced: it runs to its end
      cancelRunningNewestNotRun: await q(
        `SELECT count(*)::int AS n FROM (SELECT DISTINCT ON (${key}) state, ${fail} AS fail FROM warp_jobs j WHERE ${mode} = 'CancelRunning'
                                          ORDER BY ${key}, created_at DESC, id DESC) x
         WHERE state <> CASE WHEN fail THEN 'Failed' ELSE 'Succeeded' END`
      ),
      cancelRunningReplacedBadly: 0,
      // a run inside during a pause past the deadline never records its handler's outcome
      longPausedRunRecorded: (pauses.long.outcomes.succeeded ?? 0) + (pauses.long.outcomes.failed ?? 0),
      staleWritesAccepted: writes.staleAccepted
    }
    // exact audit text of every drop: a full key's or group's (Skip), a newer job's replacement (CancelRunning,
    // naming a job of the same key submitted after it; "(running attempt N interrupted)" when its handler ran)
    const replacedText = /^Cancelled — replaced by newer job (\S+) of '(.+)'( \(running attempt \d+ interrupted\))?$/
    const deleted = (
      await control.query(
        `SELECT id, created_at, ${mode} AS mode, ${key} AS key, ${limit}::int AS lim, ${lastLog("kind")} AS kind, ${lastLog("message")} AS message
         FROM warp_jobs j WHERE state = 'Deleted'`
      )
    ).rows
    const crJobs = new Map<string, { key: string; createdAt: number }>()
    for (const r of (await control.query(`SELECT id, ${key} AS key, created_at FROM warp_jobs j WHERE ${mode} = 'CancelRunning'`)).rows) {
      crJobs.set(r.id, { key: r.key, createdAt: new Date(r.created_at).getTime() })
    }
    let replaced = 0
    for (const r of deleted) {
      if (r.mode === "CancelRunning") {
        const m = r.kind === "Cancelled" ? replacedText.exec(r.message) : null
        const newer = m === null ? undefined : crJobs.get(m[1]!)
        const self = { createdAt: new Date(r.created_at).getTime(), id: r.id as string }
        const isNewer = newer !== undefined && (newer.createdAt > self.createdAt || (newer.createdAt === self.createdAt && m![1]! > self.id))
        if (m === null || m[2] !== r.key || newer?.key !== r.key || !isNewer) problems.cancelRunningReplacedBadly!++
        else replaced++
        continue
      }
      const texts = inGroup.has(r.key) ? [cancelledText(r.key, r.lim), groupCancelledText(total.group, total.limit)] : [cancelledText(r.key, r.lim)]
      if (r.kind !== "Cancelled" || !texts.includes(r.message)) problems.deletedWithoutExactText!++
    }
    // the handler runs of CancelRunning keys that a replacement interrupted
    const crInterrupted = intervals.filter((i) => i.key !== null && crNames.has(i.key) && i.result === "interrupted").length
    keepForDiagnosis = overlap.violations > 0 || (groupReport?.violations ?? 0) > 0 || Object.values(problems).some((n) => n !== 0)
    const recovered = await q(`SELECT count(*)::int AS n FROM warp_job_logs WHERE kind = 'Recovered'`)
    const logged = async (kind: string, message: string) =>
      Number((await control.query(`SELECT count(*)::int AS n FROM warp_job_logs WHERE kind = $1 AND message = $2`, [kind, message])).rows[0].n)
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
      slotLostRequeues: (await logsLike("Slot of % lost while running%")) + (await logsLike("Slot of % lost after its handler ended%")),
      interruptedRequeues: await logsLike("Attempt interrupted%"),
      gateUnavailableRequeues: await logsLike("Concurrency gate unavailable%"),
      maxInsideOverLimit,
      violations: overlap.violations,
      afterLostSlot: overlap.afterLostSlot,
      overlapsOfLapsedRuns: overlap.overlapsOfLapsedRuns + (groupReport?.overlapsOfLapsedRuns ?? 0),
      pauses,
      redisFaultRuns,
      writes,
      group: {
        keys: groupKeys.length,
        total: total.limit,
        runs: groupIntervals.length,
        maxInside: groupReport?.maxInside ?? 0,
        violations: groupReport?.violations ?? 0,
        afterLostSlot: groupReport?.afterLostSlot ?? 0,
        requeued: await logged("Requeued", groupRequeuedText(total.group, total.limit)),
        cancelled: await logged("Cancelled", groupCancelledText(total.group, total.limit))
      },
      cancelRunning: {
        keys: crKeys.length,
        jobs: crJobs.size,
        replaced,
        interruptedRuns: crInterrupted,
        maxInsideOverLimit: Math.max(0, ...reports.filter((r) => crNames.has(r.key)).map((r) => r.maxInside - r.limit))
      },
      problems,
      examples: [...overlap.examples, ...context, ...overlap.lapsedExamples.slice(0, 3)].slice(0, 20),
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
    await privateRedis?.stop()
    await runtime.dispose()
    if (!o.keep && !keepForDiagnosis) await admin(o.serverUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)).catch(() => {})
    else o.log(`database ${dbName} kept for diagnosis`)
  }
}

/** The summary as text. */
export const formatSummary = (s: SoakSummary): string => {
  const ok = passed(s)
  return [
    `soak ${ok ? "PASSED" : "FAILED"}: ${s.jobs} jobs, ${s.keys} keys, ${s.processes} processes x ${s.fibers} fibers${s.slotReuse ? ", slot reuse on" : ""}${s.provider === "redis" ? ", Redis provider" : ""}`,
    `  duration ${(s.durationMs / 1000).toFixed(1)} s (workers ran ${(s.runMs / 1000).toFixed(1)} s, ${Math.round(s.jobs / (s.runMs / 1000))} jobs/s)`,
    `  faults injected: ${Object.entries(s.faults).map(([k, n]) => `${k} ${n}`).join(", ")}`,
    `  final states: ${Object.entries(s.states).map(([k, n]) => `${k} ${n}`).join(", ")}`,
    `  handler runs ${s.handlerRuns} (${Object.entries(s.exits).map(([k, n]) => `${k} ${n}`).join(", ")})`,
    `  counters: succeeded ${s.counters.succeeded}, failed ${s.counters.failed}, deleted ${s.counters.deleted}, requeued ${s.counters.requeued}`,
    `  recovered after lease expiry ${s.recovered}; requeued: slot lost ${s.slotLostRequeues}, interrupted ${s.interruptedRequeues}, gate unavailable ${s.gateUnavailableRequeues}`,
    `  violations (more than N handlers of a key inside at once, whatever the fault) ${s.violations}, of which after a lost slot ${s.afterLostSlot}; max over limit ${s.maxInsideOverLimit}`,
    ...(["short", "long"] as const)
      .filter((k) => s.pauses[k].faults > 0)
      .map((k) => {
        const p = s.pauses[k]
        const list = (r: Record<string, number>) => Object.entries(r).map(([o, n]) => `${o} ${n}`).join(", ") || "-"
        return `  ${k} pauses ${p.faults}: ${p.runs} keyed runs inside, ${p.overtaken} overtaken by another run of their key during the pause; recorded ${list(p.outcomes)}; their writes after the pause ${p.writesAfter.tried}, accepted ${p.writesAfter.accepted}; claimed before, entered after: ${list(p.enteredAfter)}`
      }),
    ...(s.pauses.long.faults > 0 ? [`  overlaps of runs recorded as lapsed (diagnosis, not violations) ${s.overlapsOfLapsedRuns}`] : []),
    ...(Object.keys(s.redisFaultRuns).length > 0
      ? [`  Redis faults: keyed runs inside at the start: ${Object.entries(s.redisFaultRuns).map(([k, n]) => `${k} ${n}`).join(", ")}`]
      : []),
    ...(s.writes.tried > 0 ? [`  resource writes ${s.writes.tried}, accepted ${s.writes.accepted}, stale accepted ${s.writes.staleAccepted}`] : []),
    ...(s.group.keys > 0
      ? [
          `  total cap: ${s.group.keys} keys in '${SOAK_GROUP}' (total ${s.group.total}): ${s.group.runs} runs, max inside ${s.group.maxInside}/${s.group.total}, violations ${s.group.violations} (after a lost slot ${s.group.afterLostSlot}); group full: requeued ${s.group.requeued}, cancelled ${s.group.cancelled}`
        ]
      : []),
    ...(s.cancelRunning.keys > 0
      ? [
          `  CancelRunning: ${s.cancelRunning.keys} keys, ${s.cancelRunning.jobs} jobs, ${s.cancelRunning.replaced} replaced by newer jobs, ${s.cancelRunning.interruptedRuns} running handlers interrupted, max over limit ${s.cancelRunning.maxInsideOverLimit}`
        ]
      : []),
    `  other checks: ${Object.entries(s.problems).map(([k, n]) => `${k} ${n}`).join(", ")}`,
    `  ${s.provider === "redis" ? "Redis slot leases" : "advisory locks"} left: ${s.advisoryLocksWhileRunning} while running, ${s.advisoryLocksAfterStop} after stop${s.timedOut ? "; TIMED OUT" : ""}`,
    ...s.examples.map((e) => `  ${e}`)
  ].join("\n")
}

/** Whether a summary shows every guarantee kept. */
export const passed = (s: SoakSummary): boolean =>
  s.violations === 0 && s.group.violations === 0 && Object.values(s.problems).every((n) => n === 0) && !s.timedOut
