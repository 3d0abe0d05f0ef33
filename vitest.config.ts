import { defineConfig } from "vitest/config"
import { alias } from "./vitest.shared.js"

export default defineConfig({
  resolve: { alias },
  test: {
    include: ["test/**/*.test.ts", "examples/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    maxWorkers: 2,
    reporters: ["default"]
  }
})
