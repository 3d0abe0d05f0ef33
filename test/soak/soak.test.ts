/**
 * The short soak inside `npm test`: 2 worker processes x 4 fibers, 2,000 jobs over 20 keys, a fault
 * about every 400 ms (kill -9 + restart, pg_terminate_backend of a process's connections, interrupted
 * attempts), once with the worker defaults and once with slot reuse on. `npm run soak` is the same
 * harness at scale.
 */
import { describe, expect, it } from "@effect/vitest"
import { defaults, formatSummary, runSoak } from "./harness.js"
import { serverUrl } from "../support/db.js"

describe("soak (short)", () => {
  for (const slotReuse of [false, true]) {
    it(
      `under kills, connection terminations and interrupts${slotReuse ? " (slot reuse on)" : ""}: no violation, nothing lost, nothing succeeded twice, every slot free`,
      { timeout: 150_000 },
      async () => {
        const summary = await runSoak({
          ...defaults,
          serverUrl: serverUrl(),
          processes: 2,
          fibers: 4,
          jobs: 2_000,
          keys: 20,
          faultEveryMs: 400,
          weights: { kill: 1, terminate: 1, interrupt: 1 },
          leaseMs: 2_000,
          slotReuse,
          timeoutMs: 110_000,
          seed: slotReuse ? 8 : 7,
          log: () => {}
        })
        console.log(formatSummary(summary))
        expect(summary.timedOut).toBe(false)
        expect(summary.faults.kill! + summary.faults.terminate! + summary.faults.interrupt!).toBeGreaterThanOrEqual(3)
        expect(summary.violations, summary.examples.join("\n")).toBe(0)
        expect(summary.problems).toEqual(Object.fromEntries(Object.keys(summary.problems).map((k) => [k, 0])))
        expect(summary.states.Succeeded).toBeGreaterThan(0)
        expect(summary.advisoryLocksWhileRunning + summary.advisoryLocksAfterStop).toBe(0)
      }
    )
  }
})
