/**
 * The dashboard over HTTP (fetch against servers on ephemeral loopback ports): pages and paging,
 * escaping, CSRF, authorization, bad form input, 404 without the concurrency addon, and the README's
 * mount inside an existing Effect HTTP app.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import { createServer } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Csrf from "../../src/internal/dashboard/Csrf.js"
import { StoreError } from "warp-effect"
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
      `/jobs?state=${encodeURIComponent(F.hostile)}`
    ]
    for (const path of pages) {
      const response = await get(`${admin.url}${path}`, adminHeader)
      const body = await response.text()
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
    expect(ok.headers.get("location")).toBe("/warp/concurrency?saved=csrf-probe&slots=7")
    expect(await rows()).toEqual([...before, { key: "csrf-probe", slots: 7 }].sort((x, y) => (x.key < y.key ? -1 : 1)))
    const followed = await (await get(`${admin.origin}${ok.headers.get("location")}`, { ...adminHeader, cookie: a.cookie })).text()
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
    expect(allowed.body).toContain('<form class="create" method="post" action="/warp/concurrency">')
    const accepted = await post(admin.url, { action: "save", key: "hooked", slots: "4", _csrf: m.token }, { ...adminHeader, cookie: m.cookie })
    expect(accepted.status).toBe(303)
    expect(await rows()).toContainEqual({ key: "hooked", slots: 4 })
    const deleted = await post(admin.url, { action: "delete", key: "hooked", _csrf: m.token }, { ...adminHeader, cookie: m.cookie })
    expect(deleted.headers.get("location")).toBe("/warp/concurrency?deleted=hooked")
    expect(await rows()).not.toContainEqual({ key: "hooked", slots: 4 })
    const again = await post(admin.url, { action: "delete", key: "hooked", _csrf: m.token }, { ...adminHeader, cookie: m.cookie })
    expect(again.headers.get("location")).toBe("/warp/concurrency?missing=hooked")
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
      HttpServer.serve(ReadmeExample.app).pipe(
        Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
        Layer.provide(Layer.succeedContext(app.context))
      )
    )
    try {
      const address = await runtime.runPromise(HttpServer.addressWith((a) => Effect.succeed(a)))
      const origin = `http://127.0.0.1:${(address as HttpServer.TcpAddress).port}`
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
      expect(saved.headers.get("location")).toBe("/admin/warp/concurrency?saved=mounted&slots=6")
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
    const down = Effect.fail(new StoreError({ operation: "list", cause: new Error("password=hunter2 connection refused") }))
    const store = F.JobStoreTag.of({
      insert: () => down,
      fetch: () => down,
      finalize: () => down,
      heartbeat: () => down,
      appendLog: () => down,
      get: () => down,
      list: () => down,
      countByState: down,
      counters: down,
      locks: { tryAcquire: () => Effect.die("unused") },
      insight: { liveKeys: () => down, line: () => down }
    })
    const broken = await F.serve({ context: Context.make(F.JobStoreTag, store) } as F.App<F.Env>)
    try {
      for (const path of ["/jobs", "/jobs/x", "/counters"]) {
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
