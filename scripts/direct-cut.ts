/**
 * A holder cut off from PostgreSQL on a direct connection (issue 23, item 4): no proxy between them, the
 * network itself goes silent. The holder runs in its own network namespace, joined to this one by a
 * veth pair; a private PostgreSQL listens on the veth's address. The cut is `ip link set <veth> down`
 * on this side: from then on neither end hears the other, and nothing is closed or reset (what a
 * partition or a dropped route looks like). Per provider setting:
 *
 * - how long the key stays unusable: from the cut until this process (on 127.0.0.1, not cut) is granted
 *   the holder's slot — the server must end the holder's session (by `idle_session_timeout`, the
 *   default, or by `tcp_user_timeout` and keepalives with `deadlineBy: "tcp"`), and lock-delay keeps the
 *   slot until the holder's deadline has passed;
 * - when the holder knew: it says "LOST" when its provider reports the slot lost (`slot.lost`);
 * - how soon it works again once the network is back: the link comes up after the grant, and the holder
 *   asks for a slot of another name every 20 ms; from the heal to its first grant.
 *
 *   npm run direct-cut            (root and iproute2 needed: network namespaces; TRIES=3, DEADLINE_MS=4000)
 *
 * A figure, not a test. It prints a line per try and the medians; it removes its namespace, veth pair
 * and server at the end.
 */
import { execFileSync, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { SemaphoreProvider } from "../src/internal/semaphore/SemaphoreProvider.js"
import * as SemaphoreProviderPg from "../src/internal/semaphore/SemaphoreProviderPg.js"
import { startPrivatePg } from "../test/support/faults/PrivatePg.js"

const TRIES = Number(process.env.TRIES ?? 3)
const DEADLINE_MS = Number(process.env.DEADLINE_MS ?? 4_000)
const ns = `warpcut${process.pid}`
const host = "10.213.7.1"
const peer = "10.213.7.2"
const vethHost = `wc${process.pid % 100000}a`
const vethPeer = `wc${process.pid % 100000}b`
const ip = (...args: Array<string>) => execFileSync("ip", args, { stdio: ["ignore", "ignore", "inherit"] })
const holderEntry = fileURLToPath(new URL("../bench/lib/slotAfterKill.ts", import.meta.url))

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

if (process.getuid?.() !== 0) {
  console.log("direct-cut: needs root (network namespaces); skipped")
  process.exit(0)
}

ip("netns", "add", ns)
try {
  ip("link", "add", vethHost, "type", "veth", "peer", "name", vethPeer)
  ip("link", "set", vethPeer, "netns", ns)
  ip("addr", "add", `${host}/24`, "dev", vethHost)
  ip("link", "set", vethHost, "up")
  ip("netns", "exec", ns, "ip", "addr", "add", `${peer}/24`, "dev", vethPeer)
  ip("netns", "exec", ns, "ip", "link", "set", vethPeer, "up")
  ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
  const server = await startPrivatePg({ alsoListenOn: [host] })
  try {
    const direct = server.url().replace("127.0.0.1", host)
    const results: Record<string, { unusable: Array<number>; lost: Array<number>; again: Array<number> }> = {}
    for (const kind of ["pg", "pg-tcp"] as const) {
      const r = (results[kind] = { unusable: [] as Array<number>, lost: [] as Array<number>, again: [] as Array<number> })
      const provider = SemaphoreProviderPg.layer({ deadline: Duration.millis(DEADLINE_MS), ...(kind === "pg-tcp" ? { deadlineBy: "tcp" as const } : {}) }).pipe(
        Layer.provide(PgClient.layer({ url: Redacted.make(server.url()), maxConnections: 4 }))
      )
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const p = Context.get(yield* Layer.build(provider), SemaphoreProvider)
            for (let i = 0; i < TRIES; i++) {
              const name = `cut-${kind}-${i}`
              const child = spawn("ip", ["netns", "exec", ns, process.execPath, "--import", "tsx", holderEntry, "hold", kind, direct, name, String(DEADLINE_MS), "watch"], {
                stdio: ["ignore", "pipe", "inherit"]
              })
              const seen = new Map<string, number>()
              const waiters = new Map<string, () => void>()
              let buffered = ""
              child.stdout!.on("data", (d: Buffer) => {
                buffered += d.toString()
                for (const line of buffered.split("\n").slice(0, -1)) {
                  seen.set(line.trim(), performance.now())
                  waiters.get(line.trim())?.()
                }
                buffered = buffered.slice(buffered.lastIndexOf("\n") + 1)
              })
              const said = (word: string, capMs: number) =>
                Effect.promise(
                  () =>
                    new Promise<number | undefined>((resolve) => {
                      if (seen.has(word)) return resolve(seen.get(word))
                      const timer = setTimeout(() => resolve(undefined), capMs)
                      waiters.set(word, () => {
                        clearTimeout(timer)
                        resolve(seen.get(word))
                      })
                    })
                )
              if ((yield* said("HELD", 30_000)) === undefined) return yield* Effect.die(new Error("the holder did not take its slot"))
              // a few renewals, then the cut at a random point of the renewal cycle
              yield* Effect.sleep(Duration.millis(500 + Math.floor((Math.random() * DEADLINE_MS) / 4)))
              const cutAt = performance.now()
              ip("link", "set", vethHost, "down")
              let got = false
              while (!got && performance.now() - cutAt < 10 * DEADLINE_MS) {
                got = yield* Effect.scoped(Effect.map(p.tryAcquire(name, 1, 0), Option.isSome))
                if (!got) yield* Effect.sleep("10 millis")
              }
              const grantedAt = performance.now()
              ip("link", "set", vethHost, "up")
              const lostAt = yield* said("LOST", 10 * DEADLINE_MS)
              const againAt = yield* said("AGAIN", 10 * DEADLINE_MS)
              child.kill("SIGKILL")
              r.unusable.push(got ? grantedAt - cutAt : NaN)
              r.lost.push(lostAt === undefined ? NaN : lostAt - cutAt)
              r.again.push(againAt === undefined ? NaN : againAt - grantedAt)
              console.log(
                `${kind} (deadline ${DEADLINE_MS} ms): key usable again ${got ? Math.round(grantedAt - cutAt) : "never"} ms after the cut; ` +
                  `the holder knew its slot lost ${lostAt === undefined ? "never" : `${Math.round(lostAt - cutAt)} ms after the cut`}; ` +
                  `it worked again ${againAt === undefined ? "never" : `${Math.round(againAt - grantedAt)} ms after the network came back`}`
              )
            }
          })
        )
      )
    }
    for (const [kind, r] of Object.entries(results)) {
      console.log(
        `${kind}: medians of ${TRIES} — key unusable ${Math.round(median(r.unusable))} ms, holder knew ${Math.round(median(r.lost))} ms after the cut, worked again ${Math.round(median(r.again))} ms after the heal`
      )
    }
  } finally {
    await server.destroy()
  }
} finally {
  try {
    ip("link", "del", vethHost)
  } catch {
    // gone with the namespace
  }
  ip("netns", "del", ns)
}
