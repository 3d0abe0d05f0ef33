/**
 * Keyless backlog runs in a process of their own (bench scenarios 1 and 9 with BENCH_BEFORE or
 * BENCH_PROCESS=own): each run spawns a fresh Node process (this process's own binary, so one Node
 * for every system) that runs lib/backlogChild.ts of a tree (this repository, or the "before" tree
 * that lib/before.sh prepares) with that tree's own `tsx` and node_modules, and reads its result.
 * The figures are the child's: its window, the CPU time of its process over the window (the process
 * that runs the worker and nothing else), the server's counters.
 */
import { spawn, spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type { BacklogResult, BacklogSpec } from "../systems/common.js"

/** This repository's root (the current tree). */
export const currentTree = fileURLToPath(new URL("../..", import.meta.url)).replace(/\/$/, "")

/** What a child reports about itself beside the figures. */
export interface ChildProcessInfo {
  readonly pid: number
  readonly node: string
  readonly effect: string
  readonly project: string
}

/** A tree's versions: the project's (its package.json) and the `effect` its node_modules holds. */
export const treeVersions = (tree: string) => {
  const version = (path: string) => {
    try {
      return String(JSON.parse(readFileSync(join(tree, path), "utf8")).version)
    } catch {
      return "unknown"
    }
  }
  return { project: version("package.json"), effect: version("node_modules/effect/package.json"), sqlPg: version("node_modules/@effect/sql-pg/package.json") }
}

/**
 * A backlog runner that runs `system` (warp | graphile | pgboss | effectqueue: a file of the tree's
 * bench/systems) of `tree` in a fresh process per run. Keyless specs only (the spec crosses the
 * process boundary as JSON, without `keyOf`).
 */
export const inOwnProcess =
  (tree: string, system: string) =>
  (url: string, spec: BacklogSpec): Promise<BacklogResult & { readonly process?: ChildProcessInfo }> => {
    for (let i = 0; i < spec.jobs; i++) {
      if (spec.keyOf(i) !== undefined) return Promise.reject(new Error(`inOwnProcess runs keyless backlogs only (job ${i} has a key)`))
    }
    const { keyOf: _keyOf, ...plain } = spec
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ["--import", "tsx", join(tree, "bench/lib/backlogChild.ts"), system, url, JSON.stringify(plain)], {
        cwd: tree,
        stdio: ["ignore", "pipe", "inherit"]
      })
      let out = ""
      child.stdout!.on("data", (d: Buffer) => (out += d.toString()))
      // the child's run ends at its cap; the margin is for its start, the backlog's insert and shutdown
      const timer = setTimeout(() => child.kill("SIGKILL"), spec.capMs + 180_000)
      child.once("error", reject)
      child.once("exit", (code, signal) => {
        clearTimeout(timer)
        const line = out
          .trim()
          .split("\n")
          .reverse()
          .find((l) => l.startsWith("{"))
        if (code !== 0 || line === undefined) {
          reject(new Error(`${system} of ${tree} in its own process: exit ${code ?? signal}${line === undefined ? ", no result" : ""}`))
          return
        }
        const r = JSON.parse(line)
        // JSON has no NaN (the statements of a server without pg_stat_statements)
        // (nor for a server CPU time this machine cannot read: null, or absent from a before tree's result)
        resolve({ ...r, serverCpuMs: r.serverCpuMs ?? Number.NaN, databaseCpuMs: r.databaseCpuMs ?? Number.NaN, serverCpuInsertMs: r.serverCpuInsertMs ?? Number.NaN, db: { ...r.db, statements: r.db.statements ?? Number.NaN } })
      })
    })
  }

/**
 * Prepares the "before" tree of `commit` with lib/before.sh (a git worktree under bench/.before/,
 * its own `npm ci`, the child driver copied in) and returns its path.
 */
export const prepareBeforeTree = (commit: string): string => {
  const r = spawnSync("bash", [fileURLToPath(new URL("./before.sh", import.meta.url)), commit], { stdio: ["ignore", "pipe", "inherit"], encoding: "utf8" })
  const path = r.stdout?.trim().split("\n").pop()
  if (r.status !== 0 || path === undefined || path === "") throw new Error(`bench/lib/before.sh ${commit} failed (exit ${r.status})`)
  return path
}
