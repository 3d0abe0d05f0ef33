/**
 * The workers page: every worker in the store's registry — its process, lanes, the jobs it holds, the
 * concurrency slots its running handlers hold per key, the PostgreSQL connections its process has
 * open ("—" when the store cannot tell), when it was last heard from, and its last outage of the store. A worker not heard from for three heartbeats is flagged stale: it stopped
 * without deregistering (killed), or it cannot reach the database (its jobs' leases then run out and
 * other workers recover them).
 *
 * @since 0.3.0
 */
import type { WorkerInfo } from "../store/JobStore.js"
import { type Html, html } from "./Html.js"
import { type Frame, layout, refreshButton, time } from "./Pages.js"

/** Heartbeats a worker may miss before the page flags it stale. */
export const STALE_HEARTBEATS = 3

/** Whether a worker has been silent for more than {@link STALE_HEARTBEATS} heartbeats. */
export const isStale = (w: WorkerInfo): boolean => w.silentMs > STALE_HEARTBEATS * w.heartbeatMs

/** A duration in words: "850 ms", "12.3 s", "4 min 05 s", "2 h 07 min". */
export const duration = (ms: number): string => {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`
  const s = Math.floor(ms / 1000)
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`

const row = (frame: Frame, w: WorkerInfo): Html => {
  const stale = isStale(w)
  const slots =
    w.slots.length === 0
      ? html`<span class="muted">none</span>`
      : w.slots.map(
          (s) =>
            html`<div class="wrap"><a href="${frame.prefix}/jobs?state=Processing&amp;key=${encodeURIComponent(s.key)}" title="${s.key}">${s.key}</a> × ${s.held}</div>`
        )
  return html`<tr${stale ? html` class="hot"` : ""}>
<td data-label="Worker"><span class="mono wrap" title="${w.workerId}">${w.workerId}</span><div class="muted">${w.host} · pid ${w.pid}</div></td>
<td data-label="Lanes" class="num">${w.lanes}</td>
<td data-label="Jobs held" class="num">${w.holding}</td>
<td data-label="Slots held">${slots}</td>
<td data-label="PG connections" class="num" data-testid="connections">${
    w.connections === undefined
      ? html`<span class="muted" title="Not known: the store is not PostgreSQL, or the worker's connections carry no application_name of their own (Database.layer sets one)">—</span>`
      : w.connections
  }</td>
<td data-label="Last heard">${
    stale
      ? html`<span class="badge s-Failed">stale</span> ${duration(w.silentMs)} ago<div class="muted">stopped without deregistering, or cut off from the database</div>`
      : html`<span class="badge s-Succeeded">live</span> ${duration(w.silentMs)} ago`
  }<div class="muted">heartbeat every ${duration(w.heartbeatMs)}</div></td>
<td data-label="Started"><span title="${time(w.startedAt)}">${time(w.startedAt)}</span></td>
<td data-label="Last store outage">${
    w.lastOutage === undefined
      ? html`<span class="muted">none</span>`
      : html`${duration(w.lastOutage.ms)}<div class="muted">ended ${time(w.lastOutage.endedAt)}</div>`
  }</td>
</tr>`
}

/** The workers page, with the slot audit's warning (`AuditBanner.slotAuditBanner`) when there is one. */
export const workersPage = (frame: Frame, workers: ReadonlyArray<WorkerInfo>, audit: Html | string = ""): Html => {
  const stale = workers.filter(isStale).length
  const body = html`<div class="titlebar"><h1>Workers</h1>${refreshButton}</div>
<p class="lead">${plural(workers.length, "worker", "workers")} registered${
    stale > 0 ? html` · <strong>${plural(stale, "stale worker", "stale workers")}</strong>` : ""
  }. Each worker reports with its heartbeat; one not heard from for ${STALE_HEARTBEATS} heartbeats is stale.</p>
${audit}
${
  workers.length === 0
    ? html`<div class="card"><p class="muted">No worker is running (or none has reported yet).</p></div>`
    : html`<table class="stack"><thead><tr><th>Worker</th><th class="num">Lanes</th><th class="num">Jobs held</th><th>Slots held</th><th class="num">PG connections</th><th>Last heard</th><th>Started</th><th>Last store outage</th></tr></thead>
<tbody>${workers.map((w) => row(frame, w))}</tbody></table>`
}`
  return layout(frame, "workers", "Workers", body)
}
