/**
 * Job keys on the dashboard, on both stores: the key on the jobs list and the job page (escaped), the
 * exact `jobKey=` filter, the holder's Replaced / Joined entries, and the `stats:deduplicated` /
 * `stats:replaced` counters on the counters page.
 */
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { JobParameters, Publisher } from "warp-effect"
import * as F from "./fixture.js"

const setups = [
  ["memory", F.memoryWithoutAddon],
  ["postgres", F.pgWithAddon]
] as const

for (const [name, layer] of setups) {
  describe(`Dashboard job keys: ${name}`, () => {
    let app: F.App<any>
    let server: Awaited<ReturnType<typeof F.serve>>
    let holder = ""
    let hostileHolder = ""
    beforeAll(async () => {
      app = await F.startApp(layer() as any)
      server = await F.serve(app)
      const later = new Date(Date.now() + 3_600_000)
      const ids = await app.run(
        Effect.gen(function* () {
          const p = yield* Publisher.Publisher
          const a = yield* p.submit(F.ChargeCard, { invoice: 7, customer: "c" }, JobParameters.make().withJobKey("invoice-7"), later)
          yield* p.submit(F.ChargeCard, { invoice: 8, customer: "c" }, JobParameters.make().withJobKey("invoice-7"), later)
          yield* p.submit(F.ChargeCard, { invoice: 9, customer: "c" }, JobParameters.make().withJobKey("invoice-7", { mode: "keep" }), later)
          const h = yield* p.submit(F.ChargeCard, { invoice: 1, customer: "c" }, JobParameters.make().withJobKey(F.hostile), later)
          return [a.id, h.id] as const
        }) as Effect.Effect<readonly [string, string], unknown, any>
      )
      ;[holder, hostileHolder] = ids
    }, 120_000)
    afterAll(async () => {
      await server?.close()
      await app?.dispose()
    })

    it("filters the jobs list by exact job key and shows the key on each keyed row", async () => {
      const body = await (await fetch(`${server.url}/jobs?jobKey=invoice-7`)).text()
      expect(body).toContain(holder)
      expect(body).toContain('data-testid="job-key" title="job key">key invoice-7</span>')
      expect(body).toContain('name="jobKey"')
      expect(body).toContain('value="invoice-7"')
      expect(body).toMatch(/data-testid="pager">1–1 of 1 /)
      for (const id of app.seeded.all) expect(body).not.toContain(id)
      // exact, not a prefix
      const none = await (await fetch(`${server.url}/jobs?jobKey=invoice-`)).text()
      expect(none).toContain("No jobs match these filters")
      // the unfiltered list shows keys escaped
      const all = await (await fetch(`${server.url}/jobs`)).text()
      expect(all).toContain(`key ${F.hostileEscaped}`)
      expect(all).not.toContain(F.hostile)
    })

    it("shows the job key on the job page, linked to the filtered list, with the holder's entries", async () => {
      const body = await (await fetch(`${server.url}/jobs/${holder}`)).text()
      const prefix = new URL(server.url).pathname.replace(/\/$/, "")
      expect(body).toContain(`data-testid="job-key"><a href="${prefix}/jobs?type=ChargeCard&amp;jobKey=invoice-7">invoice-7</a>`)
      expect(body).toContain("Replaced by an enqueue with job key &#39;invoice-7&#39;")
      expect(body).toContain("Joined by an enqueue with job key &#39;invoice-7&#39;")
      expect(body).toContain("&quot;invoice&quot;: 8")
      const hostile = await (await fetch(`${server.url}/jobs/${hostileHolder}`)).text()
      expect(hostile).toContain(F.hostileEscaped)
      expect(hostile).not.toContain(F.hostile)
    })

    it("counts joins and replaces on the counters page", async () => {
      const body = await (await fetch(`${server.url}/counters`)).text()
      expect(body).toMatch(/<div class="v">1<\/div><div class="k">deduplicated<\/div>/)
      expect(body).toMatch(/<div class="v">1<\/div><div class="k">replaced<\/div>/)
      expect(body).toMatch(/<td>ChargeCard<\/td>(<td class="num">[^<]*<\/td>){5}<td class="num">1<\/td><td class="num">1<\/td><\/tr>/)
    })
  })
}
