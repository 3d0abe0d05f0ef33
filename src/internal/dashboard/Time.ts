/**
 * Times and durations for people: "3 min ago" with the absolute UTC time on hover, and the queued,
 * running and total durations of a job read from its audit trail.
 *
 * @since 0.3.0
 */
import type { JobDetail } from "../job/Job.js"
import { terminalStates } from "../job/JobState.js"
import { type Html, html } from "./Html.js"

/** Formats a time for display (UTC, seconds). */
export const absolute = (d: Date | null | undefined): string =>
  d === null || d === undefined || Number.isNaN(d.getTime()) ? "—" : `${d.toISOString().slice(0, 19).replace("T", " ")} UTC`

/** A duration in the largest two units that matter: "850 ms", "12 s", "4 min 5 s", "2 h 3 min", "3 d 4 h". */
export const duration = (ms: number): string => {
  const m = Math.max(0, Math.round(ms))
  if (m < 1000) return `${m} ms`
  const s = Math.floor(m / 1000)
  if (s < 60) return `${s} s`
  const min = Math.floor(s / 60)
  if (min < 60) return s % 60 === 0 ? `${min} min` : `${min} min ${s % 60} s`
  const h = Math.floor(min / 60)
  if (h < 24) return min % 60 === 0 ? `${h} h` : `${h} h ${min % 60} min`
  const d = Math.floor(h / 24)
  return h % 24 === 0 ? `${d} d` : `${d} d ${h % 24} h`
}

/** How long ago (or until) `d` is from `now`: "just now", "3 min ago", "in 2 h". */
export const relative = (d: Date, now: Date): string => {
  const diff = now.getTime() - d.getTime()
  if (Math.abs(diff) < 5000) return "just now"
  const text = duration(Math.abs(diff)).replace(/ \d+ (s|min|h)$/, "").replace(/^(\d+) ms$/, "$1 ms")
  return diff > 0 ? `${text} ago` : `in ${text}`
}

/** A `<time>` element: relative text, absolute UTC time on hover and in `datetime`. */
export const when = (d: Date | null | undefined, now: Date): Html | string =>
  d === null || d === undefined || Number.isNaN(d.getTime())
    ? "—"
    : html`<time datetime="${d.toISOString()}" title="${absolute(d)}">${relative(d, now)}</time>`

/** The durations of a job, from its trail: waiting in the queue, running its latest attempt, and overall. */
export interface Durations {
  /** From creation to the first claim (or to now, or to the end when never claimed). */
  readonly queued: number
  /** The latest attempt: from its claim to its end (or to now, while Processing); undefined if never claimed. */
  readonly running: number | undefined
  /** From creation to the end (a terminal state) or to now. */
  readonly total: number
}

/** Reads {@link Durations} from a job and its trail. */
export const durations = (detail: JobDetail, now: Date): Durations => {
  const { job, logs } = detail
  const created = job.createdAt.getTime()
  const done = terminalStates.includes(job.state)
  const end = done ? job.updatedAt.getTime() : now.getTime()
  const claims = logs.filter((l) => l.kind === "Processing" || l.kind === "Recovered")
  const firstClaim = claims[0]?.at.getTime()
  const lastClaim = claims.at(-1)
  let running: number | undefined
  if (lastClaim !== undefined) {
    const after = logs.slice(logs.indexOf(lastClaim) + 1)[0]
    running = (job.state === "Processing" ? now.getTime() : (after?.at.getTime() ?? end)) - lastClaim.at.getTime()
  }
  return { queued: (firstClaim ?? end) - created, running, total: end - created }
}
