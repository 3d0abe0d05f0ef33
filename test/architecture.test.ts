/**
 * The layout of `src/internal/`: each folder is one concept, and no two folders import each other,
 * directly or through others (no folder import cycle). The folders in layers, lowest first:
 * error, observability, pg → policy, semaphore → job → store → concurrency, attempt → retry, timeout,
 * ratelimit, circuitbreaker → publisher, worker → warp, dashboard, testing.
 */
import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath } from "node:url"

const internal = fileURLToPath(new URL("../src/internal", import.meta.url))

/** Folder-to-folder import edges of `dir`, with the files that make each one. */
export const folderEdges = (dir: string): Map<string, Array<string>> => {
  const edges = new Map<string, Array<string>>()
  const folderOf = (file: string) => relative(dir, file).split(sep)[0]!
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name)
      if (statSync(path).isDirectory()) walk(path)
      else if (path.endsWith(".ts") && dirname(path) !== dir) {
        const from = folderOf(path)
        const text = readFileSync(path, "utf8")
        for (const m of text.matchAll(/(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)) {
          const target = resolve(dirname(path), m[1]!)
          const rel = relative(dir, target)
          if (rel.startsWith("..") || !rel.includes(sep)) continue
          const to = folderOf(target)
          if (to === from) continue
          const key = `${from} -> ${to}`
          edges.set(key, [...(edges.get(key) ?? []), `${relative(dir, path)} imports ${m[1]}`])
        }
      }
    }
  }
  walk(dir)
  return edges
}

/** Every cycle among folders, as the edges on it (empty when there is none). */
export const cycles = (edges: Map<string, Array<string>>): Array<string> => {
  const graph = new Map<string, Set<string>>()
  for (const key of edges.keys()) {
    const [a, b] = key.split(" -> ") as [string, string]
    graph.set(a, (graph.get(a) ?? new Set()).add(b))
  }
  const reaches = (from: string, to: string): boolean => {
    const seen = new Set<string>()
    const stack = [from]
    while (stack.length > 0) {
      const n = stack.pop()!
      if (n === to) return true
      if (seen.has(n)) continue
      seen.add(n)
      stack.push(...(graph.get(n) ?? []))
    }
    return false
  }
  return [...edges.keys()].filter((key) => {
    const [a, b] = key.split(" -> ") as [string, string]
    return reaches(b, a)
  })
}

describe("src/internal layout", () => {
  it("has no import cycle between folders", () => {
    const edges = folderEdges(internal)
    const onCycles = cycles(edges).map((key) => `${key}: ${edges.get(key)!.slice(0, 3).join("; ")}`)
    expect(onCycles).toEqual([])
  })

  it("the check sees a cycle when there is one", () => {
    const edges = new Map([
      ["job -> store", ["job/A.ts imports ../store/B.js"]],
      ["store -> policy", ["store/B.ts imports ../policy/C.js"]],
      ["policy -> job", ["policy/C.ts imports ../job/A.js"]],
      ["worker -> job", ["worker/W.ts imports ../job/A.js"]]
    ])
    expect(cycles(edges).sort()).toEqual(["job -> store", "policy -> job", "store -> policy"])
  })

  it("the check reads the folders' real imports", () => {
    // the worker builds on the store and the attempt; none of them on the worker
    const edges = folderEdges(internal)
    expect(edges.has("worker -> store")).toBe(true)
    expect(edges.has("worker -> attempt")).toBe(true)
    expect([...edges.keys()].filter((k) => k.endsWith("-> worker") && !/^(warp|dashboard|testing) /.test(k))).toEqual([])
  })
})
