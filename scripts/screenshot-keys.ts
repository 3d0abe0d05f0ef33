/**
 * Regenerates docs/images/keys.png, the README's picture of the dashboard's live keys page: runs the
 * README's second step (examples/readme/second-step.ts: 6 exports under Semaphore("exports", 3) with
 * 20 s handlers) on a temporary database of DATABASE_URL's server, waits until three of them hold the
 * key's slots, and photographs the page with Chromium (/usr/bin/chromium, driven by playwright-core).
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx scripts/screenshot-keys.ts
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { chromium } from "playwright-core"

const given = process.env.DATABASE_URL
if (given === undefined || given === "") throw new Error("set DATABASE_URL to a PostgreSQL server where a database may be created")
const root = join(import.meta.dirname, "..")
const out = join(root, "docs", "images", "keys.png")
const name = `warp_screenshot_${Date.now().toString(36)}`

const admin = async <A>(f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: given })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

await admin((c) => c.query(`CREATE DATABASE ${name}`))
const url = new URL(given)
url.pathname = `/${name}`
const child = spawn(join(root, "node_modules", ".bin", "tsx"), [join(root, "examples", "readme", "second-step.ts")], {
  cwd: root,
  env: { ...process.env, DATABASE_URL: url.toString(), PORT: "0" },
  stdio: ["ignore", "pipe", "inherit"]
})
const profile = mkdtempSync(join(tmpdir(), "warp-screenshot-"))
try {
  const keysUrl = await new Promise<string>((resolve, reject) => {
    let seen = ""
    child.stdout.on("data", (chunk: Buffer) => {
      seen += chunk.toString()
      const match = /dashboard: (http:\/\/\S+\/keys)/.exec(seen)
      if (match !== null) resolve(match[1]!)
    })
    child.on("exit", (code) => reject(new Error(`the example exited (${code}) before printing its dashboard URL:\n${seen}`)))
  })
  // the page lists the holders once the worker has reported them: wait for three of 'exports'
  for (let i = 0; ; i++) {
    const html = await (await fetch(keysUrl)).text()
    if ((html.match(/ExportReport/g) ?? []).length >= 3 && html.includes("3 / 3")) break
    if (i === 100) throw new Error(`the keys page never showed three holders of 'exports':\n${html.slice(0, 2000)}`)
    await new Promise((r) => setTimeout(r, 200))
  }
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1280, height: 600 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"]
  })
  try {
    const page = await browser.newPage()
    await page.goto(keysUrl)
    await page.screenshot({ path: out, fullPage: false })
  } finally {
    await browser.close()
  }
  console.log(`wrote ${out} (${statSync(out).size} bytes)`)
} finally {
  child.kill("SIGTERM")
  await new Promise((r) => child.once("exit", r))
  rmSync(profile, { recursive: true, force: true })
  await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
}
