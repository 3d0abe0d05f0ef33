/**
 * A holder process paused (SIGSTOP) past the PostgreSQL provider's deadline (issue 23, item 4: do
 * TCP-level limits lift the pause limit?). The holder is another process (`test/support/slotHolder.ts`)
 * holding slot 0 of a key of limit 1; this process tries to take the key while the holder is stopped.
 *
 * - `deadlineBy: "idle-session-timeout"` (default): the server ends the idle session of the stopped
 *   holder after `deadline`, and lock-delay lets the slot go once the holder's marker expires: the
 *   key is taken by another process while the holder sleeps (the documented trade-off: the deadline
 *   is the longest pause that never over-admits), and the resumed holder finds its slot lost or lapsed.
 * - `deadlineBy: "tcp"`: the stopped process's kernel still answers TCP, so the server keeps its
 *   session and its lock through a pause of three deadlines: nobody else gets the key, and the
 *   resumed holder still holds it (neither lost nor lapsed), then releases it.
 * - A pause that catches one of the holder's pings in flight (its answer held in a proxy until the
 *   pause ends): on resume the ping's timeout is long overdue, yet the answer is there; the holder
 *   gives it one more timeout instead of counting its slot lost.
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { SemaphoreProvider, slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import * as SemaphoreProviderPg from "../../src/internal/semaphore/SemaphoreProviderPg.js"
import { startProxy } from "../support/faults/TcpProxy.js"
import { sharedDatabase } from "./pg.js"

const db = sharedDatabase()

const entry = fileURLToPath(new URL("../support/slotHolder.ts", import.meta.url))
const root = fileURLToPath(new URL("../../", import.meta.url))
const DEADLINE_MS = 1500

/** A holder process: its stdout lines come through `next(prefix)`. */
const holder = (url: string, name: string, deadlineBy: "idle-session-timeout" | "tcp") =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, ["--import", "tsx", entry, JSON.stringify({ url, name, deadlineMs: DEADLINE_MS, deadlineBy })], {
        cwd: root,
        stdio: ["pipe", "pipe", "pipe"],
        env: { ...process.env, NODE_OPTIONS: "" }
      })
      let out = ""
      let err = ""
      const waiting: Array<() => void> = []
      child.stdout!.setEncoding("utf8").on("data", (d: string) => {
        out += d
        for (const w of waiting.splice(0)) w()
      })
      child.stderr!.setEncoding("utf8").on("data", (d: string) => void (err += d))
      child.once("exit", () => {
        for (const w of waiting.splice(0)) w()
      })
      /** The first stdout line starting with `prefix` not yet taken. */
      const next = (prefix: string) =>
        Effect.callback<string, Error>((resume) => {
          const look = () => {
            const lines = out.split("\n")
            const i = lines.findIndex((l) => l.startsWith(prefix))
            if (i >= 0) {
              out = lines.slice(i + 1).join("\n")
              return resume(Effect.succeed(lines[i]!))
            }
            if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.fail(new Error(`holder exited before '${prefix}':\n${err}`)))
            waiting.push(look)
          }
          look()
        })
      const send = (line: string) => Effect.sync(() => void child.stdin!.write(`${line}\n`))
      return { child, next, send }
    }),
    ({ child }) => Effect.sync(() => void (child.exitCode === null && child.signalCode === null ? child.kill("SIGKILL") : undefined))
  )

/** Backend pids holding slot 0 of `name`. */
const holderPids = (name: string) =>
  Effect.flatMap(db.client, (c) =>
    Effect.promise(() =>
      c.query<{ pid: number }>(
        `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
        [lockId(slotName(name, 0))]
      )
    )
  ).pipe(
    Effect.map((r) => r.rows.map((row) => Number(row.pid))),
    Effect.scoped
  )

/** A provider of this process (its own pool, another holder as PostgreSQL sees it). */
const other = Effect.map(Layer.build(SemaphoreProviderPg.layer({}).pipe(Layer.provide(db.pool(4)))), Context.get(SemaphoreProvider))

/**
 * A holder of a fresh key in `mode`, stopped (SIGSTOP) while this process tries the key for three
 * deadlines: whether it got it, and the holder's backend pid before and after.
 */
const stoppedHolder = (mode: "idle-session-timeout" | "tcp") =>
  Effect.gen(function* () {
    const name = `pause-${mode}-${Math.random().toString(36).slice(2)}`
    const url = yield* Effect.promise(() => db.url())
    const h = yield* holder(url, name, mode)
    yield* h.next("HELD")
    const [pid] = yield* holderPids(name)
    expect(pid).toBeDefined()
    const p = yield* other
    h.child.kill("SIGSTOP")
    const taken = yield* p.tryAcquire(name, 1, `${3 * DEADLINE_MS} millis`)
    const pidsAfter = yield* holderPids(name)
    h.child.kill("SIGCONT")
    yield* h.send("check")
    return { name, h, p, pid, taken, pidsAfter, check: yield* h.next("CHECK") }
  })

describe("PostgreSQL provider: a holder process paused past its deadline", () => {
  it.live("tcp: a pause that catches a ping in flight does not count the slot lost on resume", () =>
    Effect.gen(function* () {
      const name = `pause-ping-${Math.random().toString(36).slice(2)}`
      const url = new URL(yield* Effect.promise(() => db.url()))
      const proxy = yield* Effect.acquireRelease(Effect.promise(() => startProxy(Number(url.port || 5432))), (p) => Effect.promise(() => p.close()))
      url.hostname = "127.0.0.1"
      url.port = String(proxy.port)
      const h = yield* holder(url.toString(), name, "tcp")
      yield* h.next("HELD")
      // the server's answers stay in the proxy; as soon as the holder has sent a ping, it is stopped
      proxy.holdAnswers()
      for (let i = 0; i < 400 && proxy.sentWhileHeld() === 0; i++) yield* Effect.sleep("5 millis")
      expect(proxy.sentWhileHeld()).toBeGreaterThan(0)
      h.child.kill("SIGSTOP")
      // longer than twice the ping timeout (a quarter of the deadline): the timeout is overdue on resume
      yield* Effect.sleep(`${DEADLINE_MS} millis`)
      proxy.releaseAnswers()
      h.child.kill("SIGCONT")
      yield* h.send("check")
      expect(yield* h.next("CHECK")).toBe("CHECK lost=false lapsed=false")
    }).pipe(Effect.scoped), 60_000)

  it.live("idle-session-timeout (default): the key goes to another process while the holder is stopped; the resumed holder's slot is lost or lapsed", () =>
    Effect.gen(function* () {
      // within three deadlines: the server ends the stopped holder's session after one, its marker expires
      const { check, pid, pidsAfter, taken } = yield* stoppedHolder("idle-session-timeout")
      expect(Option.isSome(taken)).toBe(true)
      expect(pidsAfter).not.toContain(pid)
      // the resumed holder knows it no longer holds the slot: lost (its session ended), or lapsed
      expect(check === "CHECK lost=true lapsed=true" || check === "CHECK lost=false lapsed=true").toBe(true)
    }).pipe(Effect.scoped), 60_000)

  it.live("tcp: the stopped holder's session and lock live through a pause of three deadlines; nobody else gets the key; the resumed holder still holds it", () =>
    Effect.gen(function* () {
      const { check, h, name, p, pid, pidsAfter, taken } = yield* stoppedHolder("tcp")
      expect(Option.isNone(taken)).toBe(true)
      expect(pidsAfter).toEqual([pid])
      expect(check).toBe("CHECK lost=false lapsed=false")
      yield* h.send("release")
      yield* h.next("RELEASED")
      // released cleanly: free at once
      expect(Option.isSome(yield* p.tryAcquire(name, 1, 0))).toBe(true)
    }).pipe(Effect.scoped), 60_000)
})
