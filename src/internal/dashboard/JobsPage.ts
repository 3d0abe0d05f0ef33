/**
 * The jobs list: search and filters carried in the URL, state tabs with counts, bulk actions (behind
 * a confirmation) for operators allowed to write, relative times and a pager that tells the truth.
 *
 * @since 0.3.0
 */
import type { Job } from "../job/Job.js"
import { JobState } from "../job/JobState.js"
import type { OperatorAction } from "../store/JobStore.js"
import * as Actions from "./Actions.js"
import * as Filters from "./Filters.js"
import { type Html, html, raw } from "./Html.js"
import { badge, flashBanner, type Frame, layout, refreshButton } from "./Pages.js"
import { when } from "./Time.js"

/** Data of the jobs list. */
export interface JobsView {
  readonly filters: Filters.Filters
  readonly page: number
  readonly pageSize: number
  readonly rows: ReadonlyArray<Job>
  readonly total: number
  readonly counts: Readonly<Record<JobState, number>>
  readonly now: Date
  /** Whether this request may write (shows the bulk actions). */
  readonly writable: boolean
  readonly flash?: string | undefined
}

/** The text of the pager: where this page is, and what is true when it is past the end. */
export const pagerText = (page: number, pageSize: number, total: number): string => {
  const pages = Math.max(1, Math.ceil(total / pageSize))
  if (total === 0) return "no jobs"
  if (page > pages) return `page ${page} of ${pages} — no jobs on this page`
  const from = (page - 1) * pageSize + 1
  const to = Math.min(total, page * pageSize)
  return `${from}–${to} of ${total} · page ${page} of ${pages}`
}

/** The filter form: id (exact), key (prefix), type, job key (exact), state, created after/before, priority (at least); a GET, so the URL carries it. */
const filterForm = (frame: Frame, f: Filters.Filters): Html => {
  const value = (v: string | undefined) => v ?? ""
  return html`<form class="filters card" method="get" action="${frame.prefix}/jobs" role="search" aria-label="Filter jobs">
<label>Id<input type="text" name="id" maxlength="${Filters.MAX_FIELD_LENGTH}" value="${value(f.id)}" placeholder="exact id"></label>
<label>Concurrency key<input type="text" name="key" maxlength="${Filters.MAX_FIELD_LENGTH}" value="${value(f.key)}" placeholder="starts with"></label>
<label>Type<input type="text" name="type" maxlength="${Filters.MAX_FIELD_LENGTH}" value="${value(f.type)}" placeholder="exact type"></label>
<label>Job key<input type="text" name="jobKey" maxlength="${Filters.MAX_FIELD_LENGTH}" value="${value(f.jobKey)}" placeholder="exact job key"></label>
<label>State<select name="state"><option value="">any</option>${JobState.literals.map(
    (s) => html`<option value="${s}"${raw(s === f.state ? " selected" : "")}>${s}</option>`
  )}</select></label>
<label>Created after<input type="text" name="after" value="${f.after === undefined ? "" : Filters.formatTime(f.after)}" placeholder="2026-12-05T10:30"></label>
<label>Created before<input type="text" name="before" value="${f.before === undefined ? "" : Filters.formatTime(f.before)}" placeholder="UTC"></label>
<label>Priority at least<input type="text" inputmode="numeric" name="priority" value="${f.priority === undefined ? "" : String(f.priority)}" placeholder="e.g. 5"></label>
<div class="buttons"><button type="submit">Search</button>${Filters.isFiltered(f) ? html`<a href="${frame.prefix}/jobs">Clear</a>` : ""}</div></form>`
}

/** The bulk actions: links to the confirmation page of each action for the current filters. */
const bulkActions = (frame: Frame, f: Filters.Filters): Html => {
  const link = (action: OperatorAction) =>
    html`<a class="button secondary" href="${frame.prefix}/bulk?${Filters.toParams(f, { action }).toString()}">${Actions.label[action]} all matching…</a>`
  return html`<div class="bulk" aria-label="Bulk actions"><span class="muted">On every job this filter matches (at most ${Actions.maxBulk} a time, after a confirmation):</span> ${(["retry", "requeue", "delete"] as const).map(link)}</div>`
}

/** The jobs list, newest first, with filters, paging and (for writers) bulk actions. */
export const render = (frame: Frame, v: JobsView): Html => {
  const all = Object.values(v.counts).reduce((a, b) => a + b, 0)
  const tab = (state: JobState | undefined, label: string, n: number) =>
    html`<a href="${Filters.href(frame.prefix, { ...v.filters, state })}"${raw(state === v.filters.state ? ' class="active" aria-current="page"' : "")}>${label}<span class="n">${n}</span></a>`
  const pages = Math.max(1, Math.ceil(v.total / v.pageSize))
  const rows = v.rows.map(
    (j) => html`<tr><td class="mono clip" data-label="Id"><a href="${frame.prefix}/jobs/${encodeURIComponent(j.id)}" title="${j.id}">${j.id}</a></td><td class="wrap" data-label="Type">${j.type}${j.handler === null ? "" : html` <span class="muted">→ ${j.handler}</span>`}${
      j.jobKey === undefined ? "" : html` <span class="muted mono" data-testid="job-key" title="job key">key ${j.jobKey}</span>`
    }</td><td data-label="State">${badge(j.state)}</td><td class="num" data-label="Priority">${j.priority}</td><td class="num" data-label="Attempts">${j.attempt}</td><td class="nowrap" data-label="Scheduled for">${when(j.scheduleTime, v.now)}</td><td class="nowrap" data-label="Created">${when(j.createdAt, v.now)}</td><td class="nowrap" data-label="Updated">${when(j.updatedAt, v.now)}</td></tr>`
  )
  const prev =
    v.page > 1 ? html`<a href="${Filters.href(frame.prefix, v.filters, Math.min(v.page - 1, pages))}" rel="prev">← Newer</a>` : html`<span class="off">← Newer</span>`
  const next = v.page < pages ? html`<a href="${Filters.href(frame.prefix, v.filters, v.page + 1)}" rel="next">Older →</a>` : html`<span class="off">Older →</span>`
  const beyond = v.page > pages && v.total > 0
  const filtered = Filters.isFiltered(v.filters)
  return layout(
    frame,
    "jobs",
    v.filters.state === undefined ? "Jobs" : `${v.filters.state} jobs`,
    html`<div class="titlebar"><h1>Jobs</h1>${refreshButton}</div><p class="lead">Newest first. Open a job to see its payload, its audit trail and the policy it follows.</p>
${flashBanner(v.flash)}
<nav class="tabs" aria-label="States">${tab(undefined, "All", all)}${JobState.literals.map((s) => tab(s, s, v.counts[s]))}</nav>
${filterForm(frame, v.filters)}
${v.writable && v.total > 0 ? bulkActions(frame, v.filters) : ""}
${v.rows.length === 0
  ? html`<div class="card muted">${beyond
      ? html`No jobs on page ${v.page}: the last page is ${pages}. <a href="${Filters.href(frame.prefix, v.filters, pages)}">Go to page ${pages}</a>.`
      : html`No ${v.filters.state === undefined ? "" : `${v.filters.state.toLowerCase()} `}jobs${filtered ? " match these filters" : ""}.`}</div>`
  : html`<table class="stack"><thead><tr><th>Id</th><th>Type</th><th>State</th><th class="num">Priority</th><th class="num">Attempts</th><th>Scheduled for</th><th>Created</th><th>Updated</th></tr></thead><tbody>${rows}</tbody></table>`}
<div class="pager">${prev}<span data-testid="pager">${pagerText(v.page, v.pageSize, v.total)}</span>${next}</div>`
  )
}
