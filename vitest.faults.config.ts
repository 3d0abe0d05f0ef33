import { defineConfig } from "vitest/config"
import { alias } from "./vitest.shared.js"

/**
 * The network fault tests (`npm run faults:short`): a half-open stall and a failover through the
 * outage harness's proxy. Not part of `npm test` (CI runs test/outage/Outage.test.ts); each test starts
 * its own PostgreSQL.
 */
export default defineConfig({
  resolve: { alias },
  test: {
    include: ["test/outage/*.faults.ts"],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: "forks"
  }
})
