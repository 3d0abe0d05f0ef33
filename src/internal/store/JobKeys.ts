/**
 * Job keys at insert, shared by both stores: the rows of one insert that carry the same job key (per job
 * type) resolve in order, so each store writes one effective row per key ({@link groupKeyed}) and
 * learns each row's {@link Submitted} from what it found ({@link outcomesOf}).
 *
 * @since 1.1.0
 */
import type { NewJob, NewJobKey } from "../job/Job.js"
import type { Submitted } from "./JobStore.js"

/** The rows of one insert with one job key (of one type), folded into the one row a store writes. */
export interface KeyedGroup {
  /** The effective row: the first row's id, type, handler, metadata and hold, the payload and time the sequence leaves. */
  readonly row: NewJob & { readonly jobKey: NewJobKey }
  /**
   * What the group does to a live holder: `replace` when a row of it is mode `replace` (payload and
   * time), else `replacePayload` when one is (payload), else `keep`.
   */
  readonly mode: NewJobKey["mode"]
  /** The positions of the group's rows in the insert, in order. */
  readonly indexes: ReadonlyArray<number>
  /** Whether each of the group's rows replaces (mode not `keep`), in order. */
  readonly replaces: ReadonlyArray<boolean>
}

/**
 * The keyed rows of `rows`, one group per (type, job key) in the order of their first row, each folded
 * as the rows would apply one after another: against no holder the first row creates and each later
 * non-`keep` row replaces its payload (`replace`: its time too); against a holder every row does so in
 * turn. Both end with the same payload and time but for rows of mode `keep` only (see
 * {@link KeyedGroup.mode}): the effective row's payload is that of the last non-`keep` row (else the
 * first's), its time that of the last `replace` row (else the first's).
 */
export const groupKeyed = (rows: ReadonlyArray<NewJob>): Array<KeyedGroup> => {
  const groups = new Map<string, { first: NewJob & { jobKey: NewJobKey }; payload: NewJob; time: NewJob; mode: NewJobKey["mode"]; indexes: Array<number>; replaces: Array<boolean> }>()
  rows.forEach((r, i) => {
    const k = r.jobKey
    if (k === undefined) return
    const id = `${r.type}\u0000${k.key}`
    const g = groups.get(id)
    if (g === undefined) {
      groups.set(id, { first: r as NewJob & { jobKey: NewJobKey }, payload: r, time: r, mode: k.mode, indexes: [i], replaces: [k.mode !== "keep"] })
      return
    }
    g.indexes.push(i)
    g.replaces.push(k.mode !== "keep")
    if (k.mode !== "keep") g.payload = r
    if (k.mode === "replace") g.time = r
    if (k.mode === "replace" || (k.mode === "replacePayload" && g.mode === "keep")) g.mode = k.mode
  })
  return [...groups.values()].map((g) => ({
    row: { ...g.first, payload: g.payload.payload, state: g.time.state, scheduleTime: g.time.scheduleTime },
    mode: g.mode,
    indexes: g.indexes,
    replaces: g.replaces
  }))
}

/**
 * Each row's {@link Submitted} of a group the store resolved: `created` (its effective row was
 * inserted: the first row created it, the later ones acted on it, pending) or else the live holder `id`
 * and whether it was `replaceable` (pending). A row that replaces a replaceable holder `Replaced` it;
 * every other row `Joined` it.
 */
export const outcomesOf = (
  group: KeyedGroup,
  id: string,
  created: boolean,
  replaceable: boolean
): Array<Submitted> =>
  group.replaces.map((replaces, i): Submitted =>
    i === 0 && created
      ? { _tag: "Created", id }
      : replaces && (created || replaceable)
        ? { _tag: "Replaced", id }
        : { _tag: "Joined", id }
  )
