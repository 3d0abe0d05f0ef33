/**
 * Wake-up hints: what a store tells idle workers of due work, so they need not wait for their next poll
 * (instant pickup). A hint is only a hint: a worker that acts on one still claims through `fetch`, a
 * hint that comes for nothing costs one empty claim, and the poll stays the fallback for any hint lost.
 *
 * The PostgreSQL store carries them as `NOTIFY` on {@link channel} ({@link encode} / {@link decode} the
 * payload); the memory store publishes them in-process.
 *
 * @since 1.1.0
 */

/**
 * - `Due`: `count` rows became due now (an insert of Enqueued rows); `priority`: the highest priority
 *   among them when it is not the default 0 (a busy worker may then claim them ahead of rows it holds);
 * - `Future`: a row comes due in `inMs` milliseconds (an insert of a Scheduled row; the earliest of one
 *   insert's);
 * - `Freed`: a finalizing write freed a slot of concurrency key `key` (undefined: a key too long to carry)
 *   and due jobs of that key are waiting;
 * - `Connected`: the store's listener (re)connected: hints may have been missed meanwhile.
 */
export type Wakeup =
  | { readonly _tag: "Due"; readonly count: number; readonly priority?: number | undefined }
  | { readonly _tag: "Future"; readonly inMs: number }
  | { readonly _tag: "Freed"; readonly key: string | undefined }
  | { readonly _tag: "Connected" }

/** The `NOTIFY` channel of the PostgreSQL store. */
export const channel = "warp_jobs"

/** Longest key carried in a `Freed` payload (a `NOTIFY` payload holds less than 8000 bytes). */
const MAX_KEY = 2000

/**
 * The payload of one insert statement's notification: `d{n}` (n due rows; `d{n}p{priority}` when the
 * highest priority among them is not 0), `@{epoch ms}` (the earliest Scheduled row), or both
 * (`d{n}@{ms}`); undefined when there is nothing to tell.
 */
export const insertPayload = (due: number, earliest: number | undefined, priority = 0): string | undefined =>
  due === 0 && earliest === undefined
    ? undefined
    : `${due > 0 ? `d${due}${priority !== 0 ? `p${priority}` : ""}` : ""}${earliest === undefined ? "" : `@${earliest}`}`

/** The `Due` hint of `count` rows whose highest priority is `priority` (left out when it is the default 0). */
export const due = (count: number, priority: number | undefined): Wakeup =>
  priority === undefined || priority === 0 ? { _tag: "Due", count } : { _tag: "Due", count, priority }

/** The payload of a `Freed` hint for `key`: `f{key}` (`f` alone for a key too long to carry). */
export const freedPayload = (key: string): string => (key.length > MAX_KEY ? "f" : `f${key}`)

/**
 * What an insert of `rows` tells (at `now`, epoch ms): how many are due now and the highest priority
 * among those (undefined when none is due), and the earliest time of the others.
 */
export const insertSummary = (
  rows: ReadonlyArray<{ readonly state: string; readonly scheduleTime: Date; readonly priority?: number | undefined }>,
  now: number
): { readonly due: number; readonly earliest: number | undefined; readonly priority: number | undefined } => {
  let due = 0
  let earliest: number | undefined
  let priority: number | undefined
  for (const r of rows) {
    const at = r.scheduleTime.getTime()
    if (r.state === "Enqueued" || at <= now) {
      due++
      const p = r.priority ?? 0
      if (priority === undefined || p > priority) priority = p
    } else if (earliest === undefined || at < earliest) earliest = at
  }
  return { due, earliest, priority }
}

const INSERT = /^(?:d(\d+)(?:p(-?\d+))?)?(?:@(\d+))?$/

/** The hints of a payload (at `now`, epoch ms, for a Scheduled row's time); none for a payload it does not know. */
export const decode = (payload: string, now: number): ReadonlyArray<Wakeup> => {
  if (payload.startsWith("f")) return [{ _tag: "Freed", key: payload.length > 1 ? payload.slice(1) : undefined }]
  const m = INSERT.exec(payload)
  if (m === null) return []
  const out: Array<Wakeup> = []
  if (m[1] !== undefined) out.push(due(Number(m[1]), m[2] === undefined ? undefined : Number(m[2])))
  if (m[3] !== undefined) out.push({ _tag: "Future", inMs: Math.max(0, Number(m[3]) - now) })
  return out
}
