/**
 * Issue 21, network faults between the workers and the database (`npm run faults:short`): the
 * outage harness's proxy stalls every open connection without closing it (half-open), or the server
 * comes back on another port and the proxy is re-pointed (failover). Same workload as
 * test/outage/Outage.test.ts; each test starts its own PostgreSQL.
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
  drainTimeoutMs: 60_000
}

const run = async (name: string, s: Scenario): Promise<Figures> => {
  const f = await runScenario(s, (l) => console.log(`[${name}] ${l}`))
  console.log(summary(name, f))
  return f
}

const common = (f: Figures) => {
  expect(f.states).toEqual({ Succeeded: f.jobs })
  expect(f.workersAlive).toBe(true)
  // a result "lost in a database outage" is one whose job another attempt took meanwhile, never one that was written
  for (const l of f.lostTexts) for (const t of l.texts) expect(t, l.id).toMatch(/^Result of attempt \d+ \(\w+\) lost in a database outage of \d+\.\d s; re-run as attempt \d+$/)
  for (const r of f.overlaps) expect({ key: r.key, violations: r.violations, atMostLimit: r.maxInside <= r.limit }).toEqual({ key: r.key, violations: 0, atMostLimit: true })
  expect(f.completedTwice).toEqual([])
}

describe("network faults (issue 21)", () => {
  it("a half-open stall of every connection: timeouts end the stalled connections and work resumes", async () => {
    const f = await run("stall", { ...base, fault: "stall", leaseMs: 20_000, downMs: 0, answerTimeoutMs: 3_000 })
    common(f)
    expect(f.inFlightAtFault.length).toBeGreaterThan(0)
  })

  it("a failover: the server comes back on another port behind the proxy, work resumes, no handler completes twice", async () => {
    const f = await run("failover", { ...base, fault: "failover", leaseMs: 20_000, downMs: 2_000 })
    common(f)
    expect(f.inFlightAtFault.length).toBeGreaterThan(0)
    expect(f.lostTexts).toEqual([])
  })
})
