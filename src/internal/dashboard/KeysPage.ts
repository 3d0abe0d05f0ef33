/**
 * The live view of concurrency keys (`/keys`), and the key line of a job's detail page: what holds a
 * key's slots, what waits for them and for how long, and what the key's jobs did over the last 5
 * minutes, hour and day, with a small inline SVG chart per key (presentation attributes, no `style`:
 * the page's CSP allows only its stylesheet).
 *
 * @since 0.3.0
 */
import type { Job } from "../job/Job.js"
import { effectiveLimit, type KeyHolder, type KeyLine, type KeySummary, windows } from "../store/KeyInsight.js"
import { type Html, html } from "./Html.js"
import { type Frame, layout, refreshButton, time } from "./Pages.js"

/**
 * Data of the live view.
 *
 * @since 0.3.0
 * @category models
 */
export interface KeysView {
  readonly rows: ReadonlyArray<KeySummary>
  readonly total: number
  readonly page: number
  readonly pageSize: number
  /** The reading time (ages are computed from it). */
  readonly now: Date
  /** When the keys' order was computed, when the store reused an earlier ranking (`KeyPage.rankedAt`). */
  readonly rankedAt?: Date | undefined
  /** The slot audit's warning (`AuditBanner.slotAuditBanner`), or nothing. */
  readonly audit?: Html | string | undefined
}

/**
 * A duration for people: "45s", "3m 12s", "2h 5m", "3d 4h".
 *
 * @since 0.3.0
 * @category rendering
 */
export const age = (ms: number): string => {
  const s = Math.max(0, Math.floor(ms / 1000))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`
  return `${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3600)}h`
}

const jobHref = (frame: Frame, id: string) => `${frame.prefix}/jobs/${encodeURIComponent(id)}`

const holderLink = (frame: Frame, h: KeyHolder) => html`<a class="mono" href="${jobHref(frame, h.id)}">${h.id}</a>`

/** "2 / 5 admin": slots in use, the limit and where it comes from. */
const inUse = (s: KeySummary) => {
  const e = effectiveLimit(s)
  const declared =
    s.declared === null ? "" : s.declared.min === s.declared.max ? `declared ${s.declared.max}` : `declared ${s.declared.min}–${s.declared.max}`
  return html`<span class="nowrap"><strong>${s.running} / ${e.limit}</strong> <span class="badge">${e.source}</span></span>${
    e.source === "admin" && declared !== "" ? html`<div class="muted">${declared} on the rows</div>` : ""
  }`
}

const series = [
  { name: "requeued", fill: "#dd8b1f" },
  { name: "succeeded", fill: "#38a169" },
  { name: "deleted", fill: "#718096" }
] as const

/**
 * A small grouped bar chart of a key's requeued / succeeded / deleted counts per window, each window
 * scaled to its own largest count (the numbers are in the title and the table next to it).
 *
 * @since 0.3.0
 * @category rendering
 */
export const miniChart = (s: KeySummary): Html => {
  const bar = 7
  const groupWidth = series.length * bar + 10
  const height = 30
  const groups = windows.map((w, g) => {
    const c = s.windows[w.name]
    const values = [c.requeued, c.succeeded, c.deleted]
    const max = Math.max(1, ...values)
    return html`<g>${values.map((v, i) => {
      const h = v === 0 ? 0 : Math.max(2, Math.round((v / max) * height))
      return html`<rect x="${g * groupWidth + i * bar}" y="${height - h}" width="${bar - 1}" height="${h}" fill="${series[i]!.fill}"><title>${series[i]!.name} in ${w.name}: ${v}</title></rect>`
    })}<text x="${g * groupWidth}" y="${height + 11}" font-size="9" fill="#5f6b7d">${w.name}</text></g>`
  })
  const label = windows.map((w) => `${w.name}: ${s.windows[w.name].requeued} requeued, ${s.windows[w.name].succeeded} succeeded, ${s.windows[w.name].deleted} deleted`).join("; ")
  return html`<svg class="mini" role="img" aria-label="${label}" width="${windows.length * groupWidth}" height="${height + 13}" viewBox="0 0 ${windows.length * groupWidth} ${height + 13}" xmlns="http://www.w3.org/2000/svg"><line x1="0" x2="${windows.length * groupWidth}" y1="${height + 0.5}" y2="${height + 0.5}" stroke="#e3e7ee"/>${groups}</svg>`
}

const countsCell = (s: KeySummary) =>
  windows.map(
    (w) => html`<div class="nowrap" data-window="${w.name}">${w.name}: ${s.windows[w.name].requeued} · ${s.windows[w.name].succeeded} · ${s.windows[w.name].deleted}</div>`
  )

const keysHref = (frame: Frame, page: number) => `${frame.prefix}/keys${page > 1 ? `?page=${page}` : ""}`

/**
 * The live view: every key with jobs running or waiting (or an admin override), by pressure.
 *
 * @since 0.3.0
 * @category rendering
 */
export const keysPage = (frame: Frame, v: KeysView): Html => {
  const pages = Math.max(1, Math.ceil(v.total / v.pageSize))
  const from = v.total === 0 ? 0 : (v.page - 1) * v.pageSize + 1
  const to = Math.min(v.total, (v.page - 1) * v.pageSize + v.rows.length)
  const rows = v.rows.map((s) => {
    const more = s.running - s.holders.length
    return html`<tr data-key="${s.key}"><td class="mono wrap" data-label="Key">${s.key}</td><td data-label="In use / limit">${inUse(s)}</td>
<td class="num" data-label="Waiting" data-testid="waiting">${s.waiting}</td>
<td class="nowrap" data-label="Oldest wait">${s.waitingSince === null ? "—" : html`<span title="since ${time(s.waitingSince)}">${age(v.now.getTime() - s.waitingSince.getTime())}</span>`}</td>
<td class="wrap" data-label="Holders">${s.holders.length === 0
  ? html`<span class="muted">none</span>`
  : html`<ul class="holders">${s.holders.map(
      (h) => html`<li>${holderLink(frame, h)} <span>${h.type}</span> <span class="muted">on ${h.workerId ?? "—"} since ${time(h.since)}</span></li>`
    )}${more > 0 ? html`<li class="muted">and ${more} more</li>` : ""}</ul>`}</td>
<td data-label="Outcomes">${miniChart(s)}</td><td data-label="5 min / 1 h / 24 h">${countsCell(s)}</td></tr>`
  })
  const prev = v.page > 1 ? html`<a href="${keysHref(frame, v.page - 1)}" rel="prev">← Higher pressure</a>` : html`<span class="off">← Higher pressure</span>`
  const next = v.page < pages ? html`<a href="${keysHref(frame, v.page + 1)}" rel="next">Lower pressure →</a>` : html`<span class="off">Lower pressure →</span>`
  return layout(
    frame,
    "concurrency",
    "Concurrency keys",
    html`<div class="titlebar"><p><a href="${frame.prefix}/concurrency">← Admin limits</a></p>${refreshButton}</div><h1>Concurrency keys</h1>
<p class="lead">Every key with jobs running or waiting, and every admin override, by pressure (jobs waiting × age of the oldest wait). A key shows once a row carries it (set at enqueue, or stamped by a finished attempt), or once a worker reports a running first attempt that resolved it from the handler or contract (within moments of its start). Read ${time(v.now)}${
    v.rankedAt === undefined ? "" : html`; the order was computed ${time(v.rankedAt)} (with many live keys it is reused for a few seconds), the figures are read now`
  }.</p>
${v.audit ?? ""}
${v.rows.length === 0
  ? html`<div class="card muted">No live key${v.page > 1 ? " on this page" : ""}.</div>`
  : html`<table class="keys"><thead><tr><th>Key</th><th>In use / limit</th><th class="num">Waiting</th><th>Oldest wait</th><th>Holders</th><th>5m / 1h / 24h</th><th>Requeued · succeeded · deleted</th></tr></thead><tbody>${rows}</tbody></table>`}
<div class="pager">${prev}<span>${from}–${to} of ${v.total} · page ${v.page} of ${pages}</span>${next}</div>`
  )
}

/**
 * The live part of the concurrency card of a running job whose row does not carry its key yet: the key
 * its worker reported (resolved from the handler or contract in this first attempt), and the key's
 * slots in use.
 *
 * @since 0.3.0
 * @category rendering
 */
export const reportedCard = (
  job: Job,
  reported: { readonly key: string; readonly limit: number; readonly source: string },
  reportedAt: Date,
  line: KeyLine
): Html =>
  html`<div class="card wrap" id="key-line" data-testid="key-line"><div>Holding a slot of '<span class="mono">${reported.key}</span>' since ${time(job.updatedAt)}: ${line.summary.running} of ${reported.limit} slots in use <span class="muted">(limit ${reported.limit}, declared on the ${reported.source})</span>.</div>
<div class="muted">As its worker reported ${time(reportedAt)}: the key was resolved from the handler or contract in this attempt, and reaches the row with its finalizing write. ${line.summary.waiting} waiting.</div></div>`

/**
 * The live part of a job's concurrency card: for a waiting job, who holds its key's slots and its
 * place in line; for a running one, the key's slots in use.
 *
 * @since 0.3.0
 * @category rendering
 */
export const lineCard = (frame: Frame, job: Job, line: KeyLine): Html => {
  const s = line.summary
  const e = effectiveLimit(s)
  const source = html`<span class="muted">(limit ${e.limit}, ${e.source === "admin" ? "admin override" : e.source === "declared" ? "declared on the rows" : "default"})</span>`
  const holders =
    s.holders.length === 0
      ? html`<span class="muted">no job that carries the key</span>`
      : html`${s.holders.map((h, i) => html`${i === 0 ? "" : ", "}${holderLink(frame, h)}`)}${s.running > s.holders.length ? html` and ${s.running - s.holders.length} more` : ""}`
  if (job.state === "Processing") {
    return html`<div class="card wrap" id="key-line" data-testid="key-line"><div>Holding a slot of '<span class="mono">${s.key}</span>' since ${time(job.updatedAt)}: ${s.running} of ${e.limit} slots in use ${source}.</div>
<div class="muted">${s.waiting} waiting.</div></div>`
  }
  return html`<div class="card wrap" id="key-line" data-testid="key-line"><div>Waiting for '<span class="mono">${s.key}</span>': ${s.running} of ${e.limit} slots held by ${holders}, position ~${line.ahead} ${source}.</div>
<div class="muted">${line.ahead} waiting row${line.ahead === 1 ? "" : "s"} of the key ahead of it by schedule time; ${s.waiting} due in all.</div></div>`
}
