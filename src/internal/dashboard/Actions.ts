/**
 * The operator's actions on jobs: retry, delete and requeue one job from its page, or every job a
 * filter matches after a confirmation that shows the count ("Retry 37 jobs?"). Every write is a POST
 * behind the CSRF token and the app's `authorize` hook. A running (Processing) job has one action,
 * Cancel: its worker interrupts the handler (finalizers run, the slot is freed by the attempt's scope)
 * and it ends Deleted (`JobStoreService.requestCancel`).
 *
 * @since 0.3.0
 */
import * as Schema from "effect/Schema"
import type { Job } from "../job/Job.js"
import { operatorFrom, type OperatorAction } from "../store/JobStore.js"
import * as Filters from "./Filters.js"
import { type Html, html } from "./Html.js"
import { type Frame, layout } from "./Pages.js"

/** The most jobs one bulk request changes; the page says so, and the operator repeats for more. */
export const maxBulk = 100

/** The actions, as form values. */
export const Action = Schema.Literals(["retry", "delete", "requeue"])

/** Whether a form value names an action. */
export const isAction = Schema.is(Action)

/** Button labels. */
export const label: Readonly<Record<OperatorAction, string>> = { retry: "Retry", delete: "Delete", requeue: "Requeue now" }

/** Past tense for flash messages. */
const done: Readonly<Record<OperatorAction, string>> = { retry: "Retried", delete: "Deleted", requeue: "Requeued" }

/** "1 job" / "N jobs". */
export const jobs = (n: number): string => (n === 1 ? "1 job" : `${n} jobs`)

/** The actions that apply to a job in its state (none while Processing). */
export const applicable = (job: Job): ReadonlyArray<OperatorAction> =>
  (["retry", "requeue", "delete"] as const).filter((a) => operatorFrom[a].includes(job.state))

/** The flash message after a write. */
export const summary = (action: OperatorAction, changed: number, skipped: number): string =>
  `${done[action]} ${jobs(changed)}.${skipped === 0 ? "" : ` ${jobs(skipped)} skipped (no longer in a state this action applies to).`}`

/** The longest cancel reason accepted (it goes into the audit trail). */
export const MAX_REASON_LENGTH = 500

/** The Cancel form of a running job: a reason (optional) and the button. */
const cancelForm = (frame: Frame, job: Job, token: string, fieldName: string): Html =>
  html`<div class="actions" aria-label="Actions"><form class="inline" method="post" action="${frame.prefix}/actions"><input type="hidden" name="${fieldName}" value="${token}"><input type="hidden" name="action" value="cancel"><input type="hidden" name="id" value="${job.id}"><input type="text" name="reason" maxlength="${MAX_REASON_LENGTH}" placeholder="Reason (optional)" aria-label="Reason"><button type="submit" class="danger">Cancel (interrupt)</button></form></div>`

/** The flash message after a cancel. */
export const cancelSummary = (result: "Cancelled" | "Cancelling"): string =>
  result === "Cancelled"
    ? "Cancelled: the job was waiting and is Deleted now."
    : "Cancel asked: the worker running this job interrupts it within its cancel check interval (1 s by default); its slot is freed once the handler has stopped, and the job ends Deleted."

/** The action buttons of one job (for a request that may write). */
export const jobButtons = (frame: Frame, job: Job, token: string, fieldName: string): Html => {
  if (job.state === "Processing") return cancelForm(frame, job, token, fieldName)
  const actions = applicable(job)
  if (actions.length === 0) return html``
  return html`<div class="actions" aria-label="Actions">${actions.map(
    (a) => html`<form class="inline" method="post" action="${frame.prefix}/actions"><input type="hidden" name="${fieldName}" value="${token}"><input type="hidden" name="action" value="${a}"><input type="hidden" name="id" value="${job.id}"><button type="submit" class="${a === "delete" ? "danger" : a === "retry" ? "" : "secondary"}">${label[a]}</button></form>`
  )}</div>`
}

/** Data of the bulk confirmation page. */
export interface ConfirmView {
  readonly action: OperatorAction
  readonly filters: Filters.Filters
  /** Jobs the filter matches in a state the action applies to. */
  readonly eligible: number
  readonly token: string
  readonly fieldName: string
}

/** The confirmation step of a bulk action: the count, and a POST form carrying the filters. */
export const confirmPage = (frame: Frame, v: ConfirmView): Html => {
  const n = Math.min(v.eligible, maxBulk)
  const back = Filters.href(frame.prefix, v.filters)
  const title = v.eligible === 0 ? `Nothing to ${label[v.action].toLowerCase()}` : `${label[v.action]} ${jobs(n)}?`
  const hidden = [...Filters.toParams(v.filters)].map(([k, val]) => html`<input type="hidden" name="${k}" value="${val}">`)
  return layout(
    frame,
    "jobs",
    title,
    html`<h1>${title}</h1><p class="lead wrap" data-testid="filter">Jobs where ${Filters.describe(v.filters)}</p><div class="card">${v.eligible === 0
      ? html`<p>No job this filter matches is in a state this action applies to (${operatorFrom[v.action].join(", ")}). Nothing was changed.</p><p><a href="${back}">Back to the list</a></p>`
      : html`<p>${v.eligible > maxBulk
          ? `${v.eligible} jobs match in a state this action applies to (${operatorFrom[v.action].join(", ")}); one request changes at most ${maxBulk}, the newest first. Repeat for the rest.`
          : `This changes every job the filter matches in a state this action applies to (${operatorFrom[v.action].join(", ")}).`} Jobs that are running are never touched.</p>
<form class="inline" method="post" action="${frame.prefix}/bulk" data-confirm><input type="hidden" name="${v.fieldName}" value="${v.token}"><input type="hidden" name="action" value="${v.action}">${hidden}<button type="submit" class="${v.action === "delete" ? "danger" : ""}">${label[v.action]} ${jobs(n)}</button> <a href="${back}">Cancel</a></form>`}</div>`
  )
}
