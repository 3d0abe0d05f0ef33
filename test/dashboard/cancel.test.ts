/**
 * Cancelling a running job from the dashboard: in a browser (Chromium), the operator opens a running
 * job, gives a reason and presses Cancel; the worker interrupts the handler, the job ends Deleted with
 * the operator's text, and the key's slot is free again (the waiting job of the key runs). Over HTTP:
 * a read-only request sees no Cancel button and gets 403 on POST, a bad reason is a 400, an ended job
 * a 409, and nothing is written on any of them.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { chromium } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Concurrency, Contract, Handler, Publisher, Semaphore, Worker } from "warp-effect"
import { Dashboard } from "warp-effect/dashboard"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { pgWorkerEnv } from "../support/env.js"
import * as F from "./fixture.js"

const executablePath = "/usr/bin/chromium"
const Render = Contract.job("Render", Schema.Struct({ n: Schema.Number }), { policy: [Semaphore("renderer", 1)] })

let runtime: ManagedRuntime.ManagedRuntime<any, unknown>
let writable: Awaited<ReturnType<typeof F.serve>>
let readOnly: Awaited<ReturnType<typeof F.serve>>
let scope: Scope.Closeable
const started = Deferred.makeUnsafe<void>()
let interrupted = 0
let secondRan = false

const handler = Handler.job(Render, ({ n }) =>
  n === 1
    ? Effect.andThen(Deferred.succeed(started, undefined), Effect.never).pipe(Effect.onInterrupt(() => Effect.sync(() => void interrupted++)))
    : Effect.sync(() => void (secondRan = true))
)

const run = <A>(e: Effect.Effect<A, unknown, any>) => runtime.runPromise(e)
const stateOf = (id: string) => run(Effect.map(Effect.flatMap(JobStore, (s) => s.get(id)), (d) => (d._tag === "Some" ? d.value.job.state : "missing")))
const until = async (id: string, state: string) => {
  for (let i = 0; i < 1000; i++) {
    if ((await stateOf(id)) === state) return
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error(`${id} never reached ${state}`)
}

beforeAll(async () => {
  runtime = ManagedRuntime.make(pgWorkerEnv([handler], 10))
  const context = await runtime.runPromise(Effect.context<any>())
  const app = { context, run: (e: any) => runtime.runPromise(e), seeded: undefined as never, dispose: () => runtime.dispose() } as F.App<any>
  ;[writable, readOnly] = await Promise.all([F.serve(app, { authorize: Dashboard.allowWrites }), F.serve(app)])
  scope = await run(Scope.make())
  await run(Worker.make({ addons: [Concurrency.addon], concurrency: 2, pollInterval: "10 millis", cancelCheckInterval: "50 millis" }).pipe(Scope.provide(scope)))
})

afterAll(async () => {
  await run(Scope.close(scope, Exit.void))
  await Promise.all([writable?.close(), readOnly?.close()])
  await runtime.dispose()
})

/** The job page's cookie and CSRF token, as a browser gets them. */
const session = async (base: string, id: string) => {
  const response = await fetch(`${base}/jobs/${id}`)
  const nonce = /warp_csrf=([^;]+)/.exec(response.headers.get("set-cookie") ?? "")?.[1]
  const body = await response.text()
  return { cookie: `warp_csrf=${nonce}`, token: /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? "", body }
}
const post = (base: string, cookie: string, fields: Record<string, string>) =>
  fetch(`${base}/actions`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    body: new URLSearchParams(fields).toString()
  })

describe("dashboard: cancelling a running job", () => {
  it.skipIf(!existsSync(executablePath))("in a browser: Cancel interrupts the handler, the job ends Deleted, the key's slot is free", async () => {
    const first = await run(Effect.flatMap(Publisher.Publisher, (p) => p.enqueue(Render, { n: 1 })))
    await run(Deferred.await(started))
    const second = await run(Effect.flatMap(Publisher.Publisher, (p) => p.enqueue(Render, { n: 2 })))
    // read-only: no button, and a forged POST is refused without a write
    const ro = await session(readOnly.url, first)
    expect(ro.body).not.toContain("Cancel (interrupt)")
    expect((await post(readOnly.url, ro.cookie, { _csrf: ro.token, action: "cancel", id: first })).status).toBe(403)
    // a reason too long: 400, nothing written
    const rw = await session(writable.url, first)
    expect((await post(writable.url, rw.cookie, { _csrf: rw.token, action: "cancel", id: first, reason: "x".repeat(501) })).status).toBe(400)
    expect(await stateOf(first)).toBe("Processing")
    expect(secondRan).toBe(false)

    const profile = mkdtempSync(join(tmpdir(), "warp-chromium-"))
    const browser = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    })
    try {
      const page = await browser.newPage()
      await page.goto(`${writable.url}/jobs/${first}`)
      await page.getByLabel("Reason").fill("stuck render")
      await page.getByRole("button", { name: "Cancel (interrupt)" }).click()
      await expect(page.locator("body").textContent()).resolves.toContain("Cancel asked")
      await until(first, "Deleted")
      expect(interrupted).toBe(1)
      // the slot was freed: the waiting job of the key runs
      await until(second, "Succeeded")
      expect(secondRan).toBe(true)
      await page.reload()
      await expect(page.locator("body").textContent()).resolves.toContain("Cancelled — by an operator: stuck render (running attempt 1 interrupted)")
      await expect(page.getByRole("button", { name: "Cancel (interrupt)" }).count()).resolves.toBe(0)
    } finally {
      await browser.close()
      rmSync(profile, { recursive: true, force: true })
    }
    // an ended job: 409, nothing written
    const again = await session(writable.url, first)
    expect((await post(writable.url, again.cookie, { _csrf: again.token, action: "cancel", id: first })).status).toBe(409)
    const trail = await run(Effect.map(Effect.flatMap(JobStore, (s) => s.get(first)), (d) => (d._tag === "Some" ? d.value.logs : [])))
    expect(trail.filter((l) => l.kind === "Cancelled")).toHaveLength(1)
  })
})
