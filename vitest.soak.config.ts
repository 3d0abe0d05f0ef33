import { defineConfig } from "vitest/config"
import { alias } from "./vitest.shared.js"

/** The short soak alone (`npm run soak:short`; `npm test` runs it among the rest). */
export default defineConfig({
  resolve: { alias },
  test: {
    include: ["test/soak/soak.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 200_000,
    hookTimeout: 60_000,
    pool: "forks"
  }
})
