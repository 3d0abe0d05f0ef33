// Rewrites every `<!-- example: FILE -->` ```ts block of README.md with FILE's current text (the README test
// checks that each block equals its file). Run from the repository root: node scripts/sync-readme.mjs
import { readFileSync, writeFileSync } from "node:fs"
const path = "README.md"
const readme = readFileSync(path, "utf8")
const out = readme.replace(/(<!-- example: (\S+) -->\n```ts\n)([\s\S]*?)(\n```)/g, (_, head, file, _body, tail) =>
  head + readFileSync(file, "utf8").trimEnd() + tail)
writeFileSync(path, out)
