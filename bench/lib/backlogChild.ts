/**
 * One keyless backlog run of one system in a process of its own (bench scenarios 1 and 9 with
 * BENCH_BEFORE or BENCH_PROCESS=own, see lib/ownProcess.ts): this process writes the backlog, runs the
 * system's worker over it and measures it exactly as the bench does in its own process (the system's
 * `backlog` of `../systems/<system>.ts`: the window, the CPU time of this process over it, the server's
 * counters), then prints the result as JSON on its last stdout line.
 *
 *   node --import tsx bench/lib/backlogChild.ts <system> <database url> <spec as JSON>
 *
 * `<system>`: warp | graphile | pgboss | effectqueue (the file under ../systems). The spec is a
 * `BacklogSpec` without `keyOf` (keyless: every job's key is undefined).
 *
 * The same file runs in the current tree and, copied there by lib/before.sh, in the "before" tree
 * (bench/.before/<commit>): its imports resolve from where it lies, so it runs that tree's
 * systems/warp.ts on that tree's src and node_modules (Effect 3 for warp-effect 0.2). It therefore uses
 * only what both trees' bench code have: `backlog(url, spec)` and `BacklogSpec`.
 */
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"

const [system, url, specJson] = process.argv.slice(2)
if (system === undefined || url === undefined || specJson === undefined || !/^[a-z]+$/.test(system)) {
  console.error("usage: node --import tsx backlogChild.ts <system> <database url> <spec as JSON>")
  process.exit(2)
}
const spec = JSON.parse(specJson)
const mod = (await import(`../systems/${system}.js`)) as {
  backlog: (url: string, spec: unknown) => Promise<{ readonly order?: unknown } & Record<string, unknown>>
}
const result = await mod.backlog(url, { ...spec, keyOf: () => undefined })
const require = createRequire(import.meta.url)
const versionOf = (path: string) => {
  try {
    return JSON.parse(readFileSync(require.resolve(path), "utf8")).version as string
  } catch {
    return "unknown"
  }
}
const line = JSON.stringify({
  ...result,
  // the completion order of keyless jobs says nothing (every key undefined)
  order: undefined,
  process: { pid: process.pid, node: process.version, effect: versionOf("effect/package.json"), project: versionOf("../../package.json") }
})
process.stdout.write(line + "\n", () => process.exit(0))
