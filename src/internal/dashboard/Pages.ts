/**
 * The dashboard's pages, rendered on the server from plain data. Every value from a row, a counter,
 * a request or an admin limit goes through the escaping `html` template.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import type { ConcurrencyGroupLimit, ConcurrencyLimit } from "../concurrency/ConcurrencyLimitManager.js"
import type { JobDetail } from "../job/Job.js"
import type { JobExpired } from "../job/Retention.js"
import * as JobMetadata from "../policy/JobMetadata.js"
import { familyNames } from "../policy/PolicyFamily.js"
import { MAX_KEY_LENGTH } from "../policy/PolicyValues.js"
import { barChart } from "./Chart.js"
import { type Html, html, raw } from "./Html.js"
import { type FieldError, labelOf, type NameField } from "./LimitForm.js"
import * as Refresh from "./Refresh.js"
import { absolute, duration, durations, when } from "./Time.js"
import * as TrailFold from "./TrailFold.js"

/** The stylesheet, inlined in every page (and allowed by its hash in the CSP). */
export const css = `
:root{--fg:#1d2433;--muted:#5f6b7d;--line:#e3e7ee;--bg:#f6f7fb;--card:#fff;--accent:#3558d6;--ok:#1f8a4c;--warn:#b7791f;--bad:#c53030;--grey:#718096}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{background:#1d2433;color:#fff}
header .bar{max-width:1120px;margin:0 auto;padding:0 24px;display:flex;align-items:center;gap:28px;height:54px}
header .brand{font-weight:700;font-size:18px;color:#fff;text-decoration:none;letter-spacing:.3px}
header .brand small{font-weight:400;font-size:13px;color:#8fa8ff;margin-left:8px;letter-spacing:0}
header nav{display:flex;gap:4px}
header nav a{color:#cbd5e1;text-decoration:none;padding:6px 12px;border-radius:6px}
header nav a:hover{background:#2d3648;color:#fff}
header nav a.active{background:#3558d6;color:#fff}
main{max-width:1120px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 6px}
h2{font-size:17px;margin:28px 0 10px}
p.lead{color:var(--muted);margin:0 0 18px}
a{color:var(--accent)}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
pre{background:#0f1524;color:#e2e8f0;padding:14px 16px;border-radius:8px;overflow:auto;margin:0}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:18px 20px;margin-bottom:18px}
table{width:100%;border-collapse:collapse;background:var(--card);border:1px solid var(--line);border-radius:10px;overflow:hidden}
th,td{text-align:left;padding:9px 12px;border-bottom:1px solid var(--line);vertical-align:middle}
th{background:#f0f3f9;font-size:12px;text-transform:uppercase;letter-spacing:.5px;color:var(--muted)}
tr:last-child td{border-bottom:0}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 9px;border-radius:999px;font-size:12px;font-weight:600;background:#edf2f7;color:var(--grey)}
.s-Succeeded{background:#e6f6ec;color:var(--ok)}.s-Failed{background:#fdeaea;color:var(--bad)}
.s-Deleted,.s-Cancelled{background:#f1f1f4;color:#4a5568}.s-Processing,.s-Recovered{background:#e8eefc;color:var(--accent)}
.s-Enqueued,.s-Scheduled,.s-Requeued{background:#fdf3e1;color:var(--warn)}
.tabs{display:flex;flex-wrap:wrap;gap:6px;margin:0 0 16px}
.tabs a{padding:5px 12px;border-radius:999px;border:1px solid var(--line);background:var(--card);text-decoration:none;color:var(--fg);font-size:14px}
.tabs a.active{background:var(--accent);border-color:var(--accent);color:#fff}
.tabs a .n{color:var(--muted);margin-left:4px}.tabs a.active .n{color:#dbe4ff}
.pager{display:flex;justify-content:space-between;align-items:center;margin-top:12px;color:var(--muted)}
.pager a,.pager span.off{padding:5px 12px;border:1px solid var(--line);border-radius:6px;background:var(--card);text-decoration:none}
.pager span.off{color:#b4bcc8}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:6px 18px;margin:0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}
.callout{border-left:4px solid var(--accent);background:#eef2ff}
.callout.none{border-left-color:#cbd5e1;background:var(--card)}
.callout .big{font-size:18px;font-weight:600;overflow-wrap:anywhere}
.notice,.error,.readonly,.warning{padding:12px 16px;border-radius:8px;margin:0 0 16px}
.notice{background:#e6f6ec;color:#145c33;border:1px solid #b7e4c7}
.error{background:#fdeaea;color:#8a1f1f;border:1px solid #f5c2c2}
.error ul{margin:6px 0 0;padding-left:20px}
.readonly{background:#fff8e6;color:#7a5412;border:1px solid #f3dca6}
.warning{background:#fff1e6;color:#7a3412;border:1px solid #f3c6a6;overflow-wrap:anywhere}
.warning ul{margin:6px 0;padding-left:20px}.warning p{margin:6px 0 0}
form.inline{display:flex;gap:8px;align-items:center;margin:0}
input[type=text],input[type=number]{font:inherit;font-size:15px;color:var(--fg);padding:6px 10px;border:1px solid #cbd2dd;border-radius:6px;background:#fff}
input[type=number]{width:96px}
input.key{width:320px}
input[aria-invalid=true]{border-color:var(--bad);background:#fff6f6}
button{font:inherit;padding:6px 14px;border-radius:6px;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer}
button.secondary{background:#fff;color:var(--accent)}
button.danger{background:#fff;color:var(--bad);border-color:#e9a8a8}
.create{display:flex;gap:12px;align-items:flex-end;flex-wrap:wrap}
.create label{display:flex;flex-direction:column;font-size:13px;color:var(--muted);gap:4px}
.muted{color:var(--muted)}
.nowrap{white-space:nowrap}
.card h2{margin-top:0}
.card>p:first-child{margin-top:0}.card>p:last-child{margin-bottom:0}
.grid2{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:18px}
@media (max-width:800px){.grid2{grid-template-columns:minmax(0,1fr)}input.key{width:100%}}
.stats{display:grid;grid-template-columns:repeat(4,1fr);gap:14px;margin-bottom:18px}
.stat{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:14px 16px}
.stat .v{font-size:26px;font-weight:700;font-variant-numeric:tabular-nums}.stat .k{color:var(--muted);font-size:13px}
svg.chart{max-width:100%;height:auto;font-family:system-ui,sans-serif}
svg.chart .bar-succeeded{fill:#38a169}svg.chart .bar-requeued{fill:#dd8b1f}
svg.chart .grid{stroke:#e3e7ee}svg.chart .tick,svg.chart .value{fill:#5f6b7d;font-size:11px}
svg.chart .label{fill:#1d2433;font-size:13px}svg.chart .legend{fill:#1d2433;font-size:12px}
tr.hot td{background:#fffaf0}
.wrap{overflow-wrap:anywhere;word-break:break-word}
td{overflow-wrap:anywhere}
td.clip{max-width:37ch;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.titlebar{display:flex;justify-content:space-between;align-items:center;gap:12px;flex-wrap:wrap}
.titlebar p{margin:0}
.refresh{display:flex;gap:10px;align-items:center;flex-wrap:wrap}
.actions{display:flex;gap:8px;flex-wrap:wrap;margin:0 0 16px}
.bulk{display:flex;gap:8px;flex-wrap:wrap;align-items:center;margin:0 0 16px}
a.button{display:inline-block;padding:6px 14px;border-radius:6px;border:1px solid var(--accent);text-decoration:none}
a.button.secondary{background:#fff;color:var(--accent)}
form.filters{display:flex;gap:10px;flex-wrap:wrap;align-items:flex-end}
form.filters label{display:flex;flex-direction:column;font-size:13px;color:var(--muted);gap:4px;min-width:0;flex:1 1 150px}
form.filters input,form.filters select{width:100%;font:inherit;font-size:14px;padding:6px 8px;border:1px solid #cbd2dd;border-radius:6px;background:#fff}
form.filters .buttons{display:flex;gap:10px;align-items:center}
.s-Retried{background:#e8eefc;color:var(--accent)}
.s-Replaced,.s-Joined{background:#f1f1f4;color:#4a5568}
dl.facts{grid-template-columns:max-content minmax(0,1fr)}dl.facts dd{overflow-wrap:anywhere}
.badge{white-space:nowrap;overflow-wrap:normal}
time{text-decoration:underline dotted #b4bcc8}
@media (max-width:640px){
header .bar{padding:0 12px;gap:12px;height:auto;min-height:54px;flex-wrap:wrap}
main{padding:16px 12px}
.stats{grid-template-columns:repeat(2,1fr)}
table,table tbody,table tr,table td{display:block;width:100%}
table thead{display:none}
table tr{border-bottom:1px solid var(--line)}
table td,table td.num{border:0;padding:4px 12px;white-space:normal;text-align:left;overflow-wrap:anywhere}
table td.clip{max-width:none;white-space:nowrap}
table td[data-label]::before{content:attr(data-label);display:block;font-size:11px;text-transform:uppercase;letter-spacing:.5px;color:var(--muted)}
form.inline{flex-wrap:wrap}
.pager{flex-wrap:wrap;gap:8px}
}
footer{max-width:1120px;margin:0 auto;padding:8px 24px 32px;color:#98a2b3;font-size:12px}
`

/** What every page needs to draw its frame. */
export interface Frame {
  /** Where the dashboard lives, e.g. "/warp" ("" at the root). */
  readonly prefix: string
  /** Whether the concurrency addon is registered (shows its nav link). */
  readonly concurrency: boolean
}

type Section = "jobs" | "counters" | "concurrency" | "workers" | "none"

/** Formats a time for display (UTC, seconds). */
export const time = absolute

/** "1 slot" / "N slots". */
export const slots = (n: number): string => (n === 1 ? "1 slot" : `${n} slots`)

/** A state or audit kind as a coloured badge. */
export const badge = (text: string) => html`<span class="badge s-${text}">${text}</span>`

/** A message shown after a real write (from the signed flash cookie), or nothing. */
export const flashBanner = (text: string | undefined): Html | string =>
  text === undefined ? "" : html`<div class="notice" role="status">${text}</div>`

/**
 * The auto-refresh toggle, hidden until the refresh script shows it, and the note the script shows while
 * a due refresh waits for the operator (focus in a field, unsent input, an open confirmation).
 */
export const refreshButton = html`<span class="refresh"><span id="refresh-note" class="muted" aria-live="polite" hidden></span><button type="button" id="refresh" class="secondary" data-every="${Refresh.everySeconds}" aria-pressed="false" hidden>Pause auto-refresh</button></span>`

/** The page frame: head, nav, content. */
export const layout = (frame: Frame, section: Section, title: string, content: Html): Html => {
  const link = (s: Section, href: string, label: string) =>
    html`<a href="${frame.prefix}${href}"${raw(s === section ? ' class="active" aria-current="page"' : "")}>${label}</a>`
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Warp</title><style>${raw(css)}</style>
<script src="${frame.prefix}/assets/refresh.js" integrity="sha256-${Refresh.hash}" defer></script></head>
<body><header><div class="bar"><a class="brand" href="${frame.prefix}/jobs">Warp<small>dashboard</small></a>
<nav aria-label="Dashboard">${link("jobs", "/jobs", "Jobs")}${link("counters", "/counters", "Counters")}${frame.concurrency ? link("concurrency", "/concurrency", "Concurrency") : ""}${link("workers", "/workers", "Workers")}</nav></div></header>
<main>${content}</main>
<footer>Warp dashboard · times in UTC</footer></body></html>`
}

/** A page saying something went wrong (404, 400, 403, 500). */
export const message = (frame: Frame, title: string, text: string): Html =>
  layout(frame, "none", title, html`<h1>${title}</h1><div class="card"><p>${text}</p><p><a href="${frame.prefix}/jobs">Back to jobs</a></p></div>`)

/**
 * The page of a job that retention removed (its tombstone): which type it was, how it ended and when,
 * and when it was pruned.
 */
export const expired = (frame: Frame, e: JobExpired, now: Date): Html =>
  layout(
    frame,
    "none",
    "Job expired",
    html`<h1>Job expired</h1><div class="card"><p>Job <code>${e.id}</code> (${e.type}) ended <strong>${e.state}</strong> ${when(e.finishedAt, now)}
      and was removed by retention ${when(e.prunedAt, now)}: its row and audit trail are gone. The counters still count it.</p>
      <p><a href="${frame.prefix}/jobs">Back to jobs</a></p></div>`
  )

// ---- job detail -----------------------------------------------------------------------------

/** Renders an encoded policy value as `name: value` pairs. */
export const describeValue = (value: unknown): string =>
  value !== null && typeof value === "object"
    ? Object.entries(value as Record<string, unknown>)
        .map(([k, x]) => `${k}: ${typeof x === "string" ? x : JSON.stringify(x)}`)
        .join(" · ")
    : JSON.stringify(value)

/** Data of the job detail page. */
export interface JobView {
  readonly detail: JobDetail
  /** The admin override of the job's concurrency key, when the addon is registered and one exists. */
  readonly override: ConcurrencyLimit | undefined
  /** The admin override of the total cap of the job's group, when its policy has a total cap and one exists. */
  readonly groupOverride?: ConcurrencyGroupLimit | undefined
  /** The time the page is rendered at (relative times, durations). */
  readonly now?: Date | undefined
  /** The operator's action buttons (a request that may write), or nothing. */
  readonly actions?: Html | undefined
  readonly flash?: string | undefined
  /** The key's live slots and waiting line (`KeysPage.lineCard`), for a live job whose row carries a key. */
  readonly live?: Html | undefined
}

/** One job: facts, concurrency key, stamped policy per family, payload, audit trail. */
export const jobPage = (frame: Frame, v: JobView): Html => {
  const j = v.detail.job
  const decoded = JobMetadata.decode(j.metadata)
  const meta = Result.isSuccess(decoded) ? decoded.success : undefined
  const encoded = meta === undefined ? undefined : (JobMetadata.encode(meta) as { policies: Record<string, { source: string; value: unknown }> })
  const conc = meta?.policies.concurrency
  const concurrencyCard =
    conc === undefined
      ? html`<div class="card callout none" id="concurrency"><div class="muted">Concurrency key</div><div class="big">${meta?.stampedAt === undefined ? "not on the row yet" : "none"}</div><div class="muted" data-testid="concurrency-unresolved">${meta?.stampedAt === undefined
          ? j.state === "Processing"
            ? "Resolved when the job first runs: this attempt resolved its policy from the handler or contract (none was passed at enqueue) and writes it to the row when it finishes."
            : "Resolved when the job first runs: no key was passed at enqueue; the handler or contract may declare one."
          : "This job runs without a concurrency slot."}</div></div>`
      : html`<div class="card callout" id="concurrency"><div class="muted">Concurrency key</div><div class="big mono" data-testid="concurrency-key">${conc.value.key}</div>
<div>${conc.value.limit === 1 ? "Mutex" : "Semaphore"} · declared limit ${conc.value.limit} · mode ${conc.value.mode} · from the ${conc.source}</div>
${v.override === undefined
  ? frame.concurrency ? html`<div class="muted">No admin override: the declared limit applies.</div>` : ""
  : html`<div><strong>Admin override: ${slots(v.override.slots)}</strong> <span class="muted">(set ${time(v.override.updatedAt)}; wins over the declared limit at every pickup)</span></div>`}
${conc.value.total === undefined
  ? ""
  : html`<div data-testid="total-cap">Total cap: group <span class="mono">${conc.value.total.group}</span> · declared ${slots(conc.value.total.limit)}${v.groupOverride === undefined
      ? ""
      : html` · <strong>admin override: ${slots(v.groupOverride.slots)}</strong> <span class="muted">(set ${time(v.groupOverride.updatedAt)}${v.groupOverride.expiresAt === undefined ? "" : html`, until ${time(v.groupOverride.expiresAt)}`})</span>`}</div>`}
${conc.value.weight === undefined ? "" : html`<div data-testid="weight">Fair share: weight ${conc.value.weight} (served in proportion to it among the keys that wait)</div>`}</div>`
  const families = encoded === undefined ? [] : familyNames.filter((f) => encoded.policies[f] !== undefined)
  const policyTable =
    meta === undefined
      ? html`<div class="error">The metadata does not decode: ${Result.isFailure(decoded) ? decoded.failure : ""}</div><pre>${JSON.stringify(j.metadata, null, 2)}</pre>`
      : html`<p class="muted">${meta.stampedAt === undefined
          ? "Not stamped yet: a job shows its policy once its first attempt finishes. Entries below were passed at enqueue."
          : `Stamped ${time(new Date(meta.stampedAt))}: later attempts follow these values and never re-resolve. Global defaults are never stamped.`}</p>
${families.length === 0
  ? html`<div class="card muted">No policy entries.</div>`
  : html`<table><thead><tr><th>Family</th><th>Source</th><th>Value</th></tr></thead><tbody>${families.map(
      (f) => html`<tr><td>${f}</td><td>${badge(encoded!.policies[f]!.source)}</td><td class="mono">${describeValue(encoded!.policies[f]!.value)}</td></tr>`
    )}</tbody></table>`}`
  const now = v.now ?? new Date()
  const logs = TrailFold.fold(v.detail.logs).map((l) =>
    l._tag === "Entry"
      ? html`<tr><td class="nowrap" data-label="Time">${when(l.log.at, now)}</td><td data-label="Kind">${badge(l.log.kind)}</td><td class="wrap" data-label="Message">${l.log.message}</td></tr>`
      : html`<tr class="folded"><td class="nowrap" data-label="Time">${when(l.first, now)}</td><td data-label="Kind">${badge("Requeued")}</td><td class="wrap" data-label="Message"><strong>requeued ${l.count}× between ${time(l.first)} and ${time(l.last)}</strong>: ${l.message} <span class="muted">(${l.entries} entries folded)</span></td></tr>`
  )
  const d = durations(v.detail, now)
  return layout(
    frame,
    "jobs",
    `Job ${j.id}`,
    html`<div class="titlebar"><p><a href="${frame.prefix}/jobs">← All jobs</a></p>${refreshButton}</div><h1 class="wrap">${j.type} ${badge(j.state)}</h1><p class="lead mono wrap">${j.id}</p>
${flashBanner(v.flash)}${v.actions ?? ""}
<div class="grid2"><div class="card"><dl class="facts">
<dt>Type</dt><dd>${j.type}</dd><dt>Handler</dt><dd>${j.handler ?? "—"}</dd><dt>State</dt><dd>${j.state}</dd>${
  j.jobKey === undefined
    ? ""
    : html`<dt>Job key</dt><dd class="mono wrap" data-testid="job-key"><a href="${frame.prefix}/jobs?${new URLSearchParams({ type: j.type, jobKey: j.jobKey }).toString()}">${j.jobKey}</a></dd>`
}
<dt>Priority</dt><dd data-testid="priority">${j.priority}</dd>
<dt>Attempts</dt><dd>${j.attempt}</dd><dt>Scheduled for</dt><dd>${when(j.scheduleTime, now)}</dd><dt>Created</dt><dd>${when(j.createdAt, now)}</dd>
<dt>Updated</dt><dd>${when(j.updatedAt, now)}</dd><dt>Claimed by</dt><dd>${j.lockedBy ?? "—"}${j.leaseUntil === null ? "" : html` until ${when(j.leaseUntil, now)}`}</dd>
<dt>Queued</dt><dd data-testid="queued">${duration(d.queued)}</dd><dt>Running</dt><dd data-testid="running">${d.running === undefined ? "—" : duration(d.running)}</dd><dt>Total</dt><dd data-testid="total">${duration(d.total)}</dd>
</dl></div>${concurrencyCard}</div>${v.live ?? ""}
<h2>Policy (metadata)</h2>${policyTable}
<h2>Payload</h2><pre class="payload">${JSON.stringify(j.payload, null, 2)}</pre>
<h2>Audit trail</h2><table class="stack"><thead><tr><th>Time</th><th>Kind</th><th>Message</th></tr></thead><tbody>${logs}</tbody></table>`
  )
}

// ---- counters -------------------------------------------------------------------------------

/** Per-type counters from `stats:<counter>:<type>` keys. */
export interface TypeCounters {
  readonly type: string
  readonly succeeded: number
  readonly requeued: number
  readonly failed: number
  readonly deleted: number
  /** Enqueues that joined a job holding their job key (`stats:deduplicated`, since 1.1.0). */
  readonly deduplicated: number
  /** Enqueues that replaced the payload of a job holding their job key (`stats:replaced`, since 1.1.0). */
  readonly replaced: number
}

/** Groups counter keys by job type (`stats:<counter>:<type>`) and the global totals (`stats:<counter>`). */
export const groupCounters = (counters: ReadonlyMap<string, number>) => {
  const totals = { succeeded: 0, requeued: 0, failed: 0, deleted: 0, deduplicated: 0, replaced: 0 } as Record<string, number>
  const byType = new Map<string, Record<string, number>>()
  for (const [key, value] of counters) {
    const m = /^stats:([^:]+)(?::(.+))?$/.exec(key)
    if (m === null) continue
    const [, counter, type] = m
    if (type === undefined) totals[counter!] = value
    else {
      const row = byType.get(type) ?? {}
      row[counter!] = value
      byType.set(type, row)
    }
  }
  const types: Array<TypeCounters> = [...byType.entries()]
    .map(([type, r]) => ({
      type,
      succeeded: r.succeeded ?? 0,
      requeued: r.requeued ?? 0,
      failed: r.failed ?? 0,
      deleted: r.deleted ?? 0,
      deduplicated: r.deduplicated ?? 0,
      replaced: r.replaced ?? 0
    }))
    .sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0))
  return { totals, types }
}

/** The counters page: requeued vs succeeded per job type, as a chart and a table. */
export const countersPage = (frame: Frame, counters: ReadonlyMap<string, number>): Html => {
  const { totals, types } = groupCounters(counters)
  const stat = (k: string, label: string) => html`<div class="stat"><div class="v">${totals[k] ?? 0}</div><div class="k">${label}</div></div>`
  const chart = barChart(
    "Requeued vs succeeded per job type",
    [
      { name: "succeeded", className: "bar-succeeded" },
      { name: "requeued", className: "bar-requeued" }
    ],
    types.map((t) => ({ label: t.type, values: [t.succeeded, t.requeued] }))
  )
  const ratio = (t: TypeCounters) => (t.succeeded === 0 ? (t.requeued === 0 ? "—" : "∞") : (t.requeued / t.succeeded).toFixed(2))
  return layout(
    frame,
    "counters",
    "Counters",
    html`<h1>Counters</h1><p class="lead">Totals since the store was created. If requeued keeps outpacing succeeded for a job type, its concurrency slot count is too low: raise the limit (declared, at enqueue, or as an admin override) until the two even out.</p>
<div class="stats">${stat("succeeded", "succeeded")}${stat("requeued", "requeued")}${stat("failed", "failed")}${stat("deleted", "deleted")}${stat("deduplicated", "deduplicated")}${stat("replaced", "replaced")}</div>
${types.length === 0
  ? html`<div class="card muted">No job has finished an attempt yet.</div>`
  : html`<div class="card"><h2>Requeued vs succeeded per job type</h2>${chart}</div>
<table><thead><tr><th>Job type</th><th class="num">Succeeded</th><th class="num">Requeued</th><th class="num">Requeued / succeeded</th><th class="num">Failed</th><th class="num">Deleted</th><th class="num" title="enqueues that joined a job holding their job key">Deduplicated</th><th class="num" title="enqueues that replaced the payload of a job holding their job key">Replaced</th></tr></thead><tbody>${types.map(
      (t) => html`<tr${raw(t.requeued > t.succeeded ? ' class="hot" title="requeued outpaces succeeded"' : "")}><td>${t.type}</td><td class="num">${t.succeeded}</td><td class="num">${t.requeued}</td><td class="num">${ratio(t)}</td><td class="num">${t.failed}</td><td class="num">${t.deleted}</td><td class="num">${t.deduplicated}</td><td class="num">${t.replaced}</td></tr>`
    )}</tbody></table>`}`
  )
}

// ---- concurrency limits ---------------------------------------------------------------------

/** Data of the concurrency page. */
export interface ConcurrencyView {
  readonly limits: ReadonlyArray<ConcurrencyLimit>
  /** The admin overrides of total caps, by group. */
  readonly groups: ReadonlyArray<ConcurrencyGroupLimit>
  /** The CSRF token for forms, or undefined when this request may not write. */
  readonly token: string | undefined
  readonly fieldName: string
  readonly notice?: string | undefined
  readonly errors?: ReadonlyArray<FieldError> | undefined
  /** What the person typed into a create form (the key's, or the group's), shown again after an error. */
  readonly draft?: { readonly field: NameField; readonly key: string; readonly slots: string } | undefined
  /** The slot audit's warning (`AuditBanner.slotAuditBanner`), or nothing. */
  readonly audit?: Html | string | undefined
}

/** The concurrency limits page: every admin override (of keys, and of groups' total caps), with inline edit, delete and create. */
export const concurrencyPage = (frame: Frame, v: ConcurrencyView): Html => {
  const action = `${frame.prefix}/concurrency`
  const writable = v.token !== undefined
  const hidden = (act: string) => html`<input type="hidden" name="${v.fieldName}" value="${v.token}"><input type="hidden" name="action" value="${act}">`
  const invalid = (field: NameField | "slots", form: NameField) =>
    raw(v.draft?.field === form && v.errors?.some((e) => e.field === field) === true ? ' aria-invalid="true"' : "")
  /** The table of one kind of override: `field` names the form field ("key" or "group"), `suffix` its actions'. */
  const table = (field: NameField, overrides: ReadonlyArray<{ readonly name: string; readonly slots: number; readonly updatedAt: Date; readonly expiresAt?: Date | undefined }>) => {
    const label = labelOf(field)
    const suffix = field === "key" ? "" : "-group"
    const rows = overrides.map(
      (l) => html`<tr data-${field}="${l.name}"><td class="mono wrap" data-label="${label}" title="${l.name}">${l.name}</td>
<td>${writable
  ? html`<form class="inline" method="post" action="${action}">${hidden(`save${suffix}`)}<input type="hidden" name="${field}" value="${l.name}"><input type="number" name="slots" min="1" step="1" required value="${l.slots}" aria-label="Slots for ${l.name}"><button type="submit" class="secondary">Save</button></form>`
  : html`<span class="num">${l.slots}</span>`}</td>
<td class="nowrap" data-label="Updated">${time(l.updatedAt)}</td>
<td class="nowrap" data-label="Expires" data-testid="expires">${l.expiresAt === undefined ? "never" : time(l.expiresAt)}</td>
<td>${writable ? html`<form class="inline" method="post" action="${action}">${hidden(`delete${suffix}`)}<input type="hidden" name="${field}" value="${l.name}"><button type="submit" class="danger" aria-label="Delete ${l.name}">Delete</button></form>` : ""}</td></tr>`
    )
    return html`<table class="stack" data-overrides="${field}"><thead><tr><th>${label}</th><th>Slots</th><th>Updated</th><th>Expires</th><th></th></tr></thead><tbody>${rows}</tbody></table>`
  }
  const create = (field: NameField, title: string, placeholder: string, button: string) => {
    const draft = v.draft?.field === field ? v.draft : undefined
    return html`<h2>${title}</h2><div class="card"><form class="create" method="post" action="${action}" data-overrides="${field}">${hidden(field === "key" ? "save" : "save-group")}
<label>${labelOf(field)}<input type="text" class="key" name="${field}" required maxlength="${MAX_KEY_LENGTH}" placeholder="${placeholder}" value="${draft?.key ?? ""}"${invalid(field, field)}></label>
<label>Slots<input type="number" name="slots" min="1" step="1" required placeholder="10" value="${draft?.slots ?? ""}"${invalid("slots", field)}></label>
<button type="submit">${button}</button></form></div>`
  }
  return layout(
    frame,
    "concurrency",
    "Concurrency limits",
    html`<h1>Concurrency limits</h1><p class="lead">Admin overrides win over declared limits (admin row &gt; declared &gt; 1) from each job's next pickup, and survive redeploys until removed. <a href="${frame.prefix}/keys">Live keys: holders, waiting jobs and recent outcomes →</a></p>
${flashBanner(v.notice)}
${v.audit ?? ""}
${v.errors === undefined || v.errors.length === 0 ? "" : html`<div class="error" role="alert"><strong>Nothing was changed.</strong><ul>${v.errors.map((e) => html`<li>${labelOf(e.field)}: ${e.message}</li>`)}</ul></div>`}
${writable ? "" : html`<div class="readonly" role="note"><strong>Writes are disabled.</strong> This dashboard is read-only; the application enables changes through the dashboard's <code>authorize</code> option.</div>`}
${v.limits.length === 0
  ? html`<div class="card muted">No admin limits: every key runs with its declared limit.</div>`
  : table("key", v.limits.map((l) => ({ name: l.key, slots: l.slots, updatedAt: l.updatedAt, expiresAt: l.expiresAt })))}
${writable ? create("key", "Add or replace a limit", "payment-api", "Save limit") : ""}
<h2>Total caps by group</h2><p class="lead">A group's override wins over the <code>total: { group, limit }</code> its jobs declare, from each job's next pickup.</p>
${v.groups.length === 0
  ? html`<div class="card muted">No group overrides: every total cap runs with its declared limit.</div>`
  : table("group", v.groups.map((g) => ({ name: g.group, slots: g.slots, updatedAt: g.updatedAt, expiresAt: g.expiresAt })))}
${writable ? create("group", "Add or replace a group's total cap", "exports", "Save total cap") : ""}`
  )
}
