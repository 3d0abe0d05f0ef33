/**
 * The slot audit's findings on the dashboard: the store keeps the latest run's findings
 * (`recordSlotAudit`), and the concurrency, keys and workers pages show a warning with what was found
 * and when — escaped like every other value — and no warning when the latest run found nothing. End to
 * end on PostgreSQL: a raw session leaks a slot, the real audit records it, the pages show it; once the
 * session is gone, the next run clears it.
 */
import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { JobStoreMemory } from "warp-effect"
import { LOCK_PREFIX } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import * as SlotAuditInternal from "../../src/internal/concurrency/SlotAudit.js"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { JobStore, type SlotAuditFinding } from "../../src/internal/store/JobStore.js"
import { serverUrl } from "../support/db.js"
import { pgWorkerEnv } from "../support/env.js"
import * as F from "./fixture.js"

const get = async (url: string) => {
  const response = await fetch(url)
  return { status: response.status, body: await response.text() }
}

/** The banner's markup on a page, if any. */
const bannerOf = (body: string) => body.match(/<div class="warning" role="alert" data-testid="slot-audit">[\s\S]*?<\/div>/)?.[0]

const pages = ["/concurrency", "/keys", "/workers"] as const

describe("slot audit banner on PostgreSQL", () => {
  let runtime: ManagedRuntime.ManagedRuntime<any, unknown>
  let app: F.App<any>
  let site: Awaited<ReturnType<typeof F.serve>>

  beforeAll(async () => {
    runtime = ManagedRuntime.make(pgWorkerEnv([], 8) as Layer.Layer<any, unknown>)
    const context = await runtime.runPromise(Effect.context<any>())
    app = { context, run: (e) => runtime.runPromise(e), seeded: undefined as any, dispose: () => runtime.dispose() }
    site = await F.serve(app)
  })
  afterAll(async () => {
    await site?.close()
    await runtime?.dispose()
  })

  const record = (findings: ReadonlyArray<SlotAuditFinding>) => app.run(Effect.flatMap(JobStore, (s) => s.recordSlotAudit(findings)))

  it("no findings: no banner on any page", async () => {
    await record([])
    for (const path of pages) {
      const { status, body } = await get(`${site.url}${path}`)
      expect(status, path).toBe(200)
      expect(body, path).not.toContain('data-testid="slot-audit"')
    }
  })

  it("findings: every page warns with what and when, escaped", async () => {
    const at = new Date(Date.now() - 3 * 60_000)
    await record([
      { kind: "LeakedSlot", key: F.hostile, slot: 4, jobId: undefined, detail: `held by session 77 (${F.hostile}), idle 12 s`, foundAt: at },
      { kind: "StuckHolder", key: "stuck-key", slot: undefined, jobId: `job-${F.hostile}`, detail: "lease expired", foundAt: at }
    ])
    for (const path of pages) {
      const { body } = await get(`${site.url}${path}`)
      const banner = bannerOf(body)
      expect(banner, path).toBeDefined()
      expect(banner).toContain("Slot audit found 1 leaked slot and 1 stuck holder")
      expect(banner).toContain(`title="${at.toISOString().slice(0, 19).replace("T", " ")} UTC">3 min ago</time>`)
      expect(banner).toContain(`<strong>Leaked slot 4</strong> of '<span class="mono wrap" title="${F.hostileEscaped}">${F.hostileEscaped}</span>'`)
      expect(banner).toContain(`held by session 77 (${F.hostileEscaped}), idle 12 s`)
      expect(banner).toContain(`<strong>Stuck holder</strong> of '<span class="mono wrap" title="stuck-key">stuck-key</span>'`)
      expect(banner).toContain(`href="/warp/jobs/${encodeURIComponent(`job-${F.hostile}`)}"`)
      expect(body).not.toContain(F.hostile)
    }
    // the jobs list is not one of the pages that warn
    expect((await get(`${site.url}/jobs`)).body).not.toContain('data-testid="slot-audit"')
  })

  it("end to end: a leaked slot found by the audit is shown, and gone after a run that finds nothing", async () => {
    const database = await app.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ d: string }>`SELECT current_database() AS d`))
    const dbUrl = new URL(serverUrl())
    dbUrl.pathname = `/${database[0]!.d}`
    const raw = new pg.Client({ connectionString: dbUrl.toString() })
    raw.on("error", () => {})
    await raw.connect()
    try {
      await raw.query("SELECT pg_advisory_lock($1::bigint)", [lockId(slotName(LOCK_PREFIX + "banner-key", 0))])
      const audit = await app.run(SlotAuditInternal.make({ idleFor: "200 millis", keys: ["banner-key"] }))
      // bounded poll: the session must have been idle 200 ms before the audit calls the slot leaked
      let found = 0
      for (let i = 0; i < 200 && found === 0; i++) {
        found = (await app.run(audit.runOnce)).leaked.length
        if (found === 0) await new Promise((r) => setTimeout(r, 25))
      }
      expect(found).toBe(1)
      for (const path of pages) {
        const banner = bannerOf((await get(`${site.url}${path}`)).body)
        expect(banner, path).toContain("Slot audit found 1 leaked slot")
        expect(banner).toContain(`<strong>Leaked slot 0</strong> of '<span class="mono wrap" title="banner-key">banner-key</span>'`)
        expect(banner).toContain("just now")
      }
      await raw.end()
      // the lock is released with the session; the next run finds nothing and replaces the findings
      let left = 1
      for (let i = 0; i < 200 && left > 0; i++) {
        const r = await app.run(audit.runOnce)
        left = r.leaked.length + r.stuck.length
        if (left > 0) await new Promise((r) => setTimeout(r, 25))
      }
      expect(left).toBe(0)
      for (const path of pages) expect((await get(`${site.url}${path}`)).body, path).not.toContain('data-testid="slot-audit"')
    } finally {
      await raw.end().catch(() => undefined)
    }
  })
})

describe("slot audit banner on the memory store", () => {
  it("shows the recorded findings on the workers page, and none after an empty run", async () => {
    const runtime = ManagedRuntime.make(JobStoreMemory.layer)
    const context = await runtime.runPromise(Effect.context<any>())
    const app = { context, run: (e: any) => runtime.runPromise(e), seeded: undefined as never, dispose: () => runtime.dispose() }
    const site = await F.serve(app as F.App<any>)
    try {
      expect(bannerOf((await get(`${site.url}/workers`)).body)).toBeUndefined()
      await runtime.runPromise(
        Effect.flatMap(JobStore, (s) =>
          s.recordSlotAudit([{ kind: "LeakedSlot", key: "mem-key", slot: 1, jobId: undefined, detail: "held by session 9", foundAt: new Date() }])
        )
      )
      expect(bannerOf((await get(`${site.url}/workers`)).body)).toContain("Slot audit found 1 leaked slot")
      await runtime.runPromise(Effect.flatMap(JobStore, (s) => s.recordSlotAudit([])))
      expect(bannerOf((await get(`${site.url}/workers`)).body)).toBeUndefined()
    } finally {
      await site.close()
      await runtime.dispose()
    }
  })
})
