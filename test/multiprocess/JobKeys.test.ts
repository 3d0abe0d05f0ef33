/**
 * Job keys across processes: 4 producer processes (`test/support/keyProducer.ts`) submit the same 20
 * keys concurrently, 3 times each per process, started at once. The unique live key arbitrates: per
 * key, exactly one row exists and holds it, exactly one submit across the processes `Created` it, and
 * every caller of the key got that row's id.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { JobStorePg } from "warp-effect"
import { bundledEntry } from "../support/bundle.js"
import { createDatabase, dropDatabase } from "../support/db.js"
import { pgLayer } from "../support/pgLayer.js"
import type { ProducerConfig } from "../support/keyProducer.js"

const entry = fileURLToPath(new URL("../support/keyProducer.ts", import.meta.url))
const root = fileURLToPath(new URL("../../", import.meta.url))

interface Producer {
  readonly process: ChildProcess
  readonly ready: Promise<void>
  readonly result: Promise<ReadonlyArray<readonly [string, string, string]>>
}

const startProducer = (config: ProducerConfig): Producer => {
  const child = spawn(process.execPath, [bundledEntry(entry), JSON.stringify(config)], {
    cwd: root,
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, NODE_OPTIONS: "" }
  })
  let out = ""
  let err = ""
  child.stderr!.setEncoding("utf8")
  child.stderr!.on("data", (d: string) => void (err = (err + d).slice(-10_000)))
  child.stdout!.setEncoding("utf8")
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d: string) => {
      out += d
      if (out.includes("READY")) resolve()
    })
    void exited.then((code) => reject(new Error(`${config.name} exited before READY (${code}): ${err}`)))
  })
  const result = new Promise<ReadonlyArray<readonly [string, string, string]>>((resolve, reject) => {
    child.stdout!.on("data", () => {
      const line = out.split("\n").find((l) => l.startsWith("RESULT "))
      if (line !== undefined && out.endsWith("\n")) resolve(JSON.parse(line.slice("RESULT ".length)))
    })
    void exited.then((code) => reject(new Error(`${config.name} exited (${code}) without a result: ${err}`)))
  })
  return { process: child, ready, result }
}

const keys = Array.from({ length: 20 }, (_, i) => `key-${i}`)

describe("multi-process job keys: 4 producers x 20 keys", () => {
  let url = ""
  let producers: Array<Producer> = []
  beforeAll(async () => {
    url = await createDatabase()
  })
  afterAll(async () => {
    for (const p of producers) if (p.process.exitCode === null) p.process.kill("SIGKILL")
    await dropDatabase(url)
  })

  for (const mode of ["replace", "keep"] as const) {
    it.live(`mode ${mode}: one live row per key; every caller of a key got its id; one Created per key`, () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`DELETE FROM warp_jobs`
        producers = Array.from({ length: 4 }, (_, i) => startProducer({ url, name: `kp-${mode}-${i}`, keys, rounds: 3, mode }))
        yield* Effect.promise(() => Promise.all(producers.map((p) => p.ready)))
        for (const p of producers) p.process.stdin!.write("GO\n")
        const results = (yield* Effect.promise(() => Promise.all(producers.map((p) => p.result)))).flat()
        expect(results).toHaveLength(4 * 20 * 3)
        const rows = yield* sql<{ id: string; job_key: string; job_key_live: string | null }>`
          SELECT id, job_key, job_key_live FROM warp_jobs WHERE type = 'MpKeyed'`
        expect(rows).toHaveLength(20)
        for (const key of keys) {
          const mine = results.filter(([k]) => k === key)
          const ids = new Set(mine.map(([, , id]) => id))
          const row = rows.filter((r) => r.job_key === key)
          expect({ key, rows: row.length, live: row[0]?.job_key_live, ids: ids.size }).toEqual({ key, rows: 1, live: key, ids: 1 })
          expect([...ids][0]).toBe(row[0]!.id)
          expect(mine.filter(([, tag]) => tag === "Created")).toHaveLength(1)
          expect(mine.filter(([, tag]) => tag === (mode === "keep" ? "Joined" : "Replaced"))).toHaveLength(11)
        }
        // the holder's trail counts every other caller
        const [entries] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM warp_job_logs WHERE counter = ${mode === "keep" ? "stats:deduplicated" : "stats:replaced"}`
        expect(entries!.n).toBe(20 * 11)
      }).pipe(Effect.provide(JobStorePg.layer.pipe(Layer.provideMerge(pgLayer(url, 4))))))
  }
})
