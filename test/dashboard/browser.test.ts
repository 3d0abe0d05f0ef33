/**
 * The dashboard in a real browser (Chromium driven by playwright-core): create, edit and delete an
 * admin limit through the page and check the database after each step; open a job and read its
 * concurrency key; no concurrency page without the addon. Screenshots go to test/artifacts/ outside CI.
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { Concurrency, SemaphoreProviderMemory, Worker } from "warp-effect"
import * as JobId from "../../src/internal/job/JobId.js"
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type BrowserContext, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Dashboard } from "warp-effect/dashboard"
import * as F from "./fixture.js"

const executablePath = "/usr/bin/chromium"
const inCI = process.env.CI !== undefined && process.env.CI !== ""
const available = existsSync(executablePath)
const artifacts = inCI ? undefined : join(import.meta.dirname, "..", "artifacts")

/** Saves a full-page screenshot outside CI. */
const shot = async (page: Page, name: string) => {
  if (artifacts === undefined) return
  mkdirSync(artifacts, { recursive: true })
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true })
}

if (!available && inCI) {
  describe("dashboard in a browser", () => {
    it("needs Chromium", () => {
      throw new Error(`Chromium is not installed at ${executablePath}; CI must install it (apt-get install -y chromium) — the browser tests do not skip in CI`)
    })
  })
}

describe.skipIf(!available)("dashboard in a browser", () => {
  let browser: BrowserContext
  let profile: string
  let app: F.App<F.PgEnv>
  let withAddon: Awaited<ReturnType<typeof F.serve>>
  let readOnly: Awaited<ReturnType<typeof F.serve>>
  let bare: F.App<F.Env>
  let withoutAddon: Awaited<ReturnType<typeof F.serve>>

  beforeAll(async () => {
    profile = mkdtempSync(join(tmpdir(), "warp-chromium-"))
    const launching = chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      viewport: { width: 1200, height: 800 },
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync"
      ]
    })
    const starting = F.startApp(F.memoryWithoutAddon())
    app = await F.startApp<F.PgEnv>(F.pgWithAddon())
    bare = await starting
    ;[withAddon, readOnly, withoutAddon] = await Promise.all([
      F.serve(app, { authorize: Dashboard.allowWrites }),
      F.serve(app),
      F.serve(bare, { authorize: Dashboard.allowWrites })
    ])
    browser = await launching
    browser.setDefaultTimeout(10_000)
  })

  afterAll(async () => {
    await browser?.close()
    await Promise.all([withAddon?.close(), readOnly?.close(), withoutAddon?.close()])
    await Promise.all([app?.dispose(), bare?.dispose()])
    if (profile !== undefined) rmSync(profile, { recursive: true, force: true })
  })

  const rows = () => app.run(F.limitRows)

  it("lists jobs by state and opens a job whose metadata shows its concurrency key", async () => {
    const page = await browser.newPage()
    await page.goto(withAddon.url)
    expect(page.url()).toBe(`${withAddon.url}/jobs`)
    await expect(page.locator("h1").textContent()).resolves.toBe("Jobs")
    await shot(page, "jobs")
    await page.getByRole("link", { name: /^Succeeded/ }).click()
    await page.waitForURL(/state=Succeeded/)
    await page.getByRole("link", { name: app.seeded.charge }).click()
    await page.waitForURL(`${withAddon.url}/jobs/${app.seeded.charge}`)
    await expect(page.getByTestId("concurrency-key").textContent()).resolves.toBe("payment-api")
    const policyRow = page.locator("tr", { has: page.locator("td", { hasText: /^concurrency$/ }) })
    await expect(policyRow.textContent()).resolves.toMatch(/contract.*key: payment-api · limit: 2 · mode: Wait/)
    await expect(page.locator("h2", { hasText: "Audit trail" }).isVisible()).resolves.toBe(true)
    await shot(page, "job-detail")
    await page.close()
  })

  it("shows requeued vs succeeded per job type with a server-rendered chart", async () => {
    const page = await browser.newPage()
    await page.goto(`${withAddon.url}/counters`)
    await expect(page.locator("svg.chart rect.bar-succeeded").count()).resolves.toBeGreaterThanOrEqual(4)
    const charge = page.locator("tr", { has: page.locator("td", { hasText: /^ChargeCard$/ }) })
    const counters = await app.run(Effect.flatMap(F.JobStoreTag, (s) => s.counters))
    await expect(charge.locator("td").nth(1).textContent()).resolves.toBe(String(counters.get("stats:succeeded:ChargeCard")))
    await expect(charge.locator("td").nth(2).textContent()).resolves.toBe(String(counters.get("stats:requeued:ChargeCard") ?? 0))
    await shot(page, "counters")
    await page.close()
  })

  it("creates, edits and deletes a limit through the page; the database follows each step", async () => {
    const page = await browser.newPage()
    await page.goto(`${withAddon.url}/concurrency`)
    expect(await rows()).toEqual([])
    const create = page.locator('form.create[data-overrides="key"]')

    await create.getByLabel("Key").fill("payment-api")
    await create.getByLabel("Slots").fill("10")
    await create.getByRole("button", { name: "Save limit" }).click()
    await expect(page.getByRole("status").textContent()).resolves.toContain("'payment-api' now runs with 10 slots")
    expect(await rows()).toEqual([{ key: "payment-api", slots: 10 }])

    await create.getByLabel("Key").fill("reports:nightly")
    await create.getByLabel("Slots").fill("1")
    await create.getByRole("button", { name: "Save limit" }).click()
    await page.getByRole("status").waitFor()
    expect(await rows()).toEqual([
      { key: "payment-api", slots: 10 },
      { key: "reports:nightly", slots: 1 }
    ])

    const row = page.locator('tr[data-key="payment-api"]')
    await row.getByLabel("Slots for payment-api").fill("3")
    await row.getByRole("button", { name: "Save" }).click()
    await expect(page.getByRole("status").textContent()).resolves.toContain("'payment-api' now runs with 3 slots")
    expect(await rows()).toEqual([
      { key: "payment-api", slots: 3 },
      { key: "reports:nightly", slots: 1 }
    ])
    await expect(page.getByLabel("Slots for payment-api").inputValue()).resolves.toBe("3")
    await shot(page, "concurrency")

    // the job detail page now shows the override next to the stamped (declared) limit
    await page.goto(`${withAddon.url}/jobs/${app.seeded.charge}`)
    await expect(page.locator("#concurrency").textContent()).resolves.toContain("Admin override: 3 slots")

    await page.goto(`${withAddon.url}/concurrency`)
    await page.locator('tr[data-key="payment-api"]').getByRole("button", { name: "Delete payment-api" }).click()
    await expect(page.getByRole("status").textContent()).resolves.toContain("Deleted the override of 'payment-api'")
    expect(await rows()).toEqual([{ key: "reports:nightly", slots: 1 }])
    await expect(page.locator('tr[data-key="payment-api"]').count()).resolves.toBe(0)
    await page.close()
  })

  it("shows a visible error for bad input and changes nothing", async () => {
    const page = await browser.newPage()
    await page.goto(`${withAddon.url}/concurrency`)
    const before = await rows()
    const create = page.locator('form.create[data-overrides="key"]')
    await create.getByLabel("Key").fill("   ")
    await create.getByLabel("Slots").fill("4")
    await create.getByRole("button", { name: "Save limit" }).click()
    await expect(page.getByRole("alert").textContent()).resolves.toMatch(/Nothing was changed.*Key: Key must not be empty/)
    expect(await rows()).toEqual(before)
    await shot(page, "concurrency-error")
    await page.close()
  })

  it("is read-only unless the application authorizes writes", async () => {
    const page = await browser.newPage()
    await page.goto(`${readOnly.url}/concurrency`)
    await expect(page.getByRole("note").textContent()).resolves.toContain("Writes are disabled")
    await expect(page.locator("form").count()).resolves.toBe(0)
    await expect(page.locator('tr[data-key="reports:nightly"]').count()).resolves.toBe(1)
    await shot(page, "concurrency-read-only")
    await page.close()
  })

  it("has no concurrency page or nav link without the addon", async () => {
    const page = await browser.newPage()
    await page.goto(`${withoutAddon.url}/jobs`)
    const nav = page.getByRole("navigation", { name: "Dashboard" })
    await expect(nav.getByRole("link").allTextContents()).resolves.toEqual(["Jobs", "Counters", "Workers"])
    const response = await page.goto(`${withoutAddon.url}/concurrency`)
    expect(response?.status()).toBe(404)
    await expect(page.locator("h1").textContent()).resolves.toBe("Not found")
    await shot(page, "no-addon-404")
    await page.close()
  })

  /** Fails the test if the page scrolls sideways. */
  const noHorizontalOverflow = async (page: Page, what: string) => {
    const { scrollWidth, innerWidth } = await page.evaluate(() => {
      const w = globalThis as any // the page's window
      return { scrollWidth: w.document.documentElement.scrollWidth as number, innerWidth: w.innerWidth as number }
    })
    expect(scrollWidth, `${what}: page is ${scrollWidth}px wide in a ${innerWidth}px window`).toBeLessThanOrEqual(innerWidth)
  }

  it("fits 375 px and 1280 px windows without horizontal scrolling, with a 512-character key on the lists, the job page and the keys page", async () => {
    const key = "k".repeat(512)
    const id = JobId.make()
    await app.run(
      Effect.flatMap(F.JobStoreTag, (s) =>
        s.insert([
          {
            id,
            type: `LongType${"T".repeat(120)}`,
            handler: null,
            payload: { note: "x".repeat(400) },
            state: "Scheduled",
            scheduleTime: new Date(Date.now() + 86_400_000),
            metadata: { policies: { concurrency: { source: "enqueue", value: { key, limit: 1, mode: "Wait" } } } }
          }
        ])
      )
    )
    await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.addOrUpdateLimit(key, 1)))
    for (const width of [375, 1280]) {
      const page = await browser.newPage()
      await page.setViewportSize({ width, height: 800 })
      await page.goto(`${withAddon.url}/jobs`)
      await noHorizontalOverflow(page, `jobs at ${width}`)
      await shot(page, `jobs-${width}`)
      await page.goto(`${withAddon.url}/jobs?key=${key}`)
      await expect(page.getByRole("link", { name: id }).count()).resolves.toBe(1)
      await noHorizontalOverflow(page, `filtered jobs at ${width}`)
      await page.goto(`${withAddon.url}/jobs/${id}`)
      await expect(page.getByTestId("concurrency-key").textContent()).resolves.toBe(key)
      await noHorizontalOverflow(page, `job detail at ${width}`)
      await shot(page, `job-detail-long-key-${width}`)
      await page.goto(`${withAddon.url}/concurrency`)
      await noHorizontalOverflow(page, `concurrency at ${width}`)
      await shot(page, `concurrency-long-key-${width}`)
      await page.goto(`${withAddon.url}/keys`)
      await expect(page.locator(`tr[data-key="${key}"]`).count()).resolves.toBe(1)
      await noHorizontalOverflow(page, `keys at ${width}`)
      await shot(page, `keys-long-key-${width}`)
      await page.goto(`${withAddon.url}/workers`)
      await noHorizontalOverflow(page, `workers at ${width}`)
      await page.close()
    }
    await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.removeLimit(key)))
  })

  it("lets an operator pause and resume auto-refresh (remembered across pages)", async () => {
    const page = await browser.newPage()
    await page.goto(`${withoutAddon.url}/jobs`)
    const toggle = page.locator("#refresh")
    // the script ran (allowed by its hash in the CSP) and showed the button
    await expect(toggle.textContent()).resolves.toBe("Pause auto-refresh")
    await toggle.click()
    await expect(toggle.getAttribute("aria-pressed")).resolves.toBe("true")
    await page.goto(`${withoutAddon.url}/jobs?state=Failed`)
    await expect(page.locator("#refresh").textContent()).resolves.toBe("Resume auto-refresh")
    await expect(page.locator("html").getAttribute("data-refresh")).resolves.toBe("paused")
    await page.locator("#refresh").click()
    await expect(page.locator("html").getAttribute("data-refresh")).resolves.toBe("on")
    await page.close()
  })

  it("never refreshes over what the operator is doing (focus, unsent input, an open confirmation) and keeps the scroll position", async () => {
    const page = await browser.newPage()
    await page.setViewportSize({ width: 1000, height: 300 })
    // the page's timers run on a clock the test moves: a due refresh happens exactly when the test says
    await page.clock.install()
    const navigations: Array<string> = []
    page.on("request", (r) => {
      if (r.isNavigationRequest()) navigations.push(r.url())
    })
    const every = 10_000
    await page.goto(`${withoutAddon.url}/jobs`)
    await expect(page.locator("html").getAttribute("data-refresh")).resolves.toBe("on")
    const key = page.getByLabel("Concurrency key")
    const mark = () => page.evaluate(() => void ((globalThis as any).warpMark = 1))
    const marked = () => page.evaluate(() => (globalThis as any).warpMark === 1)
    /** A refresh falls due; it must be held (the page says so, no request leaves, the page is the same). */
    const heldFor = async (why: string) => {
      navigations.length = 0
      await page.clock.runFor(every + 500)
      await expect(page.locator("html").getAttribute("data-refresh"), why).resolves.toBe("held")
      await expect(page.locator("#refresh-note").textContent()).resolves.toBe(`Auto-refresh waits: ${why}`)
      expect(await marked(), why).toBe(true)
      expect(navigations, why).toEqual([])
    }
    /** A refresh falls due and runs: the page reloads at the same address. */
    const reloads = async () => {
      navigations.length = 0
      const loaded = page.waitForEvent("load")
      await page.clock.runFor(every + 500)
      await loaded
      expect(navigations).toEqual([page.url()])
      expect(await marked()).toBe(false)
    }

    await mark()
    // a filter field with the focus, nothing typed yet
    await key.focus()
    await heldFor("typing")
    // typed, focus still there
    await key.pressSequentially("tenant-")
    await heldFor("typing")
    // typed and left: the value differs from the page's, not submitted
    await page.locator("h1").click()
    await heldFor("unsent input")
    await expect(key.inputValue()).resolves.toBe("tenant-")
    // a select changed and left
    await key.fill("")
    await page.locator('form.filters select[name="state"]').selectOption("Failed")
    await page.locator("h1").click()
    await heldFor("unsent input")
    await page.locator('form.filters select[name="state"]').selectOption("")
    // an open confirmation (a dialog)
    await page.evaluate(() => {
      const d = (globalThis as any).document
      d.body.insertAdjacentHTML("beforeend", '<dialog id="confirm" open><p>Delete 3 jobs?</p></dialog>')
    })
    await heldFor("confirmation open")
    await page.evaluate(() => (globalThis as any).document.getElementById("confirm").remove())
    await page.locator("h1").click()

    // nothing pending: the next due refresh reloads, and the scroll position survives it
    await page.evaluate(() => (globalThis as any).scrollTo(0, 120))
    const before = await page.evaluate(() => (globalThis as any).scrollY as number)
    expect(before).toBeGreaterThan(50)
    await reloads()
    await expect(page.evaluate(() => (globalThis as any).scrollY as number)).resolves.toBe(before)
    await expect(page.locator("html").getAttribute("data-refresh")).resolves.toBe("on")

    // paused: no refresh at all, even with nothing pending
    await mark()
    await page.locator("#refresh").click()
    navigations.length = 0
    await page.clock.runFor(3 * every)
    expect(await marked()).toBe(true)
    expect(navigations).toEqual([])
    await page.locator("#refresh").click()
    await page.close()
  })

  it("never refreshes the bulk confirmation page", async () => {
    const page = await browser.newPage()
    await page.clock.install()
    await page.goto(`${withoutAddon.url}/bulk?action=retry&state=Failed`)
    await expect(page.locator("form[data-confirm]").count()).resolves.toBe(1)
    await page.evaluate(() => void ((globalThis as any).warpMark = 1))
    const navigations: Array<string> = []
    page.on("request", (r) => {
      if (r.isNavigationRequest()) navigations.push(r.url())
    })
    await page.clock.runFor(60_000)
    expect(await page.evaluate(() => (globalThis as any).warpMark)).toBe(1)
    expect(navigations).toEqual([])
    await page.close()
  })

  it("retries a Failed job through the page, after which a worker runs it again (the page refreshes itself)", async () => {
    const failed = await bare.run(Effect.flatMap(F.JobStoreTag, (s) => s.list({ state: "Failed", limit: 10, offset: 0 })))
    const id = failed.rows[0]!.id
    const worker = await bare.run(
      Effect.forkDetach(
        Effect.scoped(
          Effect.andThen(
            // the app has no concurrency addon of its own: the worker gets in-memory limits and slots (the
            // fixture's contracts declare Mutex / Semaphore, which a worker without the addon refuses)
            Worker.make({ concurrency: 2, pollInterval: "20 millis", addons: [Concurrency.addon] }).pipe(
              Effect.provide(Layer.merge(Concurrency.layerMemoryLimits, SemaphoreProviderMemory.layer))
            ),
            Effect.never
          )
        )
      )
    )
    try {
      const page = await browser.newPage()
      await page.goto(`${withoutAddon.url}/jobs?state=Failed`)
      await page.getByRole("link", { name: id }).click()
      await page.waitForURL(`${withoutAddon.url}/jobs/${id}`)
      const claims = page.locator("table.stack tbody tr", { hasText: "claimed by" })
      const before = await claims.count()
      expect(before).toBeGreaterThan(0)
      await expect(page.getByRole("button", { name: "Requeue now" }).count()).resolves.toBe(0)
      await page.getByRole("button", { name: "Retry" }).click()
      await expect(page.getByRole("status").textContent()).resolves.toBe("Retried 1 job.")
      await expect(page.locator("tr", { hasText: "Retried by an operator" }).count()).resolves.toBe(1)
      // the worker claims it again; the page shows the new attempt after an auto-refresh
      await claims.nth(before).waitFor({ timeout: 30_000 })
      const d = await bare.run(Effect.flatMap(F.JobStoreTag, (s) => s.get(id)))
      const kinds = d._tag === "Some" ? d.value.logs.map((l) => l.kind) : []
      expect(kinds.indexOf("Retried")).toBeGreaterThan(-1)
      expect(kinds.slice(kinds.indexOf("Retried")).includes("Processing")).toBe(true)
      await shot(page, "job-retried")
      await page.close()
    } finally {
      await bare.run(Fiber.interrupt(worker))
    }
  })
})
