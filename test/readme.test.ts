import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"

const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8")

describe("README", () => {
  it("shows every TypeScript example verbatim from a file that the typecheck compiles", () => {
    const blocks = [...readme.matchAll(/(?:<!-- example: (\S+) -->\n)?```ts\n([\s\S]*?)\n```/g)]
    expect(blocks.length).toBeGreaterThan(0)
    for (const [, file, body] of blocks) {
      expect(file, `a \`\`\`ts block without an example marker:\n${body!.slice(0, 200)}`).toBeDefined()
      const source = readFileSync(new URL(`../${file}`, import.meta.url), "utf8").trimEnd()
      expect(body, `README block for ${file} differs from the file`).toBe(source)
    }
  })

  it("documents the two commands", () => {
    expect(readme).toContain("npm ci && npm start")
    expect(readme).toContain("npm test")
  })
})
