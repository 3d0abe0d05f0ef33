/**
 * The slot-leak audit's warning: when the latest audit run recorded in the store
 * (`JobStoreService.slotAuditFindings`) found leaked slots or stuck holders, the concurrency, keys and
 * workers pages say what and when, above their content. No finding: no banner.
 *
 * @since 0.3.0
 */
import type { SlotAuditFinding } from "../store/JobStore.js"
import { type Html, html } from "./Html.js"
import type { Frame } from "./Pages.js"
import { when } from "./Time.js"

/** Findings listed one by one; the rest are counted. */
export const MAX_LISTED = 20

const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`

const item = (frame: Frame, f: SlotAuditFinding): Html =>
  f.kind === "LeakedSlot"
    ? html`<li><strong>Leaked slot${f.slot === undefined ? "" : ` ${f.slot}`}</strong> of '<span class="mono wrap" title="${f.key}">${f.key}</span>': ${f.detail}</li>`
    : html`<li><strong>Stuck holder</strong> of '<span class="mono wrap" title="${f.key}">${f.key}</span>'${
        f.jobId === undefined
          ? ""
          : html`: job <a class="mono wrap" href="${frame.prefix}/jobs/${encodeURIComponent(f.jobId)}" title="${f.jobId}">${f.jobId}</a>`
      } — ${f.detail}</li>`

/** The warning banner for the latest audit's findings, or nothing when there are none. */
export const slotAuditBanner = (frame: Frame, findings: ReadonlyArray<SlotAuditFinding>, now: Date): Html | string => {
  if (findings.length === 0) return ""
  const leaked = findings.filter((f) => f.kind === "LeakedSlot").length
  const stuck = findings.length - leaked
  const at = new Date(Math.max(...findings.map((f) => f.foundAt.getTime())))
  const what = [leaked > 0 ? count(leaked, "leaked slot", "leaked slots") : "", stuck > 0 ? count(stuck, "stuck holder", "stuck holders") : ""]
    .filter((s) => s !== "")
    .join(" and ")
  const rest = findings.length - MAX_LISTED
  return html`<div class="warning" role="alert" data-testid="slot-audit"><strong>Slot audit found ${what}</strong> (latest run, ${when(at, now)}).
<ul>${findings.slice(0, MAX_LISTED).map((f) => item(frame, f))}${rest > 0 ? html`<li>and ${rest} more</li>` : ""}</ul>
<p class="muted">A leaked slot is held by a database session with no running job of its key, so the key runs with fewer slots; a stuck holder's lease expired while its slot is still held (its job is recovered once the lease has run out). The audit's <code>terminateStale</code> option ends a leaked slot's idle session.</p></div>`
}
