/**
 * The dashboard over HTTP (fetch against servers on ephemeral loopback ports): pages and paging,
 * escaping, CSRF, authorization, bad form input, 404 without the concurrency addon, and the README's
 * mount inside an existing Effect HTTP app.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServer from "effect/http/HttpServer"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as NetAddress from "effect/net/NetAddress"
import * as SqlClient from "effect/sql/SqlClient"
import { createHash } from "node:crypto"
import { createServer } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Csrf from "../../src/internal/dashboard/Csrf.js"
import * as Duration from "effect/Duration"
import * as Result from "effect/Result"
import { rollUpCounters } from "../../src/internal/store/pg/counters.js"
import { Job, JobParameters, JobStore, Publisher, Retention } from "warp-effect"
import * as JobId from "../../src/internal/job/JobId.js"
import * as F from "./fixture.js"
import * as ReadmeExample from "../../examples/readme/dashboard.js"

const secret = "dashboard-test-secret"
const adminHeader = { "x-test-admin": "yes" }

let app: F.App<F.PgEnv>
let bare: F.App<F.Env>
let admin: Awaited<ReturnType<typeof F.serve>>
let readOnly: Awaited<ReturnType<typeof F.serve>>
let withoutAddon: Awaited<ReturnType<typeof F.serve>>

beforeAll(async () => {
  const starting = F.startApp(F.memoryWithoutAddon())
  app = await F.startApp<F.PgEnv>(F.pgWithAddon())
  bare = await starting
  ;[admin, readOnly, withoutAddon] = await Promise.all([
    F.serve(app, { csrfSecret: secret, pageSize: 5, authorize: (request) => Effect.succeed(request.headers["x-test-admin"] === "yes") }),
    F.serve(app, { csrfSecret: secret }),
    F.serve(bare, { authorize: () => Effect.succeed(true) })
  ])
})

afterAll(async () => {
  await Promise.all([admin?.close(), readOnly?.close(), withoutAddon?.close()])
  await Promise.all([app?.dispose(), bare?.dispose()])
})

const get = (url: string, headers: Record<string, string> = {}) => fetch(url, { redirect: "manual", headers })

/** Loads the concurrency page as a browser would: returns its cookie and form token. */
const session = async (base: string, headers: Record<string, string> = adminHeader) => {
  const response = await get(`${base}/concurrency`, headers)
  const setCookie = response.headers.get("set-cookie") ?? ""
  const nonce = /warp_csrf=([^;]+)/.exec(setCookie)?.[1]
  const body = await response.text()
  const token = /name="_csrf" value="([^"]+)"/.exec(body)?.[1]
  return { cookie: nonce === undefined ? "" : `warp_csrf=${nonce}`, nonce, token, setCookie, body, status: response.status }
}

const post = (base: string, fields: Record<string, string>, headers: Record<string, string>) =>
  fetch(`${base}/concurrency`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(fields)
  })

const rows = () => app.run(F.limitRows)

/** The flash cookie a write's redirect set, as a `cookie` header part. */
const flashOf = (response: Response) => {
  const value = /warp_flash=([^;]*)/.exec(response.headers.get("set-cookie") ?? "")?.[1]
  expect(value, "the redirect sets a flash cookie").toBeTruthy()
  return `warp_flash=${value}`
}

/** Follows a write's redirect with its flash cookie (on the admin server) and returns the notice shown. */
const flashText = async (response: Response, cookie: string, headers: Record<string, string> = adminHeader) => {
  const body = await (await get(`${admin.origin}${response.headers.get("location")}`, { ...headers, cookie: `${cookie}; ${flashOf(response)}` })).text()
  return /<div class="notice" role="status">([^<]*)<\/div>/.exec(body)?.[1] ?? ""
}
const jobLinks = (body: string, prefix = "/warp") => [...body.matchAll(new RegExp(`href="${prefix}/jobs/([^"?]+)"`, "g"))].map((m) => m[1]!)

describe("pages", () => {
  it("redirects the root to the jobs list, which pages through every job exactly once", async () => {
    const root = await get(admin.url)
    expect(root.status).toBe(303)
    expect(root.headers.get("location")).toBe("/warp/jobs")
    expect((await get(`${admin.url}/`)).headers.get("location")).toBe("/warp/jobs")

    const seen: Array<string> = []
    for (let page = 1; page <= 4; page++) {
      const body = await (await get(`${admin.url}/jobs?page=${page}`)).text()
      const ids = jobLinks(body)
      expect(ids.length).toBe(page < 4 ? 5 : 3)
      expect(body).toContain(`page ${page} of 4`)
      seen.push(...ids)
    }
    expect(new Set(seen).size).toBe(18)
    expect([...seen].sort()).toEqual([...app.seeded.all].sort())
    expect(seen).toEqual([...seen].sort().reverse()) // newest first
    expect(jobLinks(await (await get(`${admin.url}/jobs?page=5`)).text())).toEqual([])
  })

  it("filters by state, with the count of each state on its tab", async () => {
    const body = await (await get(`${admin.url}/jobs?state=Failed`)).text()
    const ids = jobLinks(body)
    expect(ids.length).toBe(2)
    for (const id of ids) expect((await app.run(Effect.flatMap(F.JobStoreTag, (s) => s.get(id))))._tag).toBe("Some")
    expect(body).toMatch(/Failed<span class="n">2<\/span>/)
    expect(body).toMatch(/Scheduled<span class="n">1<\/span>/)
    expect(body).toMatch(/All<span class="n">18<\/span>/)
    const bad = await get(`${admin.url}/jobs?state=Nope`)
    expect(bad.status).toBe(400)
  })

  it("shows one job: concurrency key, stamped policy with its source, payload and audit trail", async () => {
    const response = await get(`${admin.url}/jobs/${app.seeded.charge}`)
    expect(response.status).toBe(200)
    const body = await response.text()
    expect(body).toContain('<div class="big mono" data-testid="concurrency-key">payment-api</div>')
    expect(body).toContain("declared limit 2 · mode Wait · from the contract")
    expect(body).toMatch(/<td>concurrency<\/td><td><span class="badge s-contract">contract<\/span><\/td><td class="mono">key: payment-api · limit: 2 · mode: Wait<\/td>/)
    expect(body).toContain("&quot;invoice&quot;: ")
    expect(body).toContain("Attempt 1 claimed by")
    expect(body).toContain(">Succeeded</span>")
    expect((await get(`${admin.url}/jobs/no-such-job`)).status).toBe(404)
  })

  it("shows requeued vs succeeded per job type from the stats counters, with an inline SVG chart", async () => {
    const counters = await app.run(Effect.flatMap(F.JobStoreTag, (s) => s.counters))
    const body = await (await get(`${admin.url}/counters`)).text()
    expect(body).toContain('<svg class="chart" role="img" aria-label="Requeued vs succeeded per job type"')
    const row = new RegExp(
      `<td>ChargeCard</td><td class="num">${counters.get("stats:succeeded:ChargeCard")}</td><td class="num">${counters.get("stats:requeued:ChargeCard") ?? 0}</td>`
    )
    expect(body).toMatch(row)
    expect(body).toMatch(new RegExp(`<td>SyncLedger</td><td class="num">0</td><td class="num">0</td><td class="num">—</td><td class="num">2</td>`))
  })
})

describe("escaping", () => {
  it("never lets a job type, payload, key, audit text, admin limit or query parameter become markup", async () => {
    await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.addOrUpdateLimit(F.hostile, 3)))
    const pages = [
      "/jobs",
      `/jobs/${app.seeded.hostileJob}`,
      "/counters",
      "/concurrency",
      `/concurrency?saved=${encodeURIComponent(F.hostile)}&slots=${encodeURIComponent(F.hostile)}`,
      `/jobs/${encodeURIComponent(F.hostile)}`,
      `/jobs?state=${encodeURIComponent(F.hostile)}`,
      `/jobs?key=${encodeURIComponent(F.hostile)}`,
      `/jobs?type=${encodeURIComponent(F.hostile)}&id=${encodeURIComponent(F.hostile)}`,
      `/bulk?action=retry&type=${encodeURIComponent(F.hostile)}`
    ]
    for (const path of pages) {
      const response = await get(`${admin.url}${path}`, adminHeader)
      // the one script element is the dashboard's own refresh script (by hash, see the CSP)
      const body = (await response.text()).replace(/<script src="\/warp\/assets\/refresh\.js" integrity="sha256-[A-Za-z0-9+/=]+" defer><\/script>/, "")
      expect(body.toLowerCase(), path).not.toContain("<script")
      expect(body, path).toContain(F.hostileEscaped)
      expect(response.headers.get("content-security-policy"), path).toMatch(/default-src 'none'; style-src 'sha256-/)
      expect(response.headers.get("x-content-type-options")).toBe("nosniff")
    }
    const detail = await (await get(`${admin.url}/jobs/${app.seeded.hostileJob}`)).text()
    expect(detail).toContain(`data-testid="concurrency-key">${F.hostileEscaped}</div>`)
    expect(detail).toContain("Admin override: 3 slots")
    const form = await (await get(`${admin.url}/concurrency`, adminHeader)).text()
    expect(form).toContain(`<input type="hidden" name="key" value="${F.hostileEscaped}">`)
    await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.removeLimit(F.hostile)))
  })
})

describe("CSRF", () => {
  it("sets an HttpOnly, SameSite=Strict nonce cookie scoped to the dashboard", async () => {
    const s = await session(admin.url)
    expect(s.setCookie).toMatch(/^warp_csrf=[A-Za-z0-9_-]{16,};/)
    expect(s.setCookie).toMatch(/HttpOnly/i)
    expect(s.setCookie).toMatch(/SameSite=Strict/i)
    expect(s.setCookie).toMatch(/Path=\/warp/)
    // a browser that already has the cookie keeps it
    expect((await get(`${admin.url}/concurrency`, { ...adminHeader, cookie: s.cookie })).headers.get("set-cookie")).toBeNull()
  })

  it("rejects a POST without a valid token for this browser's cookie, and writes nothing", async () => {
    const a = await session(admin.url)
    const b = await session(admin.url)
    expect(a.token).toBeDefined()
    const fields = { action: "save", key: "csrf-probe", slots: "7" }
    const stale = Csrf.make({ secret, now: () => Date.now() - 13 * 60 * 60 * 1000 }).token(a.nonce!)
    const foreign = Csrf.make({ secret: "another-secret" }).token(a.nonce!)
    const flipped = a.token!.slice(0, -2) + (a.token!.endsWith("A") ? "BB" : "AA")
    const attempts: ReadonlyArray<[string, Record<string, string>, Record<string, string>]> = [
      ["no token", fields, { cookie: a.cookie }],
      ["token without its cookie", { ...fields, _csrf: a.token! }, {}],
      ["another browser's token", { ...fields, _csrf: b.token! }, { cookie: a.cookie }],
      ["tampered token", { ...fields, _csrf: flipped }, { cookie: a.cookie }],
      ["expired token", { ...fields, _csrf: stale }, { cookie: a.cookie }],
      ["token of another secret", { ...fields, _csrf: foreign }, { cookie: a.cookie }],
      ["garbage token", { ...fields, _csrf: "x.y" }, { cookie: a.cookie }]
    ]
    const before = await rows()
    for (const [name, body, headers] of attempts) {
      const response = await post(admin.url, body, { ...adminHeader, ...headers })
      expect(response.status, name).toBe(403)
      expect(await response.text(), name).toContain("Form expired")
    }
    expect(await rows()).toEqual(before)

    const ok = await post(admin.url, { ...fields, _csrf: a.token! }, { ...adminHeader, cookie: a.cookie })
    expect(ok.status).toBe(303)
    expect(ok.headers.get("location")).toBe("/warp/concurrency")
    expect(await rows()).toEqual([...before, { key: "csrf-probe", slots: 7 }].sort((x, y) => (x.key < y.key ? -1 : 1)))
    const followed = await (await get(`${admin.origin}${ok.headers.get("location")}`, { ...adminHeader, cookie: `${a.cookie}; ${flashOf(ok)}` })).text()
    expect(followed).toContain("Saved: &#39;csrf-probe&#39; now runs with 7 slots")
    await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.removeLimit("csrf-probe")))
  })
})

describe("authorization", () => {
  /** A valid cookie + token pair, minted with the servers' known secret. */
  const minted = () => {
    const c = Csrf.make({ secret })
    const nonce = c.nonce()
    return { cookie: `warp_csrf=${nonce}`, token: c.token(nonce) }
  }

  it("is read-only by default: the page says so, shows no form, and a POST with a valid token is refused", async () => {
    await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.addOrUpdateLimit("visible", 2)))
    const s = await session(readOnly.url, {})
    expect(s.status).toBe(200)
    expect(s.body).toContain("Writes are disabled.")
    expect(s.body).not.toContain("<form")
    expect(s.body).toContain('<tr data-key="visible">')
    const before = await rows()
    const m = minted()
    const attempts: ReadonlyArray<Record<string, string>> = [
      { action: "save", key: "sneaky", slots: "5" },
      { action: "delete", key: "visible" }
    ]
    for (const fields of attempts) {
      const response = await post(readOnly.url, { ...fields, _csrf: m.token }, { cookie: m.cookie })
      expect(response.status).toBe(403)
      expect(await response.text()).toContain("Writes are disabled")
    }
    expect(await rows()).toEqual(before)
    await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.removeLimit("visible")))
  })

  it("asks the application's authorize hook for every request", async () => {
    const denied = await session(admin.url, {})
    expect(denied.body).toContain("Writes are disabled.")
    expect(denied.body).not.toContain("<form")
    const m = minted()
    const before = await rows()
    const refused = await post(admin.url, { action: "save", key: "hooked", slots: "4", _csrf: m.token }, { cookie: m.cookie })
    expect(refused.status).toBe(403)
    expect(await rows()).toEqual(before)

    const allowed = await session(admin.url)
    expect(allowed.body).not.toContain("Writes are disabled.")
    expect(allowed.body).toContain('<form class="create" method="post" action="/warp/concurrency" data-overrides="key">')
    const accepted = await post(admin.url, { action: "save", key: "hooked", slots: "4", _csrf: m.token }, { ...adminHeader, cookie: m.cookie })
    expect(accepted.status).toBe(303)
    expect(await rows()).toContainEqual({ key: "hooked", slots: 4 })
    const deleted = await post(admin.url, { action: "delete", key: "hooked", _csrf: m.token }, { ...adminHeader, cookie: m.cookie })
    expect(deleted.headers.get("location")).toBe("/warp/concurrency")
    expect(await flashText(deleted, m.cookie)).toContain("Deleted the override of &#39;hooked&#39;")
    expect(await rows()).not.toContainEqual({ key: "hooked", slots: 4 })
    const again = await post(admin.url, { action: "delete", key: "hooked", _csrf: m.token }, { ...adminHeader, cookie: m.cookie })
    expect(again.headers.get("location")).toBe("/warp/concurrency")
    expect(await flashText(again, m.cookie)).toContain("There was no override of &#39;hooked&#39;")
  })
})

describe("group overrides (total caps)", () => {
  it("are listed, saved, edited and deleted from the page, behind the token; bad input is 400 and writes nothing", async () => {
    const groups = () => app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.listGroupLimits)).then((gs) => gs.map((g) => [g.group, g.slots]))
    const s = await session(admin.url)
    expect(s.body).toContain("No group overrides")
    const headers = { ...adminHeader, cookie: s.cookie }
    const saved = await post(admin.url, { action: "save-group", group: "exports", slots: "3", _csrf: s.token! }, headers)
    expect(saved.status).toBe(303)
    expect(await flashText(saved, s.cookie)).toContain("Saved: group &#39;exports&#39; is now capped at 3 slots in total")
    expect(await groups()).toEqual([["exports", 3]])
    const page = (await session(admin.url)).body
    expect(page).toContain('<tr data-group="exports">')
    expect(page).toMatch(/name="action" value="save-group"><input type="hidden" name="group" value="exports"><input type="number" name="slots" min="1" step="1" required value="3"/)
    // the key of the same name is apart
    expect(await rows()).not.toContainEqual({ key: "exports", slots: 3 })
    for (const [fields, message] of [
      [{ action: "save-group", group: "", slots: "3" }, /Group: Group must not be empty/],
      [{ action: "save-group", group: "exports", slots: "0" }, /Slots: /],
      [{ action: "delete-group", group: "  " }, /Group: Group must not be empty/]
    ] as const) {
      const response = await post(admin.url, { ...fields, _csrf: s.token! }, headers)
      expect(response.status, JSON.stringify(fields)).toBe(400)
      expect(await response.text(), JSON.stringify(fields)).toMatch(message)
    }
    expect(await groups()).toEqual([["exports", 3]])
    // a read-only session cannot write it
    const m = Csrf.make({ secret })
    const nonce = m.nonce()
    const refused = await post(readOnly.url, { action: "delete-group", group: "exports", _csrf: m.token(nonce) }, { cookie: `warp_csrf=${nonce}` })
    expect(refused.status).toBe(403)
    expect(await groups()).toEqual([["exports", 3]])
    // a job of the group shows its total cap, the group's override and its weight
    const id = await app.run(
      Effect.flatMap(Publisher.Publisher, (p) =>
        p.enqueue(F.SyncLedger, { account: "grouped" }, JobParameters.make().withSemaphore("ledger-grouped", 2, "Wait", { total: { group: "exports", limit: 2 }, weight: 2 }))
      )
    )
    const job = await (await get(`${admin.url}/jobs/${id}`, adminHeader)).text()
    expect(job).toMatch(/data-testid="total-cap">Total cap: group <span class="mono">exports<\/span> · declared 2 slots · <strong>admin override: 3 slots<\/strong>/)
    expect(job).toContain('data-testid="weight">Fair share: weight 2')
    const deleted = await post(admin.url, { action: "delete-group", group: "exports", _csrf: s.token! }, headers)
    expect(await flashText(deleted, s.cookie)).toContain("Deleted the override of group &#39;exports&#39;")
    expect(await groups()).toEqual([])
    // the job leaves the shared fixture as it was (other tests count its jobs)
    await app.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DELETE FROM warp_jobs WHERE id = ${id}`))
  })
})

describe("bad form input", () => {
  it("answers 400 with a visible error and changes nothing, for new and existing keys", async () => {
    await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.addOrUpdateLimit("existing", 4)))
    const s = await session(admin.url)
    const headers = { ...adminHeader, cookie: s.cookie }
    const before = await rows()
    expect(before).toContainEqual({ key: "existing", slots: 4 })
    const cases: ReadonlyArray<[Record<string, string>, RegExp]> = [
      ...["0", "-1", "1.5", "abc", "", " ", "1e3", "0x10", "99999999999"].flatMap((slots): Array<[Record<string, string>, RegExp]> => [
        [{ action: "save", key: "new-key", slots }, /Slots: /],
        [{ action: "save", key: "existing", slots }, /Slots: /]
      ]),
      [{ action: "save", key: "", slots: "3" }, /Key: Key must not be empty/],
      [{ action: "save", key: "   ", slots: "3" }, /Key: Key must not be empty/],
      [{ action: "save", key: "k".repeat(10 * 1024), slots: "3" }, /Key: Key must be at most 512 characters \(got 10240\)/],
      [{ action: "save", slots: "3" }, /Key: /],
      [{ action: "delete", key: "" }, /Key: Key must not be empty/],
      [{ action: "drop-table", key: "existing" }, /Unknown action/]
    ]
    for (const [fields, message] of cases) {
      const response = await post(admin.url, { ...fields, _csrf: s.token! }, headers)
      const label = JSON.stringify(fields).slice(0, 80)
      expect(response.status, label).toBe(400)
      const body = await response.text()
      expect(body, label).toContain('<div class="error" role="alert"><strong>Nothing was changed.</strong>')
      expect(body, label).toMatch(message)
    }
    // what was typed comes back in the form, escaped
    const echoed = await (await post(admin.url, { action: "save", key: F.hostile, slots: "1.5", _csrf: s.token! }, headers)).text()
    expect(echoed).toContain(`value="${F.hostileEscaped}"`)
    expect(echoed).toContain('value="1.5" aria-invalid="true"')
    // an oversized body is refused before it is parsed
    const huge = await post(admin.url, { action: "save", key: "h".repeat(100 * 1024), slots: "3", _csrf: s.token! }, headers)
    expect(huge.status).toBe(413)
    expect(await rows()).toEqual(before)
  })
})

describe("without the concurrency addon", () => {
  it("answers 404 on the concurrency page, GET and POST, and has no nav link to it", async () => {
    expect((await get(`${withoutAddon.url}/concurrency`)).status).toBe(404)
    const c = Csrf.make()
    const nonce = c.nonce()
    const response = await post(withoutAddon.url, { action: "save", key: "x", slots: "2", _csrf: c.token(nonce) }, { cookie: `warp_csrf=${nonce}` })
    expect(response.status).toBe(404)
    const jobs = await (await get(`${withoutAddon.url}/jobs`)).text()
    expect(jobs).not.toContain("/warp/concurrency")
    expect(jobs).toContain('href="/warp/counters"')
    const withAddon = await (await get(`${admin.url}/jobs`)).text()
    expect(withAddon).toContain('href="/warp/concurrency"')
  })

  it("still shows the stamped concurrency key of a job (stamped, not enforced), without override details", async () => {
    const body = await (await get(`${withoutAddon.url}/jobs/${bare.seeded.charge}`)).text()
    expect(body).toContain('data-testid="concurrency-key">payment-api</div>')
    expect(body).not.toContain("override")
  })
})

describe("mounted inside an existing Effect HTTP app (README example)", () => {
  it("serves the app's own routes and the dashboard under its prefix, with links and cookie under that prefix", async () => {
    const runtime = ManagedRuntime.make(
      HttpRouter.serve(ReadmeExample.app).pipe(
        Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
        Layer.provide(Layer.succeedContext(app.context))
      )
    )
    try {
      const address = await runtime.runPromise(Effect.map(HttpServer.HttpServer, (server) => server.address))
      const origin = `http://127.0.0.1:${(address as NetAddress.InetAddress).port}`
      expect(await (await get(`${origin}/`)).text()).toBe("my app")
      expect((await get(`${origin}/admin/warp`)).headers.get("location")).toBe("/admin/warp/jobs")
      const jobs = await (await get(`${origin}/admin/warp/jobs`)).text()
      expect(jobs).toContain('href="/admin/warp/counters"')
      expect(jobLinks(jobs, "/admin/warp").length).toBe(18)
      const operator = { "x-forwarded-user": "ops" }
      const s = await session(`${origin}/admin/warp`, operator)
      expect(s.setCookie).toMatch(/Path=\/admin\/warp/)
      expect(s.body).toContain('action="/admin/warp/concurrency"')
      const saved = await post(`${origin}/admin/warp`, { action: "save", key: "mounted", slots: "6", _csrf: s.token! }, { ...operator, cookie: s.cookie })
      expect(saved.headers.get("location")).toBe("/admin/warp/concurrency")
      expect(await rows()).toContainEqual({ key: "mounted", slots: 6 })
      expect((await session(`${origin}/admin/warp`, {})).body).toContain("Writes are disabled.")
      await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.removeLimit("mounted")))
    } finally {
      await runtime.dispose()
    }
  })
})

describe("store failures", () => {
  it("render a 500 page naming the error type, without the cause", async () => {
    const down = Effect.fail(new JobStore.StoreError({ operation: "list", cause: new Error("password=hunter2 connection refused") }))
    const store = F.JobStoreTag.of({
      insert: () => down,
      fetch: () => down,
      finalize: () => down,
      heartbeat: () => down,
      appendLog: () => down,
      get: () => down,
      prune: () => down,
      expiredBacklog: () => down,
      list: () => down,
      operate: () => down,
      countByState: down,
      counters: down,
      requestCancel: () => down,
      markHolder: () => down,
      cancelHolders: () => down,
      cancelRequests: () => down,
      reportWorker: () => down,
      removeWorker: () => down,
      workers: down,
      recordSlotAudit: () => down,
      slotAuditFindings: down,
      locks: { tryAcquire: () => Effect.die("unused") },
      insight: { liveKeys: () => down, line: () => down }
    })
    const broken = await F.serve({ context: Context.make(F.JobStoreTag, store) } as F.App<F.Env>)
    try {
      for (const path of ["/jobs", "/jobs/x", "/counters", "/workers"]) {
        const response = await get(`${broken.url}${path}`)
        expect(response.status, path).toBe(500)
        const body = await response.text()
        expect(body, path).toContain("The dashboard could not read its data (StoreError)")
        expect(body, path).not.toContain("hunter2")
      }
    } finally {
      await broken.close()
    }
  })
})

// ---- operator actions, filters, flash, pager, bad input (issue 16) ------------------------------

const probe = (type: string, over: Partial<Job.NewJob> = {}): Job.NewJob => ({
  id: JobId.make(),
  type,
  handler: null,
  payload: { probe: true },
  state: "Enqueued",
  scheduleTime: new Date(Date.now() + 3_600_000),
  metadata: { policies: {} },
  ...over
})

/** Inserts jobs of `type` and puts them in `state` (straight in the table, as a worker would have). */
const jobsIn = async (type: string, n: number, state: string, over: Partial<Job.NewJob> = {}) => {
  const rows = Array.from({ length: n }, () => probe(type, over))
  await app.run(Effect.flatMap(F.JobStoreTag, (s) => s.insert(rows)))
  const ids = rows.map((r) => r.id)
  await app.run(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      state === "Processing"
        ? sql`UPDATE warp_jobs SET state = 'Processing', attempt = 1, locked_by = 'probe-worker', lease_until = now() + interval '1 hour' WHERE id IN ${sql.in(ids)}`
        : sql`UPDATE warp_jobs SET state = ${state} WHERE id IN ${sql.in(ids)}`
    )
  )
  return ids
}

const detail = (id: string) => app.run(Effect.flatMap(F.JobStoreTag, (s) => s.get(id))).then((d) => (d._tag === "Some" ? d.value : undefined))

/** Opens a job's page as a browser would: its cookie, its action forms' token and the page. */
const jobSession = async (base: string, id: string, headers: Record<string, string> = adminHeader) => {
  const response = await get(`${base}/jobs/${encodeURIComponent(id)}`, headers)
  const nonce = /warp_csrf=([^;]+)/.exec(response.headers.get("set-cookie") ?? "")?.[1]
  const body = await response.text()
  return { cookie: `warp_csrf=${nonce}`, token: /name="_csrf" value="([^"]+)"/.exec(body)?.[1], body, status: response.status }
}

const postTo = (base: string, path: string, fields: Record<string, string>, headers: Record<string, string>) =>
  fetch(`${base}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(fields)
  })

describe("actions on one job", () => {
  it("shows the actions a job's state allows to a writer, none to a read-only viewer, and only Cancel on a running job", async () => {
    const [failed] = await jobsIn("OpsOne", 1, "Failed")
    const [waiting] = await jobsIn("OpsOne", 1, "Scheduled")
    const [running] = await jobsIn("OpsOne", 1, "Processing")
    const buttons = (body: string) => [...body.matchAll(/name="action" value="(\w+)"/g)].map((m) => m[1])
    expect(buttons((await jobSession(admin.url, failed!)).body)).toEqual(["retry", "delete"])
    expect(buttons((await jobSession(admin.url, waiting!)).body)).toEqual(["requeue", "delete"])
    expect(buttons((await jobSession(admin.url, running!)).body)).toEqual(["cancel"])
    expect((await jobSession(admin.url, failed!, {})).body).not.toContain("<form")
    expect((await jobSession(readOnly.url, failed!, {})).body).not.toContain("<form")
  })

  it("retries a Failed job: Enqueued, due now, an audit entry, and a flash after the redirect", async () => {
    const [id] = await jobsIn("OpsOne", 1, "Failed")
    const s = await jobSession(admin.url, id!)
    const before = Date.now()
    const response = await postTo(admin.url, "/actions", { action: "retry", id: id!, _csrf: s.token! }, { ...adminHeader, cookie: s.cookie })
    expect(response.status).toBe(303)
    expect(response.headers.get("location")).toBe(`/warp/jobs/${id}`)
    const d = (await detail(id!))!
    expect(d.job.state).toBe("Enqueued")
    expect(d.job.scheduleTime.getTime()).toBeGreaterThanOrEqual(before - 2000)
    expect(d.job.scheduleTime.getTime()).toBeLessThanOrEqual(Date.now() + 2000)
    expect(d.logs.at(-1)).toMatchObject({ kind: "Retried", message: "Retried by an operator" })
    expect(await flashText(response, s.cookie)).toBe("Retried 1 job.")
  })

  it("deletes and requeues from the allowed states", async () => {
    const [scheduled, failed] = [...(await jobsIn("OpsOne", 1, "Scheduled")), ...(await jobsIn("OpsOne", 1, "Failed"))]
    const s = await jobSession(admin.url, scheduled!)
    const headers = { ...adminHeader, cookie: s.cookie }
    expect((await postTo(admin.url, "/actions", { action: "requeue", id: scheduled!, _csrf: s.token! }, headers)).status).toBe(303)
    const requeued = (await detail(scheduled!))!
    expect(requeued.job.state).toBe("Enqueued")
    expect(requeued.job.scheduleTime.getTime()).toBeLessThanOrEqual(Date.now() + 2000)
    expect(requeued.logs.at(-1)).toMatchObject({ kind: "Requeued", message: "Requeued by an operator" })
    expect((await postTo(admin.url, "/actions", { action: "delete", id: failed!, _csrf: s.token! }, headers)).status).toBe(303)
    expect((await detail(failed!))!.job.state).toBe("Deleted")
    expect((await detail(failed!))!.logs.at(-1)).toMatchObject({ kind: "Deleted", message: "Deleted by an operator" })
  })

  it("refuses without a valid token, without authorization, in a wrong state, and on a running job: nothing is written", async () => {
    const [failed] = await jobsIn("OpsOne", 1, "Failed")
    const [enqueued] = await jobsIn("OpsOne", 1, "Enqueued")
    const [running] = await jobsIn("OpsOne", 1, "Processing")
    const s = await jobSession(admin.url, failed!)
    const other = await jobSession(admin.url, failed!)
    const snapshot = async () => Promise.all([failed!, enqueued!, running!].map(async (id) => JSON.stringify(await detail(id))))
    const before = await snapshot()
    const cases: ReadonlyArray<[string, string, Record<string, string>, Record<string, string>, number, RegExp]> = [
      ["no token", admin.url, { action: "retry", id: failed! }, { ...adminHeader, cookie: s.cookie }, 403, /Form expired/],
      ["another browser's token", admin.url, { action: "retry", id: failed!, _csrf: other.token! }, { ...adminHeader, cookie: s.cookie }, 403, /Form expired/],
      ["not authorized", admin.url, { action: "retry", id: failed!, _csrf: s.token! }, { cookie: s.cookie }, 403, /Writes are disabled/],
      ["read-only dashboard", readOnly.url, { action: "delete", id: failed!, _csrf: s.token! }, { cookie: s.cookie }, 403, /Writes are disabled/],
      ["retry of an Enqueued job", admin.url, { action: "retry", id: enqueued!, _csrf: s.token! }, { ...adminHeader, cookie: s.cookie }, 409, /The job is Enqueued/],
      ["requeue of a Failed job", admin.url, { action: "requeue", id: failed!, _csrf: s.token! }, { ...adminHeader, cookie: s.cookie }, 409, /The job is Failed/],
      ...(["retry", "delete", "requeue"] as const).map((action): [string, string, Record<string, string>, Record<string, string>, number, RegExp] => [
        `${action} of a running job`, admin.url, { action, id: running!, _csrf: s.token! }, { ...adminHeader, cookie: s.cookie }, 409, /The job is Processing/
      ]),
      ["unknown action", admin.url, { action: "explode", id: failed!, _csrf: s.token! }, { ...adminHeader, cookie: s.cookie }, 400, /Unknown action/],
      ["cancel of an ended job", admin.url, { action: "cancel", id: failed!, _csrf: s.token! }, { ...adminHeader, cookie: s.cookie }, 409, /already ended/],
      ["cancel without authorization", admin.url, { action: "cancel", id: running!, _csrf: s.token! }, { cookie: s.cookie }, 403, /Writes are disabled/],
      ["cancel with a NUL in the reason", admin.url, { action: "cancel", id: running!, reason: "a\u0000b", _csrf: s.token! }, { ...adminHeader, cookie: s.cookie }, 400, /reason/],
      ["unknown job", admin.url, { action: "retry", id: "no-such-job", _csrf: s.token! }, { ...adminHeader, cookie: s.cookie }, 404, /No job/],
      ["id with NUL", admin.url, { action: "retry", id: "a\u0000b", _csrf: s.token! }, { ...adminHeader, cookie: s.cookie }, 404, /No job/],
      ["over-long id", admin.url, { action: "retry", id: "x".repeat(5000), _csrf: s.token! }, { ...adminHeader, cookie: s.cookie }, 404, /No job/]
    ]
    for (const [name, base, fields, headers, status, text] of cases) {
      const response = await postTo(base, "/actions", fields, headers)
      expect(response.status, name).toBe(status)
      expect(await response.text(), name).toMatch(text)
    }
    expect(await snapshot()).toEqual(before)
  })
})

describe("bulk actions", () => {
  it("confirms with the count before writing, then applies to every match and says how many changed", async () => {
    const failed = await jobsIn("OpsBulk", 7, "Failed")
    const enqueued = await jobsIn("OpsBulk", 2, "Enqueued")
    await jobsIn("OpsBulk", 1, "Processing")
    const list = await (await get(`${admin.url}/jobs?type=OpsBulk`, adminHeader)).text()
    expect(list).toContain('href="/warp/bulk?type=OpsBulk&amp;action=retry"')
    expect(await (await get(`${admin.url}/jobs?type=OpsBulk`)).text()).not.toContain("/warp/bulk")

    const confirm = await get(`${admin.url}/bulk?type=OpsBulk&action=retry`, adminHeader)
    expect(confirm.status).toBe(200)
    const body = await confirm.text()
    expect(body).toContain("<h1>Retry 7 jobs?</h1>")
    expect(body).toContain('<input type="hidden" name="type" value="OpsBulk">')
    for (const id of failed) expect((await detail(id))!.job.state).toBe("Failed") // nothing written yet
    const cookie = `warp_csrf=${/warp_csrf=([^;]+)/.exec(confirm.headers.get("set-cookie") ?? "")?.[1]}`
    const token = /name="_csrf" value="([^"]+)"/.exec(body)![1]!

    // read-only: no confirmation, no write
    expect((await get(`${readOnly.url}/bulk?type=OpsBulk&action=retry`)).status).toBe(403)
    expect((await postTo(readOnly.url, "/bulk", { action: "retry", type: "OpsBulk", _csrf: token }, { cookie })).status).toBe(403)
    expect((await postTo(admin.url, "/bulk", { action: "retry", type: "OpsBulk" }, { ...adminHeader, cookie })).status).toBe(403)
    expect((await postTo(admin.url, "/bulk", { action: "retry", type: "OpsBulk", after: "yesterday", _csrf: token }, { ...adminHeader, cookie })).status).toBe(400)
    for (const id of failed) expect((await detail(id))!.job.state).toBe("Failed")

    const applied = await postTo(admin.url, "/bulk", { action: "retry", type: "OpsBulk", _csrf: token }, { ...adminHeader, cookie })
    expect(applied.status).toBe(303)
    expect(applied.headers.get("location")).toBe("/warp/jobs?type=OpsBulk")
    expect(await flashText(applied, cookie)).toBe("Retried 7 jobs.")
    for (const id of failed) {
      const d = (await detail(id))!
      expect(d.job.state).toBe("Enqueued")
      expect(d.logs.at(-1)!.message).toBe("Retried by an operator")
    }
    // requeue the 9 pending, delete them, and nothing left to retry: the Processing row stays
    expect(await (await get(`${admin.url}/bulk?type=OpsBulk&action=requeue`, adminHeader)).text()).toContain("<h1>Requeue now 9 jobs?</h1>")
    const deleted = await postTo(admin.url, "/bulk", { action: "delete", type: "OpsBulk", _csrf: token }, { ...adminHeader, cookie })
    expect(await flashText(deleted, cookie)).toBe("Deleted 9 jobs.")
    for (const id of enqueued) expect((await detail(id))!.job.state).toBe("Deleted")
    const nothing = await (await get(`${admin.url}/bulk?type=OpsBulk&state=Processing&action=delete`, adminHeader)).text()
    expect(nothing).toContain("Nothing to delete")
    expect(nothing).not.toContain('action="/warp/bulk"')
    const counts = await app.run(Effect.flatMap(F.JobStoreTag, (s) => s.list({ type: "OpsBulk", state: "Processing", limit: 10, offset: 0 })))
    expect(counts.total).toBe(1)
  })

  it("applies to at most the stated number of jobs per request, and says how many remain", async () => {
    await jobsIn("OpsMany", 103, "Failed")
    const confirm = await get(`${admin.url}/bulk?type=OpsMany&action=delete`, adminHeader)
    const body = await confirm.text()
    expect(body).toContain("<h1>Delete 100 jobs?</h1>")
    expect(body).toContain("103 jobs match")
    const cookie = `warp_csrf=${/warp_csrf=([^;]+)/.exec(confirm.headers.get("set-cookie") ?? "")?.[1]}`
    const token = /name="_csrf" value="([^"]+)"/.exec(body)![1]!
    const applied = await postTo(admin.url, "/bulk", { action: "delete", type: "OpsMany", _csrf: token }, { ...adminHeader, cookie })
    expect(await flashText(applied, cookie)).toBe("Deleted 100 jobs. 3 more match: repeat to continue (at most 100 a time).")
    const left = await app.run(Effect.flatMap(F.JobStoreTag, (s) => s.list({ type: "OpsMany", state: "Failed", limit: 10, offset: 0 })))
    expect(left.total).toBe(3)
  })
})

describe("search and filters", () => {
  it("filters by id, key prefix, type, state and creation window; the URL carries them and the pager keeps them", async () => {
    const keyed = (key: string) => ({ metadata: { policies: { concurrency: { source: "enqueue", value: { key, limit: 1, mode: "Wait" } } } } })
    const a = await jobsIn("OpsFilter", 6, "Enqueued", keyed("tenant-7:reports"))
    const b = await jobsIn("OpsFilter", 1, "Enqueued", keyed("tenant-%_"))
    const ids = async (query: string) => jobLinks(await (await get(`${admin.url}/jobs?${query}`)).text())
    expect(await ids(`id=${a[0]}`)).toEqual([a[0]])
    expect(await ids(`key=tenant-7`)).toEqual(expect.arrayContaining(a.slice(1).reverse().slice(0, 5)))
    expect((await ids(`key=tenant-7&type=OpsFilter`)).length).toBe(5)
    expect(await ids(`key=${encodeURIComponent("tenant-%_")}`)).toEqual(b)
    expect(await ids(`key=${encodeURIComponent("tenant-_")}`)).toEqual([])
    expect(await ids(`type=OpsFilter&state=Failed`)).toEqual([])
    expect(await ids(`type=OpsFilter&after=2000-01-01&before=2000-01-02`)).toEqual([])
    expect((await ids(`type=OpsFilter&after=2000-01-01T00:00`)).length).toBe(5)

    const first = await (await get(`${admin.url}/jobs?type=OpsFilter&key=tenant-`)).text()
    expect(first).toContain("1–5 of 7 · page 1 of 2")
    expect(first).toContain('href="/warp/jobs?key=tenant-&amp;type=OpsFilter&amp;page=2" rel="next"')
    expect(first).toContain('name="type" maxlength="512" value="OpsFilter"')
    expect(first).toContain('href="/warp/jobs?key=tenant-&amp;type=OpsFilter&amp;state=Enqueued"') // the tabs keep the filters
    const second = await (await get(`${admin.url}/jobs?key=tenant-&type=OpsFilter&page=2`)).text()
    expect(second).toContain("6–7 of 7 · page 2 of 2")
    expect([...jobLinks(first), ...jobLinks(second)].sort()).toEqual([...a, ...b].sort())
  })

  it("filters by priority (at least N), shows it in the list and on the job page, and carries it in links and bulk actions", async () => {
    const low = await jobsIn("OpsPriority", 2, "Enqueued", { priority: -3 })
    const mid = await jobsIn("OpsPriority", 2, "Enqueued", { priority: 5 })
    const high = await jobsIn("OpsPriority", 1, "Failed", { priority: 32767 })
    const ids = async (base: string, query: string) => jobLinks(await (await get(`${base}/jobs?${query}`)).text())
    expect((await ids(admin.url, "type=OpsPriority&priority=5")).sort()).toEqual([...mid, ...high].sort())
    expect((await ids(admin.url, "type=OpsPriority&priority=6")).sort()).toEqual(high)
    expect((await ids(admin.url, "type=OpsPriority&priority=-3")).sort()).toEqual([...low, ...mid, ...high].sort())
    expect((await ids(admin.url, "type=OpsPriority&priority=%2B5&state=Enqueued")).sort()).toEqual([...mid].sort())
    expect(await ids(admin.url, "type=OpsPriority&priority=32767&state=Enqueued")).toEqual([])
    const list = await (await get(`${admin.url}/jobs?type=OpsPriority&priority=5`, adminHeader)).text()
    expect(list).toContain('<th class="num">Priority</th>')
    expect(list).toContain('<td class="num" data-label="Priority">32767</td>')
    expect(list).toContain('name="priority" value="5"')
    expect(list).toContain('href="/warp/jobs?type=OpsPriority&amp;state=Failed&amp;priority=5"') // the tabs keep it
    expect(list).toContain('href="/warp/bulk?type=OpsPriority&amp;priority=5&amp;action=retry"')
    const bulk = await (await get(`${admin.url}/bulk?type=OpsPriority&priority=5&action=retry`, adminHeader)).text()
    expect(bulk).toContain("type is &quot;OpsPriority&quot; · priority is 5 or higher")
    expect(await (await get(`${admin.url}/jobs/${low[0]}`)).text()).toContain('<dd data-testid="priority">-3</dd>')
    // the memory store filters alike
    const row = (priority: number) => ({ ...probe("OpsPriorityMem", {}), priority })
    const rows = [row(0), row(2), row(9)]
    await bare.run(Effect.flatMap(F.JobStoreTag, (st) => st.insert(rows)))
    expect((await ids(withoutAddon.url, "type=OpsPriorityMem&priority=2")).sort()).toEqual([rows[1]!.id, rows[2]!.id].sort())
    expect(await (await get(`${withoutAddon.url}/jobs/${rows[2]!.id}`)).text()).toContain('<dd data-testid="priority">9</dd>')
  })

  it("answers 400 with a clear message for a bad filter or page, never 500", async () => {
    const cases: ReadonlyArray<[string, RegExp]> = [
      ["state=Nope", /There is no job state called &quot;Nope&quot;/],
      ["after=yesterday", /Created after must be a date like 2026-12-05/],
      ["before=2026-13-45", /Created before must be a date/],
      ["id=a%00b", /Id must not contain a NUL character/],
      ["type=a%00b", /Type must not contain a NUL character/],
      [`key=${"k".repeat(600)}`, /Key must be at most 512 characters \(got 600\)/],
      ["page=abc", /The page must be a whole number from 1/],
      ["page=0", /The page must be a whole number from 1/],
      ["page=-1", /The page must be a whole number from 1/],
      ["page=99999999999", /The page must be a whole number from 1/],
      ["type=a&type=b", /given more than once/],
      ["priority=high", /Priority must be a whole number from -32768 to 32767, got &quot;high&quot;/],
      ["priority=1.5", /Priority must be a whole number/],
      ["priority=40000", /Priority must be a whole number/]
    ]
    for (const [query, text] of cases) {
      const response = await get(`${admin.url}/jobs?${query}`)
      expect(response.status, query).toBe(400)
      expect(await response.text(), query).toMatch(text)
    }
  })
})

describe("pager, pluralization, flash", () => {
  it("says something true beyond the last page, with a link to the last page", async () => {
    const body = await (await get(`${admin.url}/jobs?type=ChargeCard&page=999`)).text()
    expect(body).toContain("page 999 of 3 — no jobs on this page")
    expect(body).toContain('<a href="/warp/jobs?type=ChargeCard&amp;page=3">Go to page 3</a>')
    expect(body).not.toContain("of 11 · page 999")
    expect(await (await get(`${admin.url}/jobs?type=NoSuchType`)).text()).toContain("No jobs match these filters.")
  })

  it("writes 1 slot and N slots", async () => {
    const s = await session(admin.url)
    const saved = await post(admin.url, { action: "save", key: "payment-api", slots: "1", _csrf: s.token! }, { ...adminHeader, cookie: s.cookie })
    expect(await flashText(saved, s.cookie)).toBe("Saved: &#39;payment-api&#39; now runs with 1 slot from the next pickup.")
    expect(await (await get(`${admin.url}/jobs/${app.seeded.charge}`)).text()).toContain("Admin override: 1 slot</strong>")
    const again = await post(admin.url, { action: "save", key: "payment-api", slots: "2", _csrf: s.token! }, { ...adminHeader, cookie: s.cookie })
    expect(await flashText(again, s.cookie)).toBe("Saved: &#39;payment-api&#39; now runs with 2 slots from the next pickup.")
    expect(await (await get(`${admin.url}/jobs/${app.seeded.charge}`)).text()).toContain("Admin override: 2 slots</strong>")
    await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.removeLimit("payment-api")))
  })

  it("shows a notice only after a real write: URL parameters and forged or foreign cookies show nothing; a flash is shown once", async () => {
    const s = await session(admin.url)
    const notice = (body: string) => /role="status"/.test(body)
    for (const path of ["/concurrency?saved=x&slots=3", "/concurrency?deleted=x", "/concurrency?missing=x", "/jobs?saved=x"]) {
      expect(notice(await (await get(`${admin.url}${path}`, { ...adminHeader, cookie: s.cookie })).text()), path).toBe(false)
    }
    const forged = `${Buffer.from("Saved: 'x' now runs with 3 slots").toString("base64url")}.AAAA`
    expect(notice(await (await get(`${admin.url}/concurrency`, { ...adminHeader, cookie: `${s.cookie}; warp_flash=${forged}` })).text())).toBe(false)
    // signed with another secret, or for another browser's nonce: ignored
    const other = Csrf.make({ secret: "another-secret" }).seal(s.nonce!, "forged")
    expect(notice(await (await get(`${admin.url}/concurrency`, { ...adminHeader, cookie: `${s.cookie}; warp_flash=${other}` })).text())).toBe(false)
    const b = await session(admin.url)
    const saved = await post(admin.url, { action: "save", key: "flash-probe", slots: "3", _csrf: s.token! }, { ...adminHeader, cookie: s.cookie })
    const flash = flashOf(saved)
    expect(saved.headers.get("set-cookie")).toMatch(/warp_flash=[^;]+; Max-Age=60; Path=\/warp; HttpOnly; SameSite=Strict/i)
    expect(notice(await (await get(`${admin.url}/concurrency`, { ...adminHeader, cookie: `${b.cookie}; ${flash}` })).text())).toBe(false)
    const shown = await get(`${admin.url}/concurrency`, { ...adminHeader, cookie: `${s.cookie}; ${flash}` })
    expect(await shown.text()).toContain("Saved: &#39;flash-probe&#39; now runs with 3 slots")
    expect(shown.headers.get("set-cookie")).toMatch(/warp_flash=; .*Max-Age=0/i)
    await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.removeLimit("flash-probe")))
  })
})

describe("bad input", () => {
  it("answers 404 for a job id no row can have, and 400 for deleting a limit with an over-long key, writing nothing", async () => {
    for (const path of ["/jobs/a%00b", `/jobs/${"x".repeat(5000)}`, "/jobs/%ED%A0%80"]) {
      const response = await get(`${admin.url}${path}`)
      expect(response.status, path.slice(0, 40)).toBe(404)
      expect(await response.text()).toContain("Not found")
    }
    await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.addOrUpdateLimit("kept", 2)))
    const s = await session(admin.url)
    const before = await rows()
    const long = await post(admin.url, { action: "delete", key: "k".repeat(600), _csrf: s.token! }, { ...adminHeader, cookie: s.cookie })
    expect(long.status).toBe(400)
    expect(await long.text()).toMatch(/Key must be at most 512 characters \(got 600\)/)
    const nul = await post(admin.url, { action: "delete", key: "a\u0000b", _csrf: s.token! }, { ...adminHeader, cookie: s.cookie })
    expect(nul.status).toBe(400)
    expect(await rows()).toEqual(before)
    await app.run(Effect.flatMap(F.ConcurrencyLimitManager, (m) => m.removeLimit("kept")))
  })
})

describe("refresh, relative times, durations", () => {
  it("serves the refresh script whose hash the CSP allows, and shows relative times with the absolute time on hover", async () => {
    const response = await get(`${admin.url}/jobs`)
    const csp = response.headers.get("content-security-policy")!
    const body = await response.text()
    const script = await get(`${admin.url}/assets/refresh.js`)
    expect(script.status).toBe(200)
    expect(script.headers.get("content-type")).toMatch(/javascript/)
    const hash = createHash("sha256").update(await script.text()).digest("base64")
    expect(csp).toContain(`script-src 'sha256-${hash}'`)
    expect(body).toContain(`integrity="sha256-${hash}"`)
    expect(body).toContain('id="refresh"')
    expect(body).toMatch(/<time datetime="[^"]+" title="\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC">(just now|\d+ (s|min|h|d) ago|in \d+ (s|min|h|d))<\/time>/)
    const job = await (await get(`${admin.url}/jobs/${app.seeded.charge}`)).text()
    expect(job).toMatch(/data-testid="queued">\d+ (ms|s|min)/)
    expect(job).toMatch(/data-testid="running">\d+ (ms|s)/)
    expect(job).toMatch(/data-testid="total">\d+ (ms|s|min)/)
  })
})

describe("a job removed by retention", () => {
  it("its page answers 410 Job expired: type, how and when it ended, when it was pruned", async () => {
    const id = JobId.make()
    await app.run(
      Effect.gen(function* () {
        const store = yield* F.JobStoreTag
        yield* store.insert([{ id, type: "RetentionPage", handler: null, payload: {}, state: "Enqueued", scheduleTime: new Date(0), metadata: {} }])
        const claimed = (yield* store.fetch("retention-page", 50, Duration.seconds(30))).filter((j) => j.id === id)
        expect(claimed).toHaveLength(1)
        yield* store.finalize({ job: claimed[0]!, workerId: "retention-page", outcome: Job.Outcome.Succeeded(), metadata: {} })
        yield* rollUpCounters(yield* SqlClient.SqlClient)
        // every other type kept forever: only this one goes
        const forever = { maxAge: Duration.infinity }
        const { plan } = Result.getOrThrow(
          Retention.resolve({ succeeded: forever, failed: forever, deleted: forever }, [["RetentionPage", { deleteOnSuccess: true }]])
        )
        const r = yield* store.prune(plan)
        expect(r.pruned.Succeeded).toBe(1)
      })
    )
    const response = await get(`${admin.url}/jobs/${id}`)
    expect(response.status).toBe(410)
    const body = await response.text()
    expect(body).toContain("Job expired")
    expect(body).toContain("RetentionPage")
    expect(body).toContain("<strong>Succeeded</strong>")
    expect(body).toContain("removed by retention")
    expect((await get(`${admin.url}/jobs/${JobId.make()}`)).status).toBe(404)
  })
})
