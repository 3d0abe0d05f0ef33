/**
 * Summarizes a V8 `.cpuprofile` (from `node --cpu-prof`): the top functions by self time and by
 * inclusive time (a function counted once per sample however deep it recurses), and self time by
 * package / source area.
 *
 *   npx tsx cpuprofile-summary.ts /tmp/prof/CPU.*.cpuprofile [top=30]
 */
import { readFileSync } from "node:fs"

interface Node {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: Array<number>
}
interface Profile {
  nodes: Array<Node>
  samples: Array<number>
  timeDeltas: Array<number>
  startTime: number
  endTime: number
}

const file = process.argv[2]
const top = Number(process.argv[3] ?? 30)
if (file === undefined) throw new Error("usage: cpuprofile-summary.ts <file.cpuprofile> [top]")
const p = JSON.parse(readFileSync(file, "utf8")) as Profile

const byId = new Map<number, Node>()
const parent = new Map<number, number>()
for (const n of p.nodes) byId.set(n.id, n)
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id)

const shortUrl = (url: string) =>
  url
    .replace(/^file:\/\//, "")
    .replace(/.*\/node_modules\//, "nm:")
    .replace(/.*\/wt-prof\//, "")
const keyOf = (n: Node) => {
  const f = n.callFrame
  return `${f.functionName || "(anonymous)"} ${shortUrl(f.url)}:${f.lineNumber + 1}`
}
const areaOf = (n: Node) => {
  const f = n.callFrame
  const u = shortUrl(f.url)
  if (u === "") return f.functionName.startsWith("(") ? f.functionName : "(native/builtin)"
  if (u.startsWith("nm:")) {
    const m = /^nm:((?:@[^/]+\/)?[^/]+)(?:\/dist\/[^/]+\/(?:internal\/)?([^/.]+))?/.exec(u)
    return m === null ? u : `${m[1]}${m[2] === undefined ? "" : `/${m[2]}`}`
  }
  if (u.startsWith("node:")) return u
  return u.replace(/\/[^/]+$/, "/")
}

// time per sample: the deltas (the first is from the start time)
const self = new Map<string, number>()
const incl = new Map<string, number>()
const area = new Map<string, number>()
let total = 0
for (let i = 0; i < p.samples.length; i++) {
  const dt = (p.timeDeltas[i + 1] ?? p.timeDeltas[i] ?? 0) / 1000
  const leaf = byId.get(p.samples[i]!)!
  total += dt
  const k = keyOf(leaf)
  self.set(k, (self.get(k) ?? 0) + dt)
  if (leaf.callFrame.functionName !== "(idle)") area.set(areaOf(leaf), (area.get(areaOf(leaf)) ?? 0) + dt)
  if (leaf.callFrame.functionName === "(idle)") continue
  const seen = new Set<string>()
  for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
    const kk = keyOf(byId.get(id)!)
    if (seen.has(kk)) continue
    seen.add(kk)
    incl.set(kk, (incl.get(kk) ?? 0) + dt)
  }
}
const idle = self.get(keyOf({ id: 0, callFrame: { functionName: "(idle)", url: "", lineNumber: -1 } })) ?? 0
const busy = total - idle
for (const m of [self, incl]) for (const k of m.keys()) if (k.startsWith("(idle)")) m.delete(k)
const pct = (x: number, of: number) => `${((x / of) * 100).toFixed(1).padStart(5)}%`
const show = (title: string, m: Map<string, number>, n: number) => {
  console.log(`\n## ${title}`)
  for (const [k, v] of [...m].sort(([, a], [, b]) => b - a).slice(0, n)) console.log(`${pct(v, busy)}  ${v.toFixed(0).padStart(7)} ms  ${k}`)
}
console.log(`profile: ${total.toFixed(0)} ms sampled, ${idle.toFixed(0)} ms idle, ${busy.toFixed(0)} ms busy (shares below are of busy time)`)
show("self time by area", area, 25)
show("self time by function", self, top)
show("inclusive time by function", incl, top)
