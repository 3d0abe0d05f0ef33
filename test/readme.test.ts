import { existsSync, readdirSync, readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"

const root = new URL("../", import.meta.url)
const read = (path: string) => readFileSync(new URL(path, root), "utf8")

/** README.md and every page of docs/ (other pages are added there with the same rule). */
const pages = ["README.md", ...readdirSync(new URL("docs/", root)).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)]

/** The folders the typecheck (`tsc --noEmit`, tsconfig.json) compiles, where an example may live. */
const compiled: ReadonlyArray<string> = (JSON.parse(read("tsconfig.json")) as { include: Array<string> }).include

const readme = read("README.md")

/** docs/ pages written on other branches of this release: a link to one may precede it. */
const pending = ["retention.md", "slot-validity.md", "pickup.md", "claim-admission.md"]

describe.each(pages)("%s", (page) => {
  const text = read(page)

  it("shows every TypeScript example verbatim from a file that the typecheck compiles", () => {
    const fences = [...text.matchAll(/^```(ts|typescript|tsx)\s*$/gm)]
    const blocks = [...text.matchAll(/(?:<!-- example: (\S+) -->\n)?```ts\n([\s\S]*?)\n```/g)]
    expect(blocks.length, `${page}: a \`\`\`typescript / tsx fence (use \`\`\`ts with an example marker)`).toBe(fences.length)
    for (const [, file, body] of blocks) {
      expect(file, `${page}: a \`\`\`ts block without an example marker:\n${body!.slice(0, 200)}`).toBeDefined()
      expect(existsSync(new URL(file!, root)), `${page}: ${file} does not exist`).toBe(true)
      expect(
        compiled.some((dir) => file === dir || file!.startsWith(`${dir}/`)),
        `${page}: ${file} is outside what tsconfig.json compiles (${compiled.join(", ")})`
      ).toBe(true)
      expect(body, `${page}: the block for ${file} differs from the file (run node scripts/sync-readme.mjs)`).toBe(read(file!).trimEnd())
    }
  })

  it("links only to files that exist", () => {
    const dir = new URL(page.includes("/") ? page.slice(0, page.lastIndexOf("/") + 1) : "", root)
    for (const [, target] of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
      if (/^[a-z]+:/.test(target!)) continue
      // the API reference is built by `npm run docs` (docs/api/ is not in the tree)
      if (target!.startsWith("api/") || target!.startsWith("docs/api/")) continue
      // pages other branches of this release are writing; linked from docs/README.md ahead of them
      if (pending.some((name) => target!.endsWith(name))) continue
      expect(existsSync(new URL(target!, dir)), `${page}: a link to ${target} that does not exist`).toBe(true)
    }
  })
})

describe("README", () => {
  it("documents the two commands", () => {
    expect(readme).toContain("npm ci && npm start")
    expect(readme).toContain("npm test")
  })

  it("links to the API reference that `npm run docs` builds", () => {
    expect(readme).toContain("docs/api/index.html")
  })
})

describe("examples", () => {
  it("are all compiled by the typecheck", () => {
    expect(compiled).toContain("examples")
  })
})
