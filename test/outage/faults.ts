/**
 * `npm run faults [-- --only restart-short,restart-long,stall,failover]`: the outage scenario of issue 21
 * at full size — 3,000 jobs (2,000 keyed `Semaphore(key, 2)` over 20 keys, 1,000 keyless), 2 worker
 * processes x 6 lanes, a private PostgreSQL stopped hard after about 3 s of processing, down 8 s, started
 * again — once with a lease longer than the outage and once shorter, plus the proxy's half-open stall and a
 * failover. Prints the figures of each run; exits 1 unless every check passed.
 */
import { type Figures, runScenario, type Scenario, summary } from "../support/faults/harness.js"

const full = {
  keyedJobs: 2_000,
  keys: 20,
  limit: 2,
  keylessJobs: 1_000,
  jobMs: [5, 50] as const,
  processes: 2,
  lanes: 6,
  faultAfterSucceeded: 300,
  drainTimeoutMs: 180_000
}

const runs: ReadonlyArray<{ readonly name: string; readonly scenario: Scenario; readonly shorterThanLease: boolean }> = [
  { name: "restart-short", scenario: { ...full, fault: "restart", leaseMs: 30_000, downMs: 8_000 }, shorterThanLease: true },
  { name: "restart-long", scenario: { ...full, fault: "restart", leaseMs: 4_000, downMs: 8_000 }, shorterThanLease: false },
  { name: "stall", scenario: { ...full, fault: "stall", leaseMs: 30_000, downMs: 0, answerTimeoutMs: 3_000 }, shorterThanLease: true },
  { name: "failover", scenario: { ...full, fault: "failover", leaseMs: 30_000, downMs: 8_000 }, shorterThanLease: true }
]

const only = (() => {
  const i = process.argv.indexOf("--only")
  return i === -1 ? undefined : new Set(process.argv[i + 1]!.split(","))
})()

const check = (f: Figures, shorterThanLease: boolean): Array<string> => {
  const problems: Array<string> = []
  if ((f.states.Succeeded ?? 0) !== f.jobs) problems.push(`not every job succeeded: ${JSON.stringify(f.states)}`)
  if (!f.workersAlive) problems.push("a worker died")
  for (const r of f.overlaps) if (r.violations > 0 || r.maxInside > r.limit) problems.push(`cap broken on ${r.key}: ${r.maxInside}/${r.limit}`)
  const inFlight = new Set(f.inFlightAtFault)
  for (const id of f.rerun) if (!inFlight.has(id)) problems.push(`${id} re-ran without being in flight at the fault`)
  for (const l of f.lostTexts) for (const t of l.texts) if (!/; re-run as attempt \d+$/.test(t)) problems.push(`${l.id}: '${t}' names no re-run`)
  const texts = new Set(f.lostTexts.map((l) => l.id))
  for (const id of f.completedTwice) if (!texts.has(id)) problems.push(`${id} completed twice without the audit text`)
  if (shorterThanLease && f.completedTwice.length > 0) problems.push(`${f.completedTwice.length} handlers completed twice in an outage shorter than the lease`)
  return problems
}

let failed = false
for (const r of runs) {
  if (only !== undefined && !only.has(r.name)) continue
  const t0 = Date.now()
  const f = await runScenario(r.scenario, (l) => console.log(`[${r.name}] ${l}`))
  console.log(summary(r.name, f))
  const problems = check(f, r.shorterThanLease)
  console.log(`  ${problems.length === 0 ? "PASS" : "FAIL"} (${((Date.now() - t0) / 1000).toFixed(0)} s)${problems.map((p) => `\n  - ${p}`).join("")}`)
  if (problems.length > 0) failed = true
}
process.exit(failed ? 1 : 0)
