/**
 * The benchmark: this project side by side with graphile-worker and pg-boss on one PostgreSQL server.
 *
 *   npm run bench                       (from the repository root: installs bench deps, runs all)
 *   BENCH_SCALE=0.2 npm run bench       quick run: job counts scaled down
 *   BENCH_ROUNDS=5                      alternating rounds per scenario (default 3)
 *   BENCH_ONLY=2,6                      only some scenarios (4: dedupe; 8: producers; 11: fair share and total caps;
 *                                       12: slot after SIGKILL; 13: pickup latency; 14: a total cap's workload;
 *                                       15: priority under a backlog)
 *   DATABASE_URL=postgres://...         use that server (default: an embedded one)
 *   BENCH_OUT=results-producers         write results-producers.json/.svg instead of results.json/.svg
 *   BENCH_BEFORE=1                      scenarios 1 and 9 also run commit 44c18c5 (warp-effect 0.2, Effect 3),
 *                                       every run of them in its own process (BENCH_BEFORE=<commit>: another one)
 *   BENCH_PROCESS=own                   scenarios 1 and 9 in own processes, without a before tree
 *
 * Every measured run gets a fresh database. Within a scenario the systems run alternately, the order
 * flipped every round (A B, B A, A B ...); medians over rounds are reported. Prints one table and
 * writes results.json and results.svg next to this file (after each server's pass, marked partial
 * until the last).
 */
import { cpus } from "node:os"
import { readFileSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { connectionsTo, createDatabase, dropDatabase, serverVersion, startServer, withFreshDatabase } from "./lib/server.js"
import { fmt, median, percentile } from "./lib/stats.js"
import { type Panel, render } from "./lib/svg.js"
import type { BacklogResult, BacklogSpec, ClaimBlock, ClaimRig, ClaimSpec, DedupeResult, HandoffSpec, PickupResult, PickupSpec, PriorityResult, PrioritySpec, ProducerResult, ProducerSpec } from "./systems/common.js"
import * as effectqueue from "./systems/effectqueue.js"
import * as graphile from "./systems/graphile.js"
import * as pgboss from "./systems/pgboss.js"
import * as warp from "./systems/warp.js"
import { slotAfterKill } from "./lib/slotAfterKill.js"
import { serverCpu } from "./lib/serverCpu.js"
import { currentTree, inOwnProcess, prepareBeforeTree, treeVersions } from "./lib/ownProcess.js"
import * as PrivateRedis from "../test/support/faults/PrivateRedis.js"

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url))
const SCALE = Number(process.env.BENCH_SCALE ?? "1")
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? "3"))
const ONLY = process.env.BENCH_ONLY?.split(",").map((s) => s.trim())
const scaled = (x: number) => Math.max(1, Math.round(x * SCALE))
/** The output files' base name, next to this file (default `results`: results.json and results.svg). */
const OUT = process.env.BENCH_OUT ?? "results"
const enabled = (id: string) => ONLY === undefined || ONLY.includes(id)
const log = (...xs: Array<unknown>) => console.error(`[bench ${((performance.now() - started) / 1000).toFixed(0)}s]`, ...xs)
const started = performance.now()

/**
 * The before/after comparison of scenarios 1 and 9: BENCH_BEFORE=1 runs this project as of commit
 * 44c18c5 (warp-effect 0.2 on Effect 3, the main branch before the Effect 4 port) beside the current
 * tree; BENCH_BEFORE=<commit> another commit. lib/before.sh makes that tree (a git worktree under
 * bench/.before/, gitignored, with its own `npm ci`). With it, and with BENCH_PROCESS=own, every run
 * of scenarios 1 and 9 runs in a fresh process of its own (lib/ownProcess.ts), every system alike.
 */
const BEFORE_COMMIT = ((v) => (v === undefined || v === "" || v === "0" ? undefined : v === "1" || v === "true" ? "44c18c5" : v))(process.env.BENCH_BEFORE)
const OWN_PROCESS = BEFORE_COMMIT !== undefined || process.env.BENCH_PROCESS === "own"
const current = treeVersions(currentTree)
/** The before tree, once main has prepared it. */
let before: { readonly commit: string; readonly tree: string; readonly label: string; readonly project: string; readonly effect: string } | undefined
/** This project's name in scenarios 1 and 9: with its versions when a before tree runs beside it. */
const oursLabel = BEFORE_COMMIT === undefined ? "warp-effect" : `warp-effect ${current.project} (effect ${current.effect})`

/** Deterministic pseudo-random numbers (mulberry32). */
const rng = (seed: number) => () => {
  seed |= 0
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** Runs `variants` alternately for ROUNDS rounds, flipping the order every round. */
const alternate = async <V extends string, R>(variants: ReadonlyArray<V>, run: (v: V, round: number) => Promise<R>, rounds = ROUNDS) => {
  const out = new Map<V, Array<R>>(variants.map((v) => [v, []]))
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? variants : [...variants].reverse()
    for (const v of order) {
      const r = await run(v, round)
      out.get(v)!.push(r)
    }
  }
  return out
}

interface Row {
  readonly server?: string
  readonly scenario: string
  readonly system: string
  readonly metric: string
  readonly value: string
  readonly ratio?: string
  readonly goal?: string
  readonly met?: boolean
}
const rows: Array<Row> = []
const panels: Array<Panel> = []
const raw: Record<string, unknown> = {}
const goals: Array<{ goal: string; measured: string; met: boolean }> = []
/** Whether this pass's server is DATABASE_URL (others may use it too), not one of the bench's own embedded servers. */
let sharedServer = false

/**
 * The cost columns of a scenario's backlog runs (issue 40): server CPU per job (the PostgreSQL server's
 * process tree, from /proc: lib/serverCpu.ts) and worker CPU per job (the worker's process,
 * `process.cpuUsage`), medians over the rounds; this project's rows carry the ratios against
 * graphile-worker and against the best (lowest) peer, and `ours` the goal "server CPU per job ≤
 * graphile-worker's". Adds rows, a goal and a panel; returns the medians.
 */
const costOf = (
  scenario: string,
  res: ReadonlyMap<string, ReadonlyArray<BacklogResult>>,
  options: { readonly ours?: string; readonly peers: ReadonlyArray<string>; readonly label?: (s: string) => string }
) => {
  const label = options.label ?? ((s: string) => s)
  const server = (s: string) => medianOrNaN(res.get(s)!.map(serverCpuPerJob))
  const worker = (s: string) => medianOrNaN(res.get(s)!.map(workerCpuPerJob))
  const database = (s: string) => medianOrNaN(res.get(s)!.map(databaseCpuPerJob))
  // on a server others use too (DATABASE_URL) the whole tree counts their work: the goal reads the
  // run's own backends there, the whole tree on the bench's private embedded servers
  const gauge = sharedServer ? database : server
  const gaugeName = sharedServer ? "own database's backends (shared server)" : "postmaster + every backend"
  const present = options.peers.filter((p) => res.has(p))
  const bestServer = present.length === 0 ? Number.NaN : Math.min(...present.map(gauge))
  const bestWorker = present.length === 0 ? Number.NaN : Math.min(...present.map(worker))
  const graphileServer = res.has("graphile-worker") ? gauge("graphile-worker") : Number.NaN
  const bars: Array<Panel["bars"][number]> = []
  for (const s of res.keys()) {
    const ours = s.startsWith("warp-effect")
    const goal = s === options.ours && !Number.isNaN(gauge(s)) && !Number.isNaN(graphileServer)
    rows.push({
      scenario,
      system: label(s),
      metric: "CPU ms/job: server (postmaster + every backend) [own database's backends]; worker process",
      value: `${na(server(s))} [${na(database(s))}]; ${na(worker(s))}`,
      ...(ours && present.length > 0
        ? {
            ratio: `server ${na(gauge(s) / graphileServer)}× graphile-worker, ${na(gauge(s) / bestServer)}× best peer${sharedServer ? " (own database's backends)" : ""}; worker ${na(worker(s) / bestWorker)}× best peer`,
            ...(goal ? { goal: "server ≤ graphile-worker's", met: gauge(s) <= graphileServer } : {})
          }
        : {})
    })
    if (goal) goals.push({ goal: `${scenario}: server CPU per job ≤ graphile-worker's (${gaugeName})`, measured: `${fmt(gauge(s))} vs ${fmt(graphileServer)} ms (${fmt(gauge(s) / graphileServer)}×)`, met: gauge(s) <= graphileServer })
    bars.push(
      { label: `${label(s)}: server`, value: server(s), note: `${na(server(s))} ms`, ours },
      { label: `${label(s)}: worker`, value: worker(s), note: `${na(worker(s))} ms`, ours }
    )
  }
  panels.push({ title: `${scenario.replace(/^(\d+) /, "$1. ")}: CPU time per job, server (postmaster and backends) and worker process`, unit: "ms per job, median", better: "lower", bars })
  return { server, worker, database }
}

const jps = (r: BacklogResult) => r.completed / (r.elapsedMs / 1000)
/** The median, NaN if any figure is NaN (a server CPU time this machine could not read). */
const medianOrNaN = (xs: ReadonlyArray<number>) => (xs.some(Number.isNaN) ? Number.NaN : median(xs))
/** A figure for the table, "n/a" where it could not be measured. */
const na = (x: number, digits = 3) => (Number.isNaN(x) ? "n/a" : fmt(x, digits))
/** CPU ms of the worker's process per job that ran in the window (`process.cpuUsage`). */
const workerCpuPerJob = (r: BacklogResult) => (r.cpuMs ?? Number.NaN) / Math.max(1, r.completed)
/** CPU ms of the PostgreSQL server per job that ran in the window (postmaster and every backend, lib/serverCpu.ts). */
const serverCpuPerJob = (r: BacklogResult) => (r.serverCpuMs ?? Number.NaN) / Math.max(1, r.completed)
/** CPU ms of the run's own database's backends per job (polled from /proc; no background processes, no other clients). */
const databaseCpuPerJob = (r: BacklogResult) => (r.databaseCpuMs ?? Number.NaN) / Math.max(1, r.completed)
/** A run's cost for a log line. */
const costLog = (r: BacklogResult) => `CPU ms/job server ${na(serverCpuPerJob(r))} (own database's backends ${na(databaseCpuPerJob(r))}), worker ${na(workerCpuPerJob(r))}`
const backlogSystems = { "warp-effect": warp.backlog, "graphile-worker": graphile.backlog, "pg-boss": pgboss.backlog } as const
/** Scenario 3's extra row: this project with the PostgreSQL provider's lock-delay off (its cost). */
const manyKeysSystems = { ...backlogSystems, "warp-effect, lock-delay off": (url: string, spec: BacklogSpec) => warp.backlog(url, { ...spec, lockDelay: false }) }
type ManyKeysName = keyof typeof manyKeysSystems

/**
 * Scenario 2 also runs this project with the opt-in slot reuse on, and in the opt-in Fifo mode (strict
 * submission order per key, no requeue churn), to show what those designs do.
 */
const contendedSystems = {
  ...backlogSystems,
  "warp-effect, slot reuse on (opt-in)": (url: string, spec: BacklogSpec) => warp.backlog(url, { ...spec, slotReuse: true }),
  "warp-effect, Fifo mode (opt-in)": (url: string, spec: BacklogSpec) => warp.backlog(url, { ...spec, mode: "Fifo" })
} as const
type ContendedName = keyof typeof contendedSystems
const peers = ["graphile-worker", "pg-boss"] as const

/** The servers of one run: fast (fsync and synchronous_commit off) and durable (both on), by default both. */
const SERVERS = (process.env.BENCH_SERVERS ?? "fast,durable").split(",").map((s) => s.trim()) as ReadonlyArray<"fast" | "durable">

const runOn = async (kind: "fast" | "durable") => {
  const server = await startServer(kind)
  const pgVersion = await serverVersion(server.url)
  sharedServer = server.description === "DATABASE_URL"
  const cpuClock = await serverCpu(server.url)
  const serverCpuNote = cpuClock.unavailable === undefined ? `read from /proc (postmaster ${cpuClock.postmaster})` : `n/a: ${cpuClock.unavailable}`
  log(`${kind}: PostgreSQL ${pgVersion} (${server.description}), scale ${SCALE}, rounds ${ROUNDS}; server CPU ${serverCpuNote}`)
  const firstRow = rows.length
  const firstPanel = panels.length
  const firstGoal = goals.length
  const rawBefore = { ...raw }
  for (const k of Object.keys(raw)) delete raw[k]
  try {
    // 1. keyless overhead (and, with BENCH_BEFORE, the same for the before tree)
    if (enabled("1")) {
      const jobs = scaled(20_000)
      const rounds = ROUNDS
      log(`1. keyless overhead: ${jobs} no-op jobs, addon registered vs not, ${rounds} rounds${OWN_PROCESS ? ", each run in its own process" : ""}${before === undefined ? "" : `, and ${before.label}`}`)
      const spec = (addon: boolean): BacklogSpec => ({ jobs, keyOf: () => undefined, limit: 1, workers: 8, handlerMs: 0, capMs: 90_000, pollMs: 100, addon })
      // the versions of this project measured: this tree (as before: "without addon" / "with addon"),
      // and with BENCH_BEFORE the before tree ("<label>: without addon" / "<label>: with addon")
      const versions = [
        { prefix: "", label: oursLabel, run: OWN_PROCESS ? inOwnProcess(currentTree, "warp") : warp.backlog },
        ...(before === undefined ? [] : [{ prefix: `${before.label}: `, label: before.label, run: inOwnProcess(before.tree, "warp") }])
      ]
      const runOf = new Map<string, (url: string, spec: BacklogSpec) => Promise<BacklogResult>>(
        versions.flatMap((v) => [[`${v.prefix}without addon`, v.run], [`${v.prefix}with addon`, v.run]])
      )
      const variants = [...runOf.keys()]
      const res = await alternate(
        variants,
        (v) =>
          withFreshDatabase(server.url, (url) => runOf.get(v)!(url, spec(v.endsWith("with addon")))).then((r) => {
            log(`   ${v}: ${fmt(jps(r))} jobs/s, ${fmt(r.cpuMs! / r.completed)} ms CPU per job, server ${na(serverCpuPerJob(r))} ms per job (own database's backends ${na(databaseCpuPerJob(r))})`)
            return r
          }),
        rounds
      )
      raw["1"] = Object.fromEntries(res)
      const cpuPerJob = (x: BacklogResult) => x.cpuMs! / x.completed
      const bars: Array<Panel["bars"][number]> = []
      for (const version of versions) {
        const w = res.get(`${version.prefix}without addon`)!
        const a = res.get(`${version.prefix}with addon`)!
        // paired by round (the order flips every round, so a drift of the machine cancels out)
        const timeRatio = median(w.map((x, i) => jps(x) / jps(a[i]!)))
        const cpuRatio = median(w.map((x, i) => cpuPerJob(a[i]!) / cpuPerJob(x)))
        const current = version.prefix === ""
        const serverOf = (xs: ReadonlyArray<BacklogResult>) => `${na(medianOrNaN(xs.map(serverCpuPerJob)))} [${na(medianOrNaN(xs.map(databaseCpuPerJob)))}]`
        rows.push({ scenario: "1 keyless", system: `${version.label}, no addon`, metric: "jobs/s; CPU ms/job; server CPU ms/job [own database's backends]", value: `${fmt(median(w.map(jps)))}; ${fmt(median(w.map(cpuPerJob)))}; ${serverOf(w)}` })
        rows.push({
          scenario: "1 keyless",
          system: `${version.label}, addon registered`,
          metric: "jobs/s; CPU ms/job; server CPU ms/job [own database's backends]",
          value: `${fmt(median(a.map(jps)))}; ${fmt(median(a.map(cpuPerJob)))}; ${serverOf(a)}`,
          ratio: `${fmt(timeRatio, 4)}× time, ${fmt(cpuRatio, 4)}× CPU`,
          ...(current ? { goal: "≤ 1.02", met: timeRatio <= 1.02 } : {})
        })
        if (current) goals.push({ goal: "1. keyless overhead ratio ≤ 1.02", measured: `${fmt(timeRatio, 4)} (time, median of ${rounds} paired rounds); ${fmt(cpuRatio, 4)} (CPU per job)`, met: timeRatio <= 1.02 })
        // the bars' labels without the effect version (the subtitle has it)
        const short = version.label.replace(/ \(effect [^)]*\)$/, "")
        bars.push(
          { label: `${short} without addon`, value: median(w.map(jps)), note: `${fmt(median(w.map(jps)))}, ${fmt(median(w.map(cpuPerJob)))} ms CPU/job`, ours: current },
          { label: `${short} with addon`, value: median(a.map(jps)), note: `${fmt(median(a.map(jps)))}, ${fmt(median(a.map(cpuPerJob)))} ms CPU/job, ratio ${fmt(timeRatio, 4)}`, ours: current }
        )
      }
      if (before !== undefined) {
        // after / before, paired by round, addon registered and not
        for (const addon of ["without addon", "with addon"] as const) {
          const now = res.get(addon)!
          const then = res.get(`${before.label}: ${addon}`)!
          const rate = median(now.map((x, i) => jps(x) / jps(then[i]!)))
          const cpu = median(now.map((x, i) => cpuPerJob(x) / cpuPerJob(then[i]!)))
          rows.push({ scenario: "1 keyless", system: `${oursLabel} / ${before.label}, ${addon}`, metric: "paired ratios: jobs/s; CPU ms/job", value: `${fmt(rate, 4)}×; ${fmt(cpu, 4)}×` })
        }
      }
      panels.push({
        title: `1. Keyless: ${jobs.toLocaleString("en-US")} no-op jobs, 8 fibers${OWN_PROCESS ? " (each run in its own process)" : ""}`,
        unit: "jobs/s, median",
        bars
      })
    }

    // 9. keyless throughput and cost, every system (Effect's PersistedQueue too: it has no keys); with
    // BENCH_BEFORE also the before tree, and every system in its own process
    if (enabled("9")) {
      const jobs = scaled(20_000)
      const systems: Record<string, (url: string, spec: BacklogSpec) => Promise<BacklogResult>> = OWN_PROCESS
        ? {
            "warp-effect": inOwnProcess(currentTree, "warp"),
            ...(before === undefined ? {} : { [before.label]: inOwnProcess(before.tree, "warp") }),
            "graphile-worker": inOwnProcess(currentTree, "graphile"),
            "pg-boss": inOwnProcess(currentTree, "pgboss"),
            [effectqueue.name]: inOwnProcess(currentTree, "effectqueue")
          }
        : { ...backlogSystems, [effectqueue.name]: effectqueue.backlog }
      const names = Object.keys(systems)
      const label = (s: string) => (s === "warp-effect" ? oursLabel : s)
      log(`9. keyless, all systems: ${jobs} no-op jobs, 8 workers${OWN_PROCESS ? ", each run in its own process" : ""}`)
      const res = await alternate(names, (s) =>
        withFreshDatabase(server.url, (url) =>
          systems[s]!(url, { jobs, keyOf: () => undefined, limit: 1, workers: 8, handlerMs: 0, capMs: 60_000, pollMs: 100 })
        ).then((r) => {
          log(`   ${label(s)}: ${r.completed} in ${(r.elapsedMs / 1000).toFixed(1)} s = ${fmt(jps(r))} jobs/s, CPU ms/job ${fmt(r.cpuMs! / Math.max(1, r.completed))}, server CPU ms/job ${na(serverCpuPerJob(r))} (own database's backends ${na(databaseCpuPerJob(r))}), statements/job ${fmt(r.db.statements / Math.max(1, r.succeeded))}, xact/job ${fmt(r.db.xactCommit / Math.max(1, r.succeeded))}, ins+upd/job ${fmt((r.db.tupIns + r.db.tupUpd) / Math.max(1, r.succeeded))}`)
          return r
        })
      )
      raw["9"] = Object.fromEntries(res)
      const perJob = (s: string, f: (r: BacklogResult) => number) => median(res.get(s)!.map((r) => f(r) / Math.max(1, r.succeeded)))
      const rate = (s: string) => median(res.get(s)!.map(jps))
      /** CPU time of the worker's process per job that ran in the window. */
      const cpu = (s: string) => median(res.get(s)!.map((r) => r.cpuMs! / Math.max(1, r.completed)))
      const best = Math.max(...names.filter((s) => !s.startsWith("warp-effect")).map(rate))
      /** After / before, paired by round (the order flips every round). */
      const paired = (f: (r: BacklogResult) => number) => {
        const now = res.get("warp-effect")!
        const then = res.get(before!.label)!
        return median(now.map((r, i) => f(r) / f(then[i]!)))
      }
      for (const s of names) {
        rows.push({
          scenario: `9 keyless, all systems${OWN_PROCESS ? " (own processes)" : ""}`,
          system: label(s),
          metric: "jobs/s; CPU ms/job; statements / xact / ins+upd / +del per job",
          value: `${fmt(rate(s))}; ${fmt(cpu(s))}; ${fmt(perJob(s, (r) => r.db.statements))} / ${fmt(perJob(s, (r) => r.db.xactCommit))} / ${fmt(perJob(s, (r) => r.db.tupIns + r.db.tupUpd))} / ${fmt(perJob(s, (r) => r.db.tupIns + r.db.tupUpd + r.db.tupDel))}`,
          ...(s === "warp-effect"
            ? {
                ratio: `${fmt(rate(s) / best)}× best peer${
                  before === undefined ? "" : `; vs ${before.label} (paired): ${fmt(paired(jps))}× jobs/s, ${fmt(paired((r) => r.cpuMs! / Math.max(1, r.completed)))}× CPU/job`
                }`
              }
            : s === before?.label
            ? { ratio: `${fmt(rate(s) / best)}× best peer` }
            : {})
        })
      }
      panels.push(
        {
          title: `9. Keyless: ${jobs.toLocaleString("en-US")} no-op jobs, 8 workers, every system${OWN_PROCESS ? " (each run in its own process)" : ""}`,
          unit: "jobs/s",
          bars: names.map((s) => ({ label: label(s), value: rate(s), note: `${fmt(rate(s))} (${fmt(perJob(s, (r) => r.db.xactCommit))} xact/job)`, ours: s === "warp-effect" }))
        }
      )
      // the CPU time per job of the worker's process (a panel of its own until 2026-12-07) and of the server
      costOf(`9 keyless, ${jobs.toLocaleString("en-US")} jobs, 8 lanes`, res, { ours: "warp-effect", peers: names.filter((s) => !s.startsWith("warp-effect") && s !== before?.label), label })
    }

    // 2 + 5. contended Wait
    const contended: Record<number, Map<ContendedName, Array<BacklogResult>>> = {}
    if (enabled("2") || enabled("5")) {
      const jobs = scaled(5_000)
      for (const limit of [1, 5]) {
        log(`2. contended Wait: ${jobs} jobs on 1 key, limit ${limit}, 8 workers`)
        const systems = Object.keys(contendedSystems) as Array<ContendedName>
        const res = await alternate(systems, (s) =>
          withFreshDatabase(server.url, (url) =>
            contendedSystems[s](url, { jobs, keyOf: () => "k", limit, workers: 8, handlerMs: 0, capMs: 6_000, pollMs: 100 })
          ).then((r) => {
            log(`   ${s}: ${r.completed} in ${(r.elapsedMs / 1000).toFixed(1)} s = ${fmt(jps(r))} jobs/s, requeues ${r.requeues}, max holders ${r.maxHolders}, ${costLog(r)}`)
            if (r.maxHolders > limit) throw new Error(`${s} ran ${r.maxHolders} jobs of one key at once (limit ${limit})`)
            return r
          })
        )
        contended[limit] = res
        raw[`2.limit${limit}`] = Object.fromEntries(res)
        const med = (s: ContendedName) => median(res.get(s)!.map(jps))
        const ours = med("warp-effect")
        const best = Math.max(...peers.map(med))
        const ratio = ours / best
        // issue 15: contended Wait ≥ 3× the best peer at limit 1, ≥ 1.5× at limit 5
        const goal = limit === 1 ? 3 : 1.5
        for (const s of systems) {
          rows.push({
            scenario: `2 contended, limit ${limit}`,
            system: s === "graphile-worker" ? `graphile-worker (${limit === 1 ? "queue_name" : "5 queues round-robin"})` : s === "pg-boss" ? `pg-boss (groupConcurrency ${limit})` : s,
            metric: "jobs/s",
            value: fmt(med(s)),
            ...(s === "warp-effect" ? { ratio: `${fmt(ratio)}× best peer`, goal: `≥ ${goal}`, met: ratio >= goal } : s.startsWith("warp-effect, ") ? { ratio: `${fmt(med(s) / best)}× best peer` } : {})
          })
        }
        goals.push({ goal: `2. contended Wait, limit ${limit}: ≥ ${goal}× best peer`, measured: `${fmt(ratio)}×`, met: ratio >= goal })
        panels.push({
          title: `2. Contended: ${jobs.toLocaleString("en-US")} jobs on one key, limit ${limit}, 8 workers`,
          unit: "jobs/s",
          bars: systems.map((s) => ({ label: s, value: med(s), note: fmt(med(s)), ours: s.startsWith("warp-effect") }))
        })
        costOf(`2 contended, limit ${limit}`, res, { ours: "warp-effect", peers })
      }
    }

    // 3. many keys: 300 and 1,000 keys (the issue's goals: ≥ 1× the best peer at both), the job count scaled
    if (enabled("3")) {
      const jobs = scaled(20_000)
      for (const keys of [300, 1_000]) {
        const random = rng(42)
        const keyOfJob = Array.from({ length: jobs }, () => `k${Math.floor(random() * keys)}`)
        log(`3. many keys: ${jobs} jobs over ${keys} keys, limit 1 Wait`)
        const res = await alternate(Object.keys(manyKeysSystems) as Array<ManyKeysName>, (s) =>
          withFreshDatabase(server.url, (url) =>
            manyKeysSystems[s](url, { jobs, keyOf: (i) => keyOfJob[i], limit: 1, workers: 8, handlerMs: 0, capMs: 12_000, pollMs: 100 })
          ).then((r) => {
            log(`   ${s}: ${r.completed} in ${(r.elapsedMs / 1000).toFixed(1)} s = ${fmt(jps(r))} jobs/s, requeues ${r.requeues}, ${costLog(r)}`)
            if (r.maxHolders > 1) throw new Error(`${s} ran ${r.maxHolders} jobs of one key at once`)
            return r
          })
        )
        raw[`3.keys${keys}`] = Object.fromEntries(res)
        const med = (s: ManyKeysName) => median(res.get(s)!.map(jps))
        const ratio = med("warp-effect") / Math.max(med("graphile-worker"), med("pg-boss"))
        const scenario = `3 many keys, ${keys.toLocaleString("en-US")} keys`
        for (const s of Object.keys(manyKeysSystems) as Array<ManyKeysName>) {
          rows.push({
            scenario,
            system: s,
            metric: "jobs/s",
            value: fmt(med(s)),
            ...(s === "warp-effect, lock-delay off"
              ? { ratio: `lock-delay on / off: ${fmt(med("warp-effect") / med(s))}×` }
              : s === "warp-effect"
              ? { ratio: `${fmt(ratio)}× best peer; ${fmt(median(res.get(s)!.map((r) => r.requeues / Math.max(1, r.succeeded))))} requeues/job`, goal: "≥ 1", met: ratio >= 1 }
              : {})
          })
        }
        goals.push({ goal: `3. many keys, ${jobs} jobs over ${keys} keys, limit 1: ≥ 1× best peer`, measured: `${fmt(ratio)}×`, met: ratio >= 1 })
        panels.push({
          title: `3. Many keys: ${jobs.toLocaleString("en-US")} jobs over ${keys.toLocaleString("en-US")} keys, limit 1`,
          unit: "jobs/s",
          bars: (Object.keys(manyKeysSystems) as Array<ManyKeysName>).map((s) => ({ label: s, value: med(s), note: fmt(med(s)), ours: s.startsWith("warp-effect") }))
        })
        costOf(scenario, res, { ours: "warp-effect", peers })
      }
    }

    // 4. dedupe Skip
    if (enabled("4")) {
      const random = rng(7)
      const keys = 100
      const enqueues = scaled(10_000)
      const keyOfEnqueue = Array.from({ length: enqueues }, () => `k${Math.floor(random() * keys)}`)
      const spec = { enqueues, keys, keyOf: (i: number) => keyOfEnqueue[i]!, producers: 4, workers: 8, handlerMs: 10, pollMs: 100, capMs: 120_000 }
      log(`4. dedupe: ${spec.enqueues} enqueues over ${spec.keys} keys from ${spec.producers} producers, handlers of ${spec.handlerMs} ms on ${spec.workers} lanes`)
      // every way each system drops a duplicate: this project's Mutex Skip (until 2026-12-07 the only
      // one, as "4 dedupe Skip") and its job keys (issue 42); graphile-worker's job keys; pg-boss's
      // singletonKey on an exclusive queue and as a throttle. `exclusive`: a job of the key may not
      // run twice at once (checked); the others may overlap (a key is free again once its job started,
      // or for graphile-worker's replace mode a running job's key moves to the new one)
      const variants: Record<string, { readonly system: string; readonly bar: string; readonly exclusive: boolean; readonly missing?: string | undefined; readonly run: (url: string) => Promise<DedupeResult> }> = {
        "warp-effect (Mutex, Skip)": { system: "warp-effect", bar: "warp-effect: Mutex Skip", exclusive: true, run: (url) => warp.dedupe(url, spec) },
        'warp-effect (job key, mode "keep")': { system: "warp-effect", bar: "warp-effect: job key keep", exclusive: false, missing: warp.missing("withJobKey"), run: (url) => warp.dedupe(url, spec, { kind: "jobKey", mode: "keep" }) },
        'warp-effect (job key, mode "keep", includeProcessing)': {
          system: "warp-effect",
          bar: "warp-effect: keep + processing",
          exclusive: false,
          missing: warp.missing("withJobKey"),
          run: (url) => warp.dedupe(url, spec, { kind: "jobKey", mode: "keep", includeProcessing: true })
        },
        'graphile-worker (jobKey, jobKeyMode "unsafe_dedupe")': { system: "graphile-worker", bar: "graphile-worker: unsafe_dedupe", exclusive: false, run: (url) => graphile.dedupe(url, spec, "unsafe_dedupe") },
        'graphile-worker (jobKey, jobKeyMode "replace": its default)': { system: "graphile-worker", bar: "graphile-worker: replace", exclusive: false, run: (url) => graphile.dedupe(url, spec, "replace") },
        "pg-boss (exclusive queue + singletonKey)": { system: "pg-boss", bar: "pg-boss: exclusive", exclusive: true, run: (url) => pgboss.dedupe(url, spec) },
        "pg-boss (singletonKey + singletonSeconds 1: throttle)": { system: "pg-boss", bar: "pg-boss: throttle 1 s", exclusive: false, run: (url) => pgboss.dedupe(url, spec, { throttleSeconds: 1 }) }
      }
      const all = Object.keys(variants)
      for (const v of all) if (variants[v]!.missing !== undefined) log(`   ${v}: not in this tree (${variants[v]!.missing}), skipped`)
      const names = all.filter((v) => variants[v]!.missing === undefined)
      const res = await alternate(names, (v) =>
        withFreshDatabase(server.url, (url) => variants[v]!.run(url)).then((r) => {
          const runs = [...r.runsPerKey.values()]
          const total = runs.reduce((a, b) => a + b, 0)
          log(
            `   ${v}: ran ${total} (per key median ${median(runs)}, ${Math.min(...runs)}–${Math.max(...runs)}), accepted ${r.accepted}, ${r.outcomes === undefined ? "" : `outcomes ${JSON.stringify(r.outcomes)}, `}states ${JSON.stringify(r.states)}, enqueue ${(r.enqueueMs / 1000).toFixed(1)} s = ${fmt(spec.enqueues / (r.enqueueMs / 1000))}/s, settled ${(r.settleMs / 1000).toFixed(1)} s, max of one key at once ${r.maxHolders}`
          )
          if (variants[v]!.exclusive && r.maxHolders > 1) throw new Error(`${v} ran ${r.maxHolders} jobs of one key at once`)
          return { ...r, total, perKeyMedian: median(runs), perKeyMin: Math.min(...runs), perKeyMax: Math.max(...runs), enqueuesPerSecond: spec.enqueues / (r.enqueueMs / 1000), runsPerKey: undefined }
        })
      )
      raw["4"] = { enqueues, keys, producers: spec.producers, workers: spec.workers, handlerMs: spec.handlerMs, skipped: Object.fromEntries(all.filter((v) => !names.includes(v)).map((v) => [v, `not in this tree: ${variants[v]!.missing}`])), runs: Object.fromEntries(res) }
      const bars: Array<Panel["bars"][number]> = []
      for (const v of all) {
        const rs = res.get(v)
        if (rs === undefined) {
          rows.push({ scenario: "4 dedupe", system: v, metric: "runs per key (median; min–max)", value: `not in this tree (${variants[v]!.missing})` })
          continue
        }
        const perKey = median(rs.map((r) => r.perKeyMedian))
        const eps = median(rs.map((r) => r.enqueuesPerSecond))
        const settled = median(rs.map((r) => r.settleMs / 1000))
        rows.push({ scenario: "4 dedupe", system: v, metric: "runs per key (median; min–max)", value: `${fmt(perKey)}; ${median(rs.map((r) => r.perKeyMin))}–${median(rs.map((r) => r.perKeyMax))}` })
        rows.push({
          scenario: "4 dedupe",
          system: v,
          metric: "enqueues/s; settled s; runs in all; max of one key at once",
          value: `${fmt(eps)}; ${fmt(settled)}; ${fmt(median(rs.map((r) => r.total)))}; ${Math.max(...rs.map((r) => r.maxHolders))}`
        })
        bars.push({ label: variants[v]!.bar, value: perKey, note: `${fmt(perKey)} (${fmt(eps)} enq/s, settled ${fmt(settled)} s)`, ours: variants[v]!.system === "warp-effect" })
      }
      panels.push({
        title: `4. Dedupe: ${spec.enqueues.toLocaleString("en-US")} enqueues over ${spec.keys} keys while ${spec.handlerMs} ms handlers run`,
        unit: "runs per key, median (fewer = more duplicates dropped)",
        better: "neither",
        bars
      })
    }

    // 5. wasted pickups and writes (from scenario 2's runs)
    if (enabled("5") && contended[1] !== undefined) {
      const writeBars: Array<Panel["bars"][number]> = []
      const xactBars: Array<Panel["bars"][number]> = []
      for (const limit of [1, 5]) {
        for (const s of [...contended[limit]!.keys()]) {
          const rs = contended[limit]!.get(s)!
          const perJob = (f: (r: BacklogResult) => number) => median(rs.map((r) => f(r) / Math.max(1, r.succeeded)))
          const requeues = perJob((r) => r.requeues)
          const writes = perJob((r) => r.db.tupIns + r.db.tupUpd)
          const writesAll = perJob((r) => r.db.tupIns + r.db.tupUpd + r.db.tupDel)
          const xact = perJob((r) => r.db.xactCommit)
          const statements = perJob((r) => r.db.statements)
          rows.push({
            scenario: `5 cost, limit ${limit}`,
            system: s,
            metric: "requeues / ins+upd / +del / xact / statements per job",
            value: `${s.startsWith("warp-effect") ? fmt(requeues) : "n/a"} / ${fmt(writes)} / ${fmt(writesAll)} / ${fmt(xact)} / ${fmt(statements)}`,
            ...(s === "warp-effect" ? { goal: "requeues ≤ 1", met: requeues <= 1 } : {})
          })
          if (s === "warp-effect") {
            goals.push({ goal: `5. requeues per succeeded job, limit ${limit} ≤ 1`, measured: fmt(requeues), met: requeues <= 1 })
            // the issue's cost goals for a keyed job: round trips (statements, from pg_stat_statements) and row writes
            if (!Number.isNaN(statements)) goals.push({ goal: `5. round trips (statements) per keyed job, limit ${limit} ≤ 2`, measured: fmt(statements), met: statements <= 2 })
            goals.push({ goal: `5. row writes (inserts + updates) per keyed job, limit ${limit} ≤ 3`, measured: `${fmt(writes)} (+ deletes: ${fmt(writesAll)})`, met: writes <= 3 })
          }
          if (s === "warp-effect, Fifo mode (opt-in)") goals.push({ goal: `Fifo mode: wasted pickups (requeues) per succeeded job, limit ${limit} = 0`, measured: fmt(requeues), met: requeues === 0 })
          writeBars.push({ label: `${s}, limit ${limit}`, value: writesAll, note: fmt(writesAll), ours: s.startsWith("warp-effect") })
          xactBars.push({ label: `${s}, limit ${limit}`, value: xact, note: fmt(xact), ours: s.startsWith("warp-effect") })
        }
      }
      panels.push(
        { title: "5. Database row writes per succeeded job (scenario 2)", unit: "row inserts+updates+deletes", better: "lower", bars: writeBars },
        { title: "5. Transactions per succeeded job (scenario 2)", unit: "xact_commit", better: "lower", bars: xactBars }
      )
    }

    // 6. latency
    const multiplexAvailable = readFileSync(here("../src/internal/semaphore/SemaphoreProviderPg.ts"), "utf8").includes("multiplex")
    if (enabled("6")) {
      const variants = [
        { name: "default", options: {} },
        { name: "lock-delay off", options: { lockDelay: false } },
        ...(multiplexAvailable ? [{ name: "multiplex", options: { multiplex: { connections: 4 } } }] : [])
      ]
      const spec = { iterations: scaled(3_000), block: 100, limits: [1, 5], variants }
      log(`6. acquire/release latency: ${spec.iterations} of each, in alternating blocks of ${spec.block} (${variants.map((v) => v.name).join(", ")})`)
      const samples = await withFreshDatabase(server.url, (url) => warp.latency(url, spec))
      const s1 = samples.get("select1")!
      const base = median(s1)
      const stats: Record<string, unknown> = {}
      const bars: Panel["bars"][number][] = [{ label: "SELECT 1", value: base, note: `${fmt(base)} ms`, ours: false }]
      rows.push({ scenario: "6 latency", system: "SELECT 1 (one round trip)", metric: "p50 / p99 ms", value: `${fmt(base)} / ${fmt(percentile(s1, 99))}` })
      for (const v of variants) {
        for (const limit of spec.limits) {
          const tag = `${v.name}:${limit}`
          const a = samples.get(`acquire:${tag}`)!
          const r = samples.get(`release:${tag}`)!
          stats[tag] = { acquireP50: median(a), acquireP99: percentile(a, 99), releaseP50: median(r), releaseP99: percentile(r, 99) }
          for (const [what, xs] of [["acquire", a], ["release", r]] as const) {
            rows.push({
              scenario: "6 latency",
              system: `PG provider ${v.name}, ${what}, limit ${limit}`,
              metric: "p50 / p99 ms",
              value: `${fmt(median(xs))} / ${fmt(percentile(xs, 99))}`,
              ratio: `${fmt(median(xs) / base)}× SELECT 1`
            })
            bars.push({ label: `${v.name} ${what}, limit ${limit}`, value: median(xs), note: `${fmt(median(xs))} ms (×${fmt(median(xs) / base)})`, ours: true })
          }
        }
      }
      raw["6"] = { select1P50: base, select1P99: percentile(s1, 99), ...stats }
      panels.push({ title: "6. PG semaphore provider latency vs one SELECT 1", unit: "ms, median", better: "lower", bars })
    }

    // 7. connections while holding slots
    if (enabled("7")) {
      const slots = scaled(1_000)
      const variants = multiplexAvailable ? (["default", "multiplex (4 connections)"] as const) : (["default"] as const)
      log(`7. connections while ${slots} slots are held (${variants.join(", ")})`)
      const res = await alternate(variants as ReadonlyArray<string>, (v) =>
        withFreshDatabase(server.url, async (url) => {
          const observer = new pg.Client({ connectionString: url })
          await observer.connect()
          try {
            const r = await warp.connectionsWhileHolding(url, () => connectionsTo(url, observer), {
              slots,
              ...(v === "default" ? {} : { multiplex: { connections: 4 } })
            })
            log(`   ${v}: held ${r.held}, connections ${r.during}, acquired in ${(r.acquireMs / 1000).toFixed(1)} s`)
            return r
          } catch (e) {
            log(`   ${v}: failed: ${String((e as Error)?.message ?? e)}`)
            return { held: 0, during: Number.NaN, acquireMs: Number.NaN, error: String((e as Error)?.message ?? e) }
          } finally {
            await observer.end()
          }
        })
      )
      raw["7"] = Object.fromEntries(res)
      const bars: Panel["bars"][number][] = []
      for (const v of variants) {
        const rs = res.get(v)!
        const conns = median(rs.map((r) => r.during))
        rows.push({ scenario: "7 connections", system: `warp-effect PG provider, ${v}`, metric: `connections while ${slots} slots held`, value: `${fmt(conns)} (held ${median(rs.map((r) => r.held))})` })
        bars.push({ label: v, value: conns, note: fmt(conns), ours: true })
      }
      if (!multiplexAvailable) rows.push({ scenario: "7 connections", system: "multiplex mode", metric: "—", value: "not in this tree" })
      panels.push({ title: `7. PostgreSQL connections while ${slots.toLocaleString("en-US")} slots are held in one process`, unit: "backends", better: "lower", bars })
    }

    // 8. producers
    if (enabled("8")) {
      const producerSystems = { "warp-effect": warp.producers, "graphile-worker": graphile.producers, "pg-boss": pgboss.producers } as const
      type Producer = keyof typeof producerSystems
      const cases: ReadonlyArray<{ readonly label: string; readonly spec: ProducerSpec; readonly rounds?: number }> = [
        { label: "single, 1 producer", spec: { mode: "single", jobs: scaled(3_000), producers: 1, batch: 1 } },
        { label: "single, 8 producers", spec: { mode: "single", jobs: scaled(3_000), producers: 8, batch: 1 } },
        { label: "single keyed, 8 producers", spec: { mode: "single", jobs: scaled(3_000), producers: 8, batch: 1, keyed: true } },
        { label: `bulk of ${scaled(3_000).toLocaleString("en-US")}, one call`, spec: { mode: "bulk", jobs: scaled(3_000), producers: 1, batch: scaled(3_000) } },
        { label: `bulk of ${scaled(100_000).toLocaleString("en-US")}, one call`, spec: { mode: "bulk", jobs: scaled(100_000), producers: 1, batch: scaled(100_000) } },
        { label: `backlog of ${scaled(1_000_000).toLocaleString("en-US")}, calls of 10,000`, spec: { mode: "bulk", jobs: scaled(1_000_000), producers: 1, batch: 10_000 }, rounds: 1 }
      ]
      const bars: Array<Panel["bars"][number]> = []
      const perCase: Record<string, unknown> = {}
      for (const c of cases) {
        log(`8. producers: ${c.label} (${c.spec.jobs} jobs)`)
        const res = await alternate(
          Object.keys(producerSystems) as Array<Producer>,
          (s) =>
            withFreshDatabase(server.url, (url) => producerSystems[s](url, c.spec)).then((r: ProducerResult) => {
              log(`   ${s}: ${fmt(r.jobs / (r.elapsedMs / 1000))} jobs/s (${(r.elapsedMs / 1000).toFixed(2)} s), rows ${r.rows}, row writes per job ${fmt((r.db.tupIns + r.db.tupUpd) / r.jobs)}`)
              if (r.rows !== r.jobs) throw new Error(`${s} wrote ${r.rows} rows for ${r.jobs} jobs`)
              return r
            }),
          c.rounds ?? ROUNDS
        )
        perCase[c.label] = Object.fromEntries(res)
        const rate = (s: Producer) => median(res.get(s)!.map((r) => r.jobs / (r.elapsedMs / 1000)))
        const secs = (s: Producer) => median(res.get(s)!.map((r) => r.elapsedMs / 1000))
        const best = Math.min(secs("graphile-worker"), secs("pg-boss"))
        for (const s of Object.keys(producerSystems) as Array<Producer>) {
          const writes = median(res.get(s)!.map((r) => (r.db.tupIns + r.db.tupUpd) / r.jobs))
          const ours = s === "warp-effect"
          const isBacklog = c.label.startsWith("backlog")
          const isBulk = c.spec.mode === "bulk" && !isBacklog
          rows.push({
            scenario: `8 producers, ${c.label}`,
            system: s,
            metric: isBacklog ? "s; row writes per job" : "jobs/s; row writes per job",
            value: `${isBacklog ? fmt(secs(s)) : fmt(rate(s))}; ${fmt(writes)}`,
            ...(ours && isBulk ? { ratio: fmt(rate(s) / rate("graphile-worker")), goal: "≥ 1.0× graphile addJobs", met: rate(s) >= rate("graphile-worker") } : {}),
            ...(ours && isBacklog ? { ratio: fmt(secs(s) / best), goal: "≤ 1.0× best peer's time", met: secs(s) <= best } : {})
          })
          if (ours && isBulk) goals.push({ goal: `8. ${c.label}: ≥ 1.0× graphile-worker addJobs`, measured: `${fmt(rate(s) / rate("graphile-worker"))}×`, met: rate(s) >= rate("graphile-worker") })
          if (ours && isBacklog) goals.push({ goal: `8. ${c.label}: ≤ 1.0× the best peer's time`, measured: `${fmt(secs(s))} s vs ${fmt(best)} s`, met: secs(s) <= best })
          if (ours && c.spec.mode === "bulk") goals.push({ goal: `8. ${c.label}: 1 row write per enqueued job`, measured: fmt(writes), met: writes <= 1 })
          if (!isBacklog) bars.push({ label: `${s}, ${c.label}`, value: rate(s), note: fmt(rate(s)), ours })
        }
      }
      raw["8"] = perCase
      panels.push({ title: "8. Producers: enqueue throughput into an empty queue", unit: "jobs/s", bars })
    }

    // 10. claim latency with a large backlog over many vs few live keys
    if (enabled("10")) {
      const jobs = scaled(1_000_000)
      const keyCounts = [scaled(100_000), scaled(1_000)] as const
      const [hi, lo] = keyCounts
      const keyOf = new Map(
        keyCounts.map((keys) => {
          const random = rng(10)
          return [keys, Array.from({ length: jobs }, () => `k${Math.floor(random() * keys)}`)] as const
        })
      )
      const claimSystems: Record<string, (url: string, spec: ClaimSpec) => Promise<ClaimRig>> = {
        "warp-effect": warp.claimLatency,
        "warp-effect, Fifo mode (opt-in)": (url, spec) => warp.claimLatency(url, { ...spec, mode: "Fifo" }),
        "graphile-worker": graphile.claimLatency,
        "pg-boss": pgboss.claimLatency
      }
      const names = Object.keys(claimSystems)
      // per system both backlogs are written into two databases, then measured in alternating blocks
      // (the order flips every block), so that the machine's drift hits both key counts alike
      const blocks = 5
      const perBlock = 80
      const warmup = 10
      log(`10. claim latency: ${jobs} waiting jobs over ${hi} vs ${lo} keys (limit 1), 8 lanes, ${blocks} alternating blocks of ${perBlock} timed claims (after ${warmup}) per key count`)
      const out: Record<string, unknown> = { jobs, keys: keyCounts, blocks, perBlock, warmup, lanes: 8 }
      const bars: Array<Panel["bars"][number]> = []
      for (const s of names) {
        const urls = new Map<number, string>()
        try {
          const rigs = new Map<number, ClaimRig>()
          const waitingBefore = new Map<number, number>()
          for (const keys of keyCounts) {
            const url = await createDatabase(server.url)
            urls.set(keys, url)
            const ks = keyOf.get(keys)!
            const rig = await claimSystems[s]!(url, { jobs, keys, keyOf: (i) => ks[i]!, workers: 8, pollMs: 100, capMs: 120_000 })
            rigs.set(keys, rig)
            waitingBefore.set(keys, await rig.waiting())
            log(`   ${s}, ${keys} keys: backlog of ${waitingBefore.get(keys)} written and analyzed in ${rig.insertSeconds.toFixed(1)} s`)
          }
          const got = new Map<number, Array<ClaimBlock>>(keyCounts.map((k) => [k, []]))
          for (let b = 0; b < blocks; b++) {
            for (const keys of b % 2 === 0 ? keyCounts : [...keyCounts].reverse()) {
              const r = await rigs.get(keys)!.block(perBlock, warmup)
              if (r.maxHolders > 1) throw new Error(`${s} ran ${r.maxHolders} jobs of one key at once`)
              got.get(keys)!.push(r)
            }
          }
          const stat = (keys: number) => {
            const rs = got.get(keys)!
            const all = rs.flatMap((r) => r.samples)
            const kinds = [...new Set(rs.flatMap((r) => Object.keys(r.byKind ?? {})))]
            const byKind = Object.fromEntries(
              kinds.map((k) => {
                const xs = rs.flatMap((r) => r.byKind?.[k] ?? [])
                return [k, { claims: xs.length, p50: median(xs), p99: percentile(xs, 99) }]
              })
            )
            return { p50: median(all), p99: percentile(all, 99), claims: all.length, empty: rs.reduce((a, r) => a + r.empty, 0), blockP50: rs.map((r) => median(r.samples)), insertSeconds: rigs.get(keys)!.insertSeconds, waitingBefore: waitingBefore.get(keys)!, ...(kinds.length > 0 ? { byKind } : {}) }
          }
          const a = { ...stat(hi), waitingAfter: await rigs.get(hi)!.waiting() }
          const z = { ...stat(lo), waitingAfter: await rigs.get(lo)!.waiting() }
          const ratio = a.p50 / z.p50
          const paired = median(a.blockP50.map((x, k) => x / z.blockP50[k]!))
          log(`   ${s}: p50 / p99 ${fmt(a.p50)} / ${fmt(a.p99)} ms at ${hi} keys (${a.claims} claims, ${a.empty} empty), ${fmt(z.p50)} / ${fmt(z.p99)} ms at ${lo} keys (${z.claims}, ${z.empty} empty): ratio ${fmt(ratio)} (per block ${fmt(paired)})`)
          for (const [k, v] of Object.entries(a.byKind ?? {})) {
            const w = z.byKind?.[k]
            log(`      ${k} claims: p50 / p99 ${fmt(v.p50)} / ${fmt(v.p99)} ms at ${hi} keys (${v.claims}), ${w === undefined ? "none" : `${fmt(w.p50)} / ${fmt(w.p99)} ms`} at ${lo} keys (${w?.claims ?? 0})`)
          }
          out[s] = { [hi]: a, [lo]: z, p50Ratio: ratio, p50RatioPairedBlocks: paired, p99Ratio: a.p99 / z.p99 }
          rows.push({
            scenario: `10 claim latency, ${jobs.toLocaleString("en-US")} waiting`,
            system: s === "graphile-worker" ? "graphile-worker (queue_name)" : s === "pg-boss" ? "pg-boss (group, groupConcurrency 1)" : s,
            metric: `claim p50 / p99 ms, ${hi.toLocaleString("en-US")} keys; ${lo.toLocaleString("en-US")} keys`,
            value: `${fmt(a.p50)} / ${fmt(a.p99)}; ${fmt(z.p50)} / ${fmt(z.p99)}`,
            ratio: `${fmt(ratio)}× p50 (median per block ${fmt(paired)}×); p99 ${fmt(a.p99 / z.p99)}×`,
            ...(s === "warp-effect" ? { goal: "≤ 2", met: ratio <= 2 } : {})
          })
          if (s === "warp-effect") goals.push({ goal: `10. claim latency, ${jobs} waiting: p50 at ${hi} keys ≤ 2× at ${lo} keys`, measured: `${fmt(ratio)}× (${fmt(a.p50)} vs ${fmt(z.p50)} ms; p99 ${fmt(a.p99)} vs ${fmt(z.p99)} ms)`, met: ratio <= 2 })
          bars.push({ label: `${s}, ${hi.toLocaleString("en-US")} keys`, value: a.p50, note: `${fmt(a.p50)} ms (p99 ${fmt(a.p99)})`, ours: s.startsWith("warp-effect") })
          bars.push({ label: `${s}, ${lo.toLocaleString("en-US")} keys`, value: z.p50, note: `${fmt(z.p50)} ms (p99 ${fmt(z.p99)})`, ours: s.startsWith("warp-effect") })
        } finally {
          for (const url of urls.values()) await dropDatabase(server.url, url)
        }
      }
      raw["10"] = out
      panels.push({ title: `10. Claim latency: ${jobs.toLocaleString("en-US")} waiting jobs over ${hi.toLocaleString("en-US")} vs ${lo.toLocaleString("en-US")} keys, limit 1, 8 lanes`, unit: "ms per claim, median", better: "lower", bars })
    }

    // 11. fair share and total caps (issue 17): a skewed backlog, one hot key enqueued first and many
    // cold keys behind it. (a) the keys compete for the lanes: every system, per-key limit 10; (b) they
    // compete for a total cap over every key (this project only: the peers have no such cap).
    if (enabled("11")) {
      const hot = scaled(10_000)
      const coldKeys = Math.max(2, scaled(100))
      const cold = 10
      const jobs = hot + coldKeys * cold
      const keyOfJob = (i: number) => (i < hot ? "hot" : `cold-${(i - hot) % coldKeys}`)
      const totals = new Map<string, number>([["hot", hot], ...Array.from({ length: coldKeys }, (_, k) => [`cold-${k}`, cold] as const)])
      /** Jain's index of per-key completions while every key was backlogged (until the first key drained), and the cold jobs' p99 completion position. */
      const fairness = (order: ReadonlyArray<string | undefined>) => {
        const counts = new Map<string, number>([...totals.keys()].map((k) => [k, 0]))
        for (const key of order) {
          const n = counts.get(key!)! + 1
          counts.set(key!, n)
          if (n === totals.get(key!)) break
        }
        const xs = [...counts.values()]
        const sum = xs.reduce((a, b) => a + b, 0)
        const squares = xs.reduce((a, b) => a + b * b, 0)
        const positions = order.flatMap((key, position) => (key === "hot" ? [] : [position]))
        return { jain: squares === 0 ? 1 : (sum * sum) / (xs.length * squares), coldP99: percentile(positions, 99), window: sum }
      }
      const fairSystems: Record<string, (url: string, spec: BacklogSpec) => Promise<BacklogResult>> = {
        "warp-effect, weight 1 (fair share)": (url, spec) => warp.backlog(url, { ...spec, weight: 1 }),
        "warp-effect, no weight (ScheduleTime order)": warp.backlog,
        "graphile-worker": graphile.backlog,
        "pg-boss": pgboss.backlog
      }
      const capped = 4
      const cappedMs = 2
      const cappedSystems: Record<string, (url: string, spec: BacklogSpec) => Promise<BacklogResult>> = {
        [`warp-effect, weight 1, total cap ${capped}`]: (url, spec) => warp.backlog(url, { ...spec, weight: 1, total: capped }),
        [`warp-effect, no weight, total cap ${capped}`]: (url, spec) => warp.backlog(url, { ...spec, total: capped })
      }
      const out: Record<string, unknown> = { hot, coldKeys, cold, limit: 10, lanes: 8, capped, cappedHandlerMs: cappedMs }
      const bars: Array<Panel["bars"][number]> = []
      for (const [part, systems, handlerMs] of [["a", fairSystems, 0], ["b", cappedSystems, cappedMs]] as const) {
        log(`11${part}. fair share: one hot key of ${hot} jobs enqueued first, ${coldKeys} cold keys of ${cold}, limit 10 Wait, 8 lanes, handlers ${handlerMs} ms${part === "b" ? `, total cap ${capped} over every key` : ""}`)
        const res = await alternate(Object.keys(systems), (s) =>
          withFreshDatabase(server.url, (url) => systems[s]!(url, { jobs, keyOf: keyOfJob, limit: 10, workers: 8, handlerMs, capMs: 180_000, pollMs: 100 })).then((r) => {
            const f = fairness(r.order ?? [])
            log(`   ${s}: ${r.completed} in ${(r.elapsedMs / 1000).toFixed(1)} s = ${fmt(jps(r))} jobs/s, Jain ${f.jain.toFixed(4)}, cold p99 position ${f.coldP99}, max of one key ${r.maxHolders}, max of all keys ${r.maxLive}`)
            if (r.maxHolders > 10) throw new Error(`${s} ran ${r.maxHolders} jobs of one key at once`)
            if (part === "b" && (r.maxLive ?? Infinity) > capped) throw new Error(`${s} ran ${r.maxLive} jobs of the group at once (cap ${capped})`)
            if (r.completed < jobs) throw new Error(`${s} completed ${r.completed} of ${jobs} jobs within the cap`)
            return { jps: jps(r), ...f, maxHolders: r.maxHolders, maxLive: r.maxLive, db: r.db }
          })
        )
        out[part] = Object.fromEntries(res)
        for (const s of Object.keys(systems)) {
          const rs = res.get(s)!
          const jain = median(rs.map((r) => r.jain))
          const fair = s.includes("weight 1")
          rows.push({
            scenario: part === "a" ? "11a fair share, keys compete for lanes" : `11b fair share under a total cap of ${capped}`,
            system: s,
            metric: "Jain's index while all backlogged; cold p99 position; jobs/s",
            value: `${jain.toFixed(3)}; ${fmt(median(rs.map((r) => r.coldP99)))}; ${fmt(median(rs.map((r) => r.jps)))}`,
            ...(fair ? { goal: "Jain ≥ 0.95", met: jain >= 0.95 } : {})
          })
          if (fair) goals.push({ goal: `11${part}. fair share${part === "b" ? ` under a total cap of ${capped}` : ""}: Jain's index ≥ 0.95`, measured: jain.toFixed(4), met: jain >= 0.95 })
          bars.push({ label: `${part === "b" ? "[cap] " : ""}${s}`, value: jain, note: jain.toFixed(3), ours: s.startsWith("warp-effect") })
        }
      }
      raw["11"] = out
      panels.push({ title: `11. Fair share: one hot key of ${hot.toLocaleString("en-US")} first, ${coldKeys} cold keys of ${cold}: Jain's index while all are backlogged`, unit: "Jain's index", bars })
    }

    // 12. how long a slot stays unusable after its holder is killed (SIGKILL), per provider and deadline
    // (issue 23, item 7); the keyed throughput with lock-delay on and off is scenario 3's extra row
    if (enabled("12")) {
      const tries = Math.max(3, Math.round(5 * SCALE))
      const deadlines = [2_000, 10_000] as const
      const redis = (await PrivateRedis.available()) ? await PrivateRedis.start() : undefined
      const url = await createDatabase(server.url)
      log(`12. slot unusable after SIGKILL: ${tries} kills per provider and deadline (${deadlines.join(", ")} ms)${redis === undefined ? "; no redis-server here, Redis skipped" : ""}`)
      const out: Record<string, unknown> = { tries, deadlines }
      const bars: Array<Panel["bars"][number]> = []
      try {
        for (const deadlineMs of deadlines) {
          for (const kind of ["pg", "pg-no-lock-delay", "redis"] as const) {
            if (kind === "redis" && redis === undefined) continue
            const figures = await slotAfterKill(kind, kind === "redis" ? redis!.url : url, deadlineMs, tries)
            const label =
              kind === "pg" ? "PostgreSQL provider, lock-delay on (default)" : kind === "pg-no-lock-delay" ? "PostgreSQL provider, lock-delay off" : "Redis provider"
            log(`   ${label}, ${kind === "redis" ? "lease" : "deadline"} ${deadlineMs} ms: ${figures.map((f) => Math.round(f)).join(", ")} ms; median ${fmt(median(figures))}`)
            out[`${kind}@${deadlineMs}`] = figures
            rows.push({
              scenario: "12 slot unusable after SIGKILL",
              system: `warp-effect, ${label}`,
              metric: `ms from the kill to the next grant, ${kind === "redis" ? "lease" : "deadline"} ${deadlineMs / 1000} s (median of ${tries}; min–max)`,
              value: `${fmt(median(figures))} (${fmt(Math.min(...figures))}–${fmt(Math.max(...figures))})`
            })
            bars.push({ label: `${label}, ${deadlineMs / 1000} s`, value: median(figures), note: `${fmt(median(figures))} ms`, ours: true })
          }
        }
      } finally {
        await redis?.stop()
        await dropDatabase(server.url, url)
      }
      raw["12"] = out
      panels.push({ title: "12. Slot unusable after its holder's SIGKILL (ms, median)", unit: "ms", better: "lower", bars })
    }

    // 13. pickup latency (issue 40, item 5): enqueue → handler start on an idle worker, every system; and
    // how soon a Wait job starts after its key's slot frees (the peers' nearest equivalents)
    if (enabled("13")) {
      const warmup = 3
      const samples = Math.max(20, scaled(200))
      const handoffs = Math.max(10, scaled(100))
      const random = rng(13)
      // the gaps spread the enqueues over more than the slowest poller's cycle (pg-boss: 0.5 s)
      const pickupSpec: PickupSpec = { workers: 8, warmup, timeoutMs: 5_000, gaps: Array.from({ length: warmup + samples }, () => 50 + Math.round(random() * 550)) }
      const handoffSpec: HandoffSpec = {
        workers: 8,
        warmup,
        timeoutMs: 5_000,
        gaps: Array.from({ length: warmup + handoffs }, () => 50 + Math.round(random() * 200)),
        holds: Array.from({ length: warmup + handoffs }, () => 200 + Math.round(random() * 500))
      }
      const parts = [
        {
          part: "pickup",
          what: `enqueue return → handler start on an idle worker, ${samples} samples a round`,
          spec: pickupSpec,
          systems: {
            "warp-effect": warp.pickup,
            "graphile-worker": graphile.pickup,
            "pg-boss": pgboss.pickup,
            [effectqueue.name]: effectqueue.pickup
          } as Record<string, (url: string, spec: PickupSpec) => Promise<PickupResult>>
        },
        {
          part: "handoff",
          what: `a Wait job's start after its key's slot frees (limit 1), ${handoffs} samples a round`,
          spec: handoffSpec,
          systems: {
            "warp-effect (Semaphore(k, 1) Wait)": warp.handoff,
            "graphile-worker (queue_name: next job of a serial queue)": graphile.handoff,
            "pg-boss (group, groupConcurrency 1)": pgboss.handoff
          } as Record<string, (url: string, spec: HandoffSpec) => Promise<PickupResult>>
        }
      ] as const
      const out: Record<string, unknown> = { warmup, pickupSpec, handoffSpec }
      for (const { part, what, spec, systems } of parts) {
        log(`13 ${part}: ${what}, 8 lanes`)
        const names = Object.keys(systems)
        const res = await alternate(names, (s) =>
          withFreshDatabase(server.url, (url) => (systems as Record<string, (url: string, spec: PickupSpec | HandoffSpec) => Promise<PickupResult>>)[s]!(url, spec)).then((r) => {
            log(`   ${s}: p50 ${fmt(median(r.samples))} ms, p90 ${fmt(percentile(r.samples, 90))}, p99 ${fmt(percentile(r.samples, 99))}, max ${fmt(Math.max(...r.samples))}${r.timeouts > 0 ? `, ${r.timeouts} timeouts` : ""}`)
            return r
          })
        )
        const pooled = (s: string) => res.get(s)!.flatMap((r) => r.samples)
        const stat = (s: string) => {
          const xs = pooled(s)
          return { n: xs.length, p50: median(xs), p90: percentile(xs, 90), p99: percentile(xs, 99), max: Math.max(...xs), timeouts: res.get(s)!.reduce((a, r) => a + r.timeouts, 0), roundP50: res.get(s)!.map((r) => median(r.samples)) }
        }
        const stats = Object.fromEntries(names.map((s) => [s, stat(s)]))
        out[part] = { stats, rounds: Object.fromEntries(res) }
        const ours = names.find((s) => s.startsWith("warp-effect"))!
        const best = Math.min(...names.filter((s) => s !== ours).map((s) => stats[s]!.p50))
        const scenario = part === "pickup" ? "13 pickup on an idle worker" : "13 Wait job after its key frees"
        for (const s of names) {
          const x = stats[s]!
          rows.push({
            scenario,
            system: s,
            metric: part === "pickup" ? "ms enqueue return → handler start: p50 / p90 / p99 (samples; timeouts)" : "ms key freed → Wait job's handler start: p50 / p90 / p99 (samples; timeouts)",
            value: `${fmt(x.p50)} / ${fmt(x.p90)} / ${fmt(x.p99)} (${x.n}; ${x.timeouts})`,
            ...(s === ours ? { ratio: `${fmt(x.p50 / best)}× best peer's p50` } : {})
          })
        }
        panels.push({
          title: part === "pickup" ? "13. Pickup: enqueue return → handler start on an idle worker" : "13. A Wait job's start after its key's slot frees (limit 1)",
          unit: "ms, p50 (p99 in the note)",
          better: "lower",
          bars: names.map((s) => ({ label: s, value: stats[s]!.p50, note: `${fmt(stats[s]!.p50)} ms (p99 ${fmt(stats[s]!.p99)})`, ours: s === ours }))
        })
      }
      raw["13"] = out
    }

    // 14. a total cap's workload (issue 40, item 1): 40 keys, Semaphore(key, 2) Wait with a total cap of 4
    // over all of them, 5 ms handlers, one worker of 8 lanes, against the same jobs keyless on 4 lanes
    if (enabled("14")) {
      const jobs = scaled(2_000)
      const keys = 40
      const cap = 4
      const perKey = 2
      const handlerMs = 5
      const random = rng(14)
      const keyOfJob = Array.from({ length: jobs }, () => `k${Math.floor(random() * keys)}`)
      const keyed: BacklogSpec = { jobs, keyOf: (i) => keyOfJob[i], limit: perKey, workers: 8, handlerMs, capMs: 120_000, pollMs: 100 }
      const keyless: BacklogSpec = { jobs, keyOf: () => undefined, limit: 1, workers: cap, handlerMs, capMs: 120_000, pollMs: 100 }
      // per system: the capped run and its keyless baseline. The peers have no total cap over keys: their
      // nearest equivalent is the worker's own concurrency of 4 (a cap per process, which is the same
      // thing only while one worker process runs), with their per-key limit of 2
      const variants: Record<string, { readonly system: string; readonly capped: boolean; readonly run: (url: string) => Promise<BacklogResult> }> = {
        [`warp-effect, Semaphore(key, ${perKey}) Wait + total cap ${cap}, 8 lanes`]: { system: "warp-effect", capped: true, run: (url) => warp.backlog(url, { ...keyed, total: cap }) },
        [`warp-effect, keyless, ${cap} lanes`]: { system: "warp-effect", capped: false, run: (url) => warp.backlog(url, keyless) },
        [`graphile-worker, ${perKey} queues per key, concurrency ${cap}`]: { system: "graphile-worker", capped: true, run: (url) => graphile.backlog(url, { ...keyed, workers: cap }) },
        [`graphile-worker, keyless, concurrency ${cap}`]: { system: "graphile-worker", capped: false, run: (url) => graphile.backlog(url, keyless) },
        [`pg-boss, group + groupConcurrency ${perKey}, localConcurrency ${cap}`]: { system: "pg-boss", capped: true, run: (url) => pgboss.backlog(url, { ...keyed, workers: cap }) },
        [`pg-boss, keyless, localConcurrency ${cap}`]: { system: "pg-boss", capped: false, run: (url) => pgboss.backlog(url, keyless) }
      }
      const names = Object.keys(variants)
      log(`14. total cap: ${jobs} jobs over ${keys} keys, Semaphore(key, ${perKey}) Wait, total ${cap}, ${handlerMs} ms handlers, 8 lanes; vs keyless on ${cap} lanes`)
      const res = await alternate(names, (v) =>
        withFreshDatabase(server.url, (url) => variants[v]!.run(url)).then((r) => {
          log(`   ${v}: ${r.completed} in ${(r.elapsedMs / 1000).toFixed(1)} s = ${fmt(jps(r))} jobs/s, requeues ${r.requeues}, max of one key ${r.maxHolders}, max of all ${r.maxLive}, ${costLog(r)}`)
          if (variants[v]!.capped && r.maxHolders > perKey) throw new Error(`${v} ran ${r.maxHolders} jobs of one key at once (limit ${perKey})`)
          if (variants[v]!.capped && (r.maxLive ?? Infinity) > cap) throw new Error(`${v} ran ${r.maxLive} keyed jobs at once (cap ${cap})`)
          // a run that reaches its cap (120 s) keeps its rate over the window; the row says how many completed
          if (r.completed < jobs) log(`   ${v}: stopped at the cap with ${r.completed} of ${jobs} jobs completed`)
          return r
        })
      )
      raw["14"] = { jobs, keys, perKey, cap, handlerMs, runs: Object.fromEntries(res) }
      const rate = (v: string) => median(res.get(v)!.map(jps))
      const bars: Array<Panel["bars"][number]> = []
      for (const v of names) {
        const { system, capped } = variants[v]!
        const rs = res.get(v)!
        const base = names.find((w) => variants[w]!.system === system && !variants[w]!.capped)!
        // capped / keyless, paired by round (the order flips every round)
        const paired = median(rs.map((r, i) => jps(r) / jps(res.get(base)![i]!)))
        rows.push({
          scenario: `14 total cap ${cap} over ${keys} keys vs keyless on ${cap} lanes`,
          system: v,
          metric: "jobs/s; requeues/job; CPU ms/job: server [own database's backends]; worker",
          value: `${fmt(rate(v))}${rs.some((r) => r.completed < jobs) ? ` (a run stopped at the cap: ${Math.min(...rs.map((r) => r.completed))} of ${jobs} completed)` : ""}; ${system === "warp-effect" && capped ? fmt(median(rs.map((r) => r.requeues / Math.max(1, r.succeeded)))) : "n/a"}; ${na(medianOrNaN(rs.map(serverCpuPerJob)))} [${na(medianOrNaN(rs.map(databaseCpuPerJob)))}]; ${na(medianOrNaN(rs.map(workerCpuPerJob)))}`,
          ...(capped ? { ratio: `${fmt(paired)}× its keyless run (paired by round)` } : {})
        })
        bars.push({ label: v, value: rate(v), note: capped ? `${fmt(rate(v))} (${fmt(paired)}× keyless)` : fmt(rate(v)), ours: system === "warp-effect" })
      }
      panels.push({ title: `14. A total cap of ${cap} over ${keys} keys (limit ${perKey} each, ${handlerMs} ms handlers) vs keyless on ${cap} lanes`, unit: "jobs/s", bars })
    }

    // 15. priority under a backlog (issue 42): a backlog of no-op jobs at the default priority drains on
    // 8 lanes; high-priority jobs arrive at a steady rate; how long each waits from its enqueue to its start
    if (enabled("15")) {
      const spec: PrioritySpec = { backlog: scaled(100_000), workers: 8, pollMs: 100, leadMs: 1_000, high: 200, everyMs: 50, timeoutMs: 30_000 }
      // each system's own "higher": this project and pg-boss run the higher number first, graphile-worker the lower
      const variants: Record<string, { readonly system: string; readonly missing?: string | undefined; readonly run: (url: string) => Promise<PriorityResult> }> = {
        "warp-effect (withPriority(10))": { system: "warp-effect", missing: warp.missing("withPriority"), run: (url) => warp.priority(url, spec) },
        "graphile-worker (priority -10: lower runs first)": { system: "graphile-worker", run: (url) => graphile.priority(url, spec) },
        "pg-boss (priority 10)": { system: "pg-boss", run: (url) => pgboss.priority(url, spec) }
      }
      const rate = 1000 / spec.everyMs
      log(`15. priority: a backlog of ${spec.backlog} no-op jobs at the default priority draining on ${spec.workers} lanes; ${spec.high} high-priority no-op jobs at ${rate}/s from ${spec.leadMs / 1000} s after the worker's start`)
      const all = Object.keys(variants)
      for (const v of all) if (variants[v]!.missing !== undefined) log(`   ${v}: not in this tree (${variants[v]!.missing}), skipped`)
      const names = all.filter((v) => variants[v]!.missing === undefined)
      const drainRate = (r: PriorityResult) => r.lowCompleted / (r.drainMs / 1000)
      const res = await alternate(names, (v) =>
        withFreshDatabase(server.url, (url) => variants[v]!.run(url)).then((r) => {
          log(
            `   ${v}: high wait under the backlog p50 ${fmt(median(r.waits.filter((_, k) => r.backlogged[k])))} ms, p99 ${fmt(percentile(r.waits.filter((_, k) => r.backlogged[k]), 99))}; all high jobs p50 ${fmt(median(r.waits))} ms, p99 ${fmt(percentile(r.waits, 99))}, max ${fmt(Math.max(...r.waits))}${r.timeouts > 0 ? `, ${r.timeouts} timeouts` : ""} (from the return: p50 ${fmt(median(r.fromReturn))}, p99 ${fmt(percentile(r.fromReturn, 99))}); ${r.underBacklog} of ${spec.high} enqueued before the backlog drained; backlog ${r.lowCompleted} done in ${(r.drainMs / 1000).toFixed(1)} s = ${fmt(drainRate(r))} jobs/s; insert ${(r.insertMs / 1000).toFixed(1)} s`
          )
          if (r.underBacklog < spec.high) log(`   ${v}: the backlog drained before the last high-priority enqueue (${r.underBacklog} of ${spec.high} arrived under it): a larger BENCH_SCALE keeps it deep`)
          return r
        })
      )
      raw["15"] = { spec, skipped: Object.fromEntries(all.filter((v) => !names.includes(v)).map((v) => [v, `not in this tree: ${variants[v]!.missing}`])), runs: Object.fromEntries(res) }
      // the samples of the high jobs that arrived while the backlog was there (the others met a drained
      // queue: an idle pickup, scenario 13's measure); at full scale every one of them
      const pooled = (v: string) => res.get(v)!.flatMap((r) => r.waits.filter((_, k) => r.backlogged[k]))
      const peersP99 = names.filter((v) => variants[v]!.system !== "warp-effect").map((v) => percentile(pooled(v), 99))
      const bestP99 = peersP99.length === 0 ? Number.NaN : Math.min(...peersP99)
      const bars: Array<Panel["bars"][number]> = []
      const scenario = `15 priority under a backlog of ${spec.backlog.toLocaleString("en-US")}`
      for (const v of all) {
        const rs = res.get(v)
        if (rs === undefined) {
          rows.push({ scenario, system: v, metric: "ms high-priority enqueue call → handler start, under the backlog: p50 / p99 (samples; timeouts)", value: `not in this tree (${variants[v]!.missing})` })
          continue
        }
        const xs = pooled(v)
        const p50 = median(xs)
        const p99 = percentile(xs, 99)
        const drain = median(rs.map(drainRate))
        const ours = variants[v]!.system === "warp-effect"
        rows.push({
          scenario,
          system: v,
          metric: `ms high-priority enqueue call → handler start (${rate}/s for ${(spec.high * spec.everyMs) / 1000} s), under the backlog: p50 / p99 (samples; timeouts)`,
          value: `${fmt(p50)} / ${fmt(p99)} (${xs.length}; ${rs.reduce((a, r) => a + r.timeouts, 0)})`,
          ...(ours && !Number.isNaN(bestP99) ? { ratio: `${fmt(p99 / bestP99)}× best peer's p99` } : {})
        })
        rows.push({
          scenario,
          system: v,
          metric: "backlog drain jobs/s (low-priority completions over the run); high jobs enqueued before it drained (fewest of a round); all high jobs' wait p50 / p99 ms",
          value: `${fmt(drain)}; ${Math.min(...rs.map((r) => r.underBacklog))} of ${spec.high}; ${fmt(median(rs.flatMap((r) => r.waits)))} / ${fmt(percentile(rs.flatMap((r) => r.waits), 99))}`
        })
        bars.push({ label: variants[v]!.system, value: p50, note: `${fmt(p50)} ms (p99 ${fmt(p99)}; drain ${fmt(drain)}/s)`, ours })
      }
      panels.push({
        title: `15. Priority: high-priority jobs (${rate}/s) under a backlog of ${spec.backlog.toLocaleString("en-US")} no-op jobs, enqueue → start`,
        unit: "ms, p50 (p99 in the note)",
        better: "lower",
        bars
      })
    }
  } finally {
    await server.stop()
  }
  // this pass's rows, panels, goals and raw figures carry the server they ran on
  for (let i = firstRow; i < rows.length; i++) rows[i] = { ...rows[i]!, server: kind }
  for (let i = firstPanel; i < panels.length; i++) panels[i] = { ...panels[i]!, title: `[${kind}] ${panels[i]!.title}` }
  for (let i = firstGoal; i < goals.length; i++) goals[i] = { ...goals[i]!, goal: `[${kind}] ${goals[i]!.goal}` }
  const pass = { ...raw }
  for (const k of Object.keys(raw)) delete raw[k]
  Object.assign(raw, rawBefore, { [kind]: pass })
  return { kind, postgres: pgVersion, server: server.description, serverCpu: serverCpuNote }
}

const main = async () => {
  // the bench's own peers are in bench/node_modules; effect and @effect/sql-pg come with the root's install
  const peerVersion = (name: string) => {
    for (const dir of ["node_modules", "../node_modules"]) {
      try {
        return JSON.parse(readFileSync(here(`${dir}/${name}/package.json`), "utf8")).version as string
      } catch {
        // not in this one
      }
    }
    return "unknown"
  }
  if (BEFORE_COMMIT !== undefined && (enabled("1") || enabled("9"))) {
    const tree = prepareBeforeTree(BEFORE_COMMIT)
    const v = treeVersions(tree)
    const commit = tree.split("/").pop()!
    before = { commit, tree, label: `warp-effect ${v.project} (effect ${v.effect})`, project: v.project, effect: v.effect }
    log(`before tree: ${tree} (${before.label}); current: ${oursLabel}; scenarios 1 and 9 run each system in its own process (${process.execPath}, ${process.version})`)
  }
  const servers: Array<{ kind: string; postgres: string; server: string; serverCpu: string }> = []
  /**
   * Writes what the run has measured so far: after each server's pass (marked `partial` until the
   * last), so a run that stops in a later scenario keeps the figures of the passes it finished.
   */
  const write = (partial: boolean) => {
    const meta = {
      date: new Date().toISOString(),
      partial,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? "unknown",
      node: process.version,
      postgres: [...new Set(servers.map((x) => x.postgres))].join(", "),
      server: servers.map((x) => `${x.kind}: ${x.server}`).join("; "),
      servers,
      scale: SCALE,
      rounds: ROUNDS,
      only: ONLY ?? "all",
      peers: { "graphile-worker": peerVersion("graphile-worker"), "pg-boss": peerVersion("pg-boss"), effect: peerVersion("effect"), "@effect/sql-pg": peerVersion("@effect/sql-pg") },
      project: current.project,
      processes: OWN_PROCESS ? "scenarios 1 and 9: every run in its own process" : "every run in this process",
      ...(before === undefined ? {} : { before: { commit: before.commit, project: before.project, effect: before.effect, tree: before.tree } }),
      wallSeconds: Math.round((performance.now() - started) / 1000)
    }
    const summary = `${meta.date.slice(0, 10)}, ${meta.cpus} CPUs (${meta.cpuModel}), Node ${meta.node}, PostgreSQL ${meta.postgres} ${meta.server}, graphile-worker ${meta.peers["graphile-worker"]}, pg-boss ${meta.peers["pg-boss"]}, warp-effect ${current.project} on effect ${meta.peers.effect}${before === undefined ? "" : ` (before: ${before.label}, ${before.commit})`}, scale ${SCALE}, ${ROUNDS} rounds, wall ${meta.wallSeconds} s${partial ? " (partial)" : ""}`
    // each run's raw figures, without the per-job completion orders (`order`: thousands of ids a run,
    // which the scenarios reduce to the figures kept beside them)
    writeFileSync(here(`${OUT}.json`), JSON.stringify({ meta, goals, rows, raw }, (k, v) => (k === "order" ? undefined : v), 2) + "\n")
    writeFileSync(here(`${OUT}.svg`), render("warp-effect vs graphile-worker vs pg-boss", summary, panels))
    return summary
  }
  for (const kind of SERVERS) {
    servers.push(await runOn(kind))
    if (servers.length < SERVERS.length) write(true)
  }
  const summary = write(false)

  // the table
  const header = ["server", "scenario", "system", "metric", "median", "ratio", "goal", "met"]
  const table = [
    `| ${header.join(" | ")} |`,
    `|${header.map(() => "---").join("|")}|`,
    ...rows.map((r) => `| ${[r.server ?? "", r.scenario, r.system, r.metric, r.value, r.ratio ?? "", r.goal ?? "", r.met === undefined ? "" : r.met ? "yes" : "no"].join(" | ")} |`)
  ].join("\n")
  console.log(`\n${summary}\n\n${table}\n`)
  for (const g of goals) console.log(`goal ${g.met ? "met    " : "NOT met"}: ${g.goal} — measured ${g.measured}`)
  console.log(`\nwrote bench/${OUT}.json and bench/${OUT}.svg`)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
