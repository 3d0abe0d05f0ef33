// Rewrites every `<!-- example: FILE -->` ```ts block of README.md and docs/*.md with FILE's current text
// (test/readme.test.ts checks that each block equals its file). Run from the repository root:
//   node scripts/sync-readme.mjs
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
const pages = ["README.md", ...readdirSync("docs").filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)]
for (const path of pages) {
  const text = readFileSync(path, "utf8")
  const out = text.replace(/(<!-- example: (\S+) -->\n```ts\n)([\s\S]*?)(\n```)/g, (_, head, file, _body, tail) =>
    head + readFileSync(file, "utf8").trimEnd() + tail)
  if (out !== text) {
    writeFileSync(path, out)
    console.log(`synced ${path}`)
  }
}
