/**
 * Folds a job's audit trail for display: a run of Requeued entries with the same text — each usually
 * preceded by the claim that led to it ("Attempt n claimed by …") — becomes one line "requeued N×
 * between t1 and t2", instead of two rows per bounce.
 *
 * @since 0.3.0
 */
import type { JobLog } from "../job/Job.js"

/**
 * One line of a folded trail: an entry as stored, or a run of requeues.
 *
 * @since 0.3.0
 * @category models
 */
export type TrailLine =
  | { readonly _tag: "Entry"; readonly log: JobLog }
  | {
      readonly _tag: "Requeues"
      /** How many Requeued entries the run holds. */
      readonly count: number
      /** How many audit entries the line stands for (the requeues and the claims between them). */
      readonly entries: number
      /** The first and last requeue of the run. */
      readonly first: Date
      readonly last: Date
      readonly message: string
    }

const isClaim = (l: JobLog | undefined) => l !== undefined && (l.kind === "Processing" || l.kind === "Recovered")

/**
 * Folds runs of two or more Requeued entries with the same message (and the claims between them, and
 * the claim just before the first) into one line. Every other entry is kept, in order.
 *
 * @since 0.3.0
 * @category folding
 */
export const fold = (logs: ReadonlyArray<JobLog>): ReadonlyArray<TrailLine> => {
  const out: Array<TrailLine> = []
  let i = 0
  while (i < logs.length) {
    const l = logs[i]!
    if (l.kind !== "Requeued") {
      out.push({ _tag: "Entry", log: l })
      i++
      continue
    }
    let count = 1
    let last = l
    let j = i + 1
    while (j < logs.length) {
      const a = logs[j]!
      if (a.kind === "Requeued" && a.message === l.message) {
        count++
        last = a
        j++
      } else if (isClaim(a) && logs[j + 1]?.kind === "Requeued" && logs[j + 1]!.message === l.message) {
        count++
        last = logs[j + 1]!
        j += 2
      } else break
    }
    if (count < 2) {
      out.push({ _tag: "Entry", log: l })
      i++
      continue
    }
    let entries = j - i
    const before = out[out.length - 1]
    if (before?._tag === "Entry" && isClaim(before.log) && before.log === logs[i - 1]) {
      out.pop()
      entries++
    }
    out.push({ _tag: "Requeues", count, entries, first: l.at, last: last.at, message: l.message })
    i = j
  }
  return out
}
