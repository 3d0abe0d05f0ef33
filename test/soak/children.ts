/**
 * Spawning and controlling worker processes (`test/support/workerProcess.ts`).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import * as Layer from "effect/Layer"
import { Concurrency, JobStorePg, Publisher, Registry, SemaphoreProviderMemory } from "warp-effect"
import { bundledEntry } from "../support/bundle.js"
import { pgLayer } from "../support/pgLayer.js"
import type { ChildConfig } from "../support/workerProcess.js"
import { recordingHandler } from "./workload.js"

const entry = fileURLToPath(new URL("../support/workerProcess.ts", import.meta.url))
const root = fileURLToPath(new URL("../../", import.meta.url))

/** Defaults of a child worker (tests override what they need). */
export const childDefaults = {
  fibers: 4,
  pollMs: 20,
  leaseMs: 30_000,
  pingMs: 200,
  graceMs: 5_000,
  pool: 16
} as const

/** One worker process. */
export class ChildWorker {
  readonly process: ChildProcess
  readonly ready: Promise<void>
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  private stderr = ""
  private readyResolved = false

  constructor(readonly config: ChildConfig) {
    // WARP_CHILD_NODE_ARGS: extra node flags for diagnosis, e.g. "--cpu-prof --cpu-prof-dir=test/artifacts"
    const extra = (process.env.WARP_CHILD_NODE_ARGS ?? "").split(" ").filter((a) => a !== "")
    this.process = spawn(process.execPath, [...extra, bundledEntry(entry), JSON.stringify(config)], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NODE_OPTIONS: "" }
    })
    this.process.stderr!.setEncoding("utf8")
    this.process.stderr!.on("data", (d: string) => {
      // keep the tail only: a long soak must not grow without bound
      this.stderr = (this.stderr + d).slice(-20_000)
    })
    this.exited = new Promise((resolve) => this.process.once("exit", (code, signal) => resolve({ code, signal })))
    this.ready = new Promise((resolve, reject) => {
      let out = ""
      this.process.stdout!.setEncoding("utf8")
      this.process.stdout!.on("data", (d: string) => {
        out += d
        if (!this.readyResolved && out.includes("READY")) {
          this.readyResolved = true
          resolve()
        }
      })
      void this.exited.then(({ code, signal }) => {
        if (!this.readyResolved) reject(new Error(`worker ${config.name} exited before READY (code ${code}, signal ${signal}):\n${this.stderr}`))
      })
    })
  }

  /** The process id. */
  get pid(): number {
    return this.process.pid!
  }

  /** Whether the process is still running. */
  get alive(): boolean {
    return this.process.exitCode === null && this.process.signalCode === null
  }

  /** What the process wrote to stderr (the tail). */
  get errors(): string {
    return this.stderr
  }

  /** Sends a signal. */
  signal(sig: NodeJS.Signals): void {
    if (this.alive) this.process.kill(sig)
  }

  /** Graceful stop: SIGTERM, then SIGKILL after `ms`. */
  async stop(ms = 15_000): Promise<void> {
    if (!this.alive) return
    this.process.kill("SIGTERM")
    const timer = setTimeout(() => this.signal("SIGKILL"), ms)
    await this.exited
    clearTimeout(timer)
  }
}

/** Spawns a worker process with the defaults plus `config`. */
export const spawnWorker = (config: Pick<ChildConfig, "url" | "name"> & Partial<ChildConfig>): ChildWorker =>
  new ChildWorker({ ...childDefaults, ...config })

/**
 * The parent's side of a multi-process test on `url`: it only enqueues and reads (its registry is for
 * the publisher's message routing), and migrates the concurrency addon's table before the workers start.
 */
export const parentEnv = (url: string) =>
  Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers: [recordingHandler({ proc: "parent", pid: process.pid })] })),
    Layer.provideMerge(Concurrency.layer.pipe(Layer.provide(SemaphoreProviderMemory.layer))),
    Layer.provideMerge(JobStorePg.layer),
    Layer.provideMerge(pgLayer(url, 8))
  )
