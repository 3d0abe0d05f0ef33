import { defineConfig } from "vitest/config"
import { alias } from "./vitest.shared.js"

/** The short soaks alone, with the multi-process pause and Redis fault runs (`npm run soak:short`; `npm test` runs them among the rest). */
export default defineConfig({
  resolve: { alias },
  test: {
    include: ["test/soak/soak.test.ts", "test/soak/pauses.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 200_000,
    hookTimeout: 60_000,
    pool: "forks"
  }
})
