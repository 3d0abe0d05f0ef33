/**
 * Issue 21: database outages. Two worker processes x 6 lanes on a private PostgreSQL reached through a
 * TCP proxy; keyed jobs (`Semaphore(key, 2)`, Wait) and keyless ones; the server is stopped hard
 * (`pg_ctl stop -m immediate`) while they run and started again. Scaled down for CI; the full-size
 * scenario is `npm run faults`. Each test starts its own server (no DATABASE_URL needed).
 */
import { afterAll, describe, expect, it } from "vitest"
import { type Figures, runScenario, type Scenario, stopAllChildren, summary } from "../support/faults/harness.js"
import { destroyAll } from "../support/faults/PrivatePg.js"

// a scenario that times out never reaches its own cleanup: stop its workers and its server here
afterAll(() => stopAllChildren().then(destroyAll))

const base = {
  keyedJobs: 200,
  keys: 20,
  limit: 2,
  keylessJobs: 100,
  jobMs: [20, 200] as const,
  processes: 2,
  lanes: 6,
  faultAfterSucceeded: 60,
  drainTimeoutMs: 40_000
}

const run = async (name: string, s: Scenario): Promise<Figures> => {
  const f = await runScenario(s, (l) => console.log(`[${name}] ${l}`))
  console.log(summary(name, f))
  return f
}

/** Nothing lost, the cap held, the workers lived. */
const common = (f: Figures) => {
  expect(f.states).toEqual({ Succeeded: f.jobs })
  expect(f.workersAlive).toBe(true)
  // a result "lost in a database outage" is one whose job another attempt took meanwhile, never one that was written
  for (const l of f.lostTexts) for (const t of l.texts) expect(t, l.id).toMatch(/^Result of attempt \d+ \(\w+\) lost in a database outage of \d+\.\d s; re-run as attempt \d+$/)
  for (const r of f.overlaps) expect({ key: r.key, violations: r.violations, atMostLimit: r.maxInside <= r.limit }).toEqual({ key: r.key, violations: 0, atMostLimit: true })
  // every handler run ended (none left open)
  expect(f.handlerRuns).toBeGreaterThanOrEqual(f.jobs)
}

describe("database outages (issue 21)", () => {
  it("a hard restart shorter than the lease: no handler completes twice, nothing lost, the cap holds", { timeout: 180_000 }, async () => {
    const f = await run("restart < lease", { ...base, fault: "restart", leaseMs: 20_000, downMs: 3_000 })
    common(f)
    // the outage hit running work: results were pending while the server was down
    expect(f.inFlightAtFault.length).toBeGreaterThan(0)
    expect(f.completedTwice).toEqual([])
    // a re-run is an attempt interrupted by the outage (its slot died with the connection), never a completed one
    expect(f.lostTexts).toEqual([])
    // everything finished long before any lease could have run out
    expect(f.allDoneMs).toBeLessThan(base.drainTimeoutMs)
    // one line per worker when the store went away, one when it came back
    expect(f.unreachableLogs).toBe(base.processes)
    expect(f.reachableLogs).toBe(base.processes)
  })

  it("an outage longer than the lease: only jobs in flight re-run, each re-run of a completed handler is in the trail", { timeout: 180_000 }, async () => {
    const f = await run("restart > lease", { ...base, fault: "restart", leaseMs: 1_500, downMs: 4_000 })
    common(f)
    const inFlight = new Set(f.inFlightAtFault)
    for (const id of f.rerun) expect(inFlight.has(id), `${id} re-ran without being in flight at the outage`).toBe(true)
    // a handler completed twice: its first result was lost in the outage, and the trail says so
    const texts = new Map(f.lostTexts.map((l) => [l.id, l.texts]))
    for (const id of f.completedTwice) {
      expect(texts.get(id)?.some((t) => /^Result of attempt \d+ \(Succeeded\) lost in a database outage of \d+\.\d s; re-run as attempt \d+$/.test(t)), id).toBe(
        true
      )
    }
  })
})
