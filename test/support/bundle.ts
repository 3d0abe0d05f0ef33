/**
 * Child processes start from one bundled file instead of `node --import tsx <entry>.ts`: tsx resolves
 * and transpiles the entry's few hundred source modules on every start, which took 3–4 s per worker
 * process on a loaded 2-core machine against about 1 s for the bundle. The soak restarts a killed
 * worker every second or so, so its pace under load was set by that start-up.
 *
 * The bundle holds the repository's own sources (`warp-effect` resolves to `src/` through the
 * tsconfig `paths`, as for tsx); packages stay imports resolved from `node_modules`. It is built once
 * per process, synchronously (a few hundred ms), into `test/artifacts/bundles/` (ignored by git) and
 * removed when the process exits.
 */
import { buildSync } from "esbuild"
import { mkdirSync, readdirSync, rmSync } from "node:fs"
import { basename } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../../", import.meta.url))
const dir = fileURLToPath(new URL("../artifacts/bundles/", import.meta.url))
const built = new Map<string, string>()

/** Whether process `pid` still runs. */
const running = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Bundles left by processes that ended without their exit hook (a test runner's killed fork). */
const removeStale = () => {
  for (const file of readdirSync(dir)) {
    const pid = Number(/-(\d+)-\d+\.mjs$/.exec(file)?.[1])
    if (Number.isInteger(pid) && pid !== process.pid && !running(pid)) rmSync(`${dir}${file}`, { force: true })
  }
}

/** The path of a bundle of `entry` (an absolute `.ts` path), built on first use in this process. */
export const bundledEntry = (entry: string): string => {
  const known = built.get(entry)
  if (known !== undefined) return known
  mkdirSync(dir, { recursive: true })
  if (built.size === 0) removeStale()
  const outfile = `${dir}${basename(entry, ".ts")}-${process.pid}-${built.size}.mjs`
  buildSync({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    tsconfig: `${root}tsconfig.json`,
    logLevel: "error"
  })
  if (built.size === 0) process.once("exit", () => built.forEach((file) => rmSync(file, { force: true })))
  built.set(entry, outfile)
  return outfile
}
