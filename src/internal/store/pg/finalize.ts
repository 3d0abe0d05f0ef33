/**
 * The finalizing write of an attempt in the PostgreSQL store: the row update and its audit entry (which
 * names the counter it counts, see `./counters.ts`) in one round trip — on the held slot's connection,
 * unlocking the slot too, when the worker hands it the slot's release of a `SemaphoreProviderPg` on the
 * same `SqlClient`; and there, claiming the lane's next rows too when the worker asks (`Finalize.claim`).
 * With instant pickup on, a write that ends a handler run of a keyed job (it held a slot of the key)
 * also sends a `Freed` notification when due jobs of the key are waiting (see {@link freedNotify}) —
 * unless the lane's next claim it carries came back with every row it asked for: the due work is then
 * ample, the busy lanes claim it, and the notification would only wake lanes for nothing at a price (a
 * notifying transaction holds PostgreSQL's cluster-wide notify lock from its commit's start to its end,
 * WAL flush included, so notifying writes commit one at a time; see {@link carriedFreed}).
 */
import type * as SqlClient from "effect/sql/SqlClient"
import type * as Statement from "effect/sql/Statement"
import * as Effect from "effect/Effect"
import { counterOf, logOf, stateOf } from "../../job/Outcome.js"
import { concurrencyKeyOf, fairOf, type Finalize, retagsOn } from "../JobStore.js"
import * as Wakeup from "../Wakeup.js"
import type { StoreError } from "../StoreError.js"
import { claimCtes, claimedJobs } from "./fetch.js"
import { runPrepared } from "./prepared.js"
import type { LimitsTable } from "./readsLimits.js"
import type { SemaphoreError } from "../../semaphore/SemaphoreProvider.js"
import { fail, finalizeSet, nextTag } from "./shared.js"

/**
 * A column for the `RETURNING` list of a finalizing `UPDATE` (one row per written attempt): when due
 * jobs of concurrency key `key` wait (one probe of `warp_jobs_key_live`), `pg_notify` of `payload`
 * (`Wakeup.freedPayload`). Only a write of a keyed attempt whose handler ran carries it: the keyless
 * hot path, and requeues that freed nothing, send nothing.
 */
export const freedNotify = (sql: SqlClient.SqlClient, key: Statement.Fragment, payload: Statement.Fragment) =>
  sql`CASE WHEN EXISTS (
      SELECT 1 FROM warp_jobs w
      WHERE w.state IN ('Scheduled','Enqueued') AND (w.metadata #>> '{policies,concurrency,value,key}') = ${key} AND w.schedule_time <= now()
    ) THEN pg_notify(${Wakeup.channel}, ${payload})::text END`

/**
 * The `Freed` column of a finalizing write that carries the lane's next claim (`claimed`: the relation
 * of the rows it claimed, `limit`: how many it asked for): {@link freedNotify}, only when the write
 * landed (`written`: true when it did) and the claim came back short. A claim that took every row it
 * asked for leaves the notification out: there is more due work than this lane asked for, so other
 * lanes are claiming anyway. Measured on a 300-key backlog (limit 1, 8 lanes, PostgreSQL 15 with
 * fsync on): with the notification in every such write, its commits queued on the notify lock (`Lock:
 * object`, the most sampled wait) and the server spent 3.5–3.6 ms CPU per job; without, 2.8–3.0.
 */
export const carriedFreed = (
  sql: SqlClient.SqlClient,
  key: string,
  written: Statement.Fragment,
  claimed: Statement.Fragment,
  limit: number
) =>
  sql`CASE WHEN ${written} AND (SELECT count(*) FROM ${claimed}) < ${limit}::int THEN ${freedNotify(sql, sql`${key}`, sql`${Wakeup.freedPayload(key)}`)} END`

/** The key whose slot a finalizing write of this attempt frees (its handler ran under the key, and the slot is not kept for the next job), if any. */
export const freedKey = (f: Finalize): string | undefined =>
  (f.handlerRan ?? true) && f.holdsSlot !== true ? concurrencyKeyOf(f.metadata) : undefined

/**
 * `JobStoreService.finalize`: writes the attempt's outcome if this attempt still owns the row (false
 * when the claim was lost), fusing the slot's `release` into the statement when it is held on `sql`,
 * and then the lane's next `claim` (`readsLimits`: whether claims read the admin overrides).
 */
export const finalize = (
  sql: SqlClient.SqlClient,
  readsLimits: Effect.Effect<LimitsTable>,
  f: Finalize,
  prepared = true,
  notify = false
): Effect.Effect<boolean, StoreError> => Effect.suspend(() => {
  const { claim, handlerRan = true, job, metadata, outcome, release, workerId } = f
  const freed = notify ? freedKey(f) : undefined
  const state = stateOf(outcome, new Date())
  const log = logOf(outcome)
  const at = outcome._tag === "Requeued" && outcome.at !== undefined ? outcome.at.toISOString() : null
  const keepsPlace = outcome._tag === "Requeued" && outcome.keepsPlace === true
  const counter = counterOf(outcome)
  // a requeue goes to the back of its fair-share flow (a new tag, from the metadata written now), unless
  // it keeps its place or its tag (the tag stays); a row that is no longer weighted loses its tag
  const retag = retagsOn(outcome, state)
  const fair = retag ? fairOf(metadata) : undefined
  const fairTag = !retag ? sql`` : fair === undefined ? sql`, fair_tag = NULL` : sql`, fair_tag = ${nextTag(sql, sql`${fair.flow}::text`, sql`${fair.weight}::float8`)}`
  // the slot's release, fused into this statement when it is held on a connection of this client
  const fused = release !== undefined && release.client === sql ? release : undefined
  // a write that carries the lane's next claim tells `Freed` from its final row instead (see `carriedFreed`)
  const notifies = freed !== undefined && (fused === undefined || claim === undefined)
  const write = sql`u AS (
          UPDATE warp_jobs
          SET ${finalizeSet(sql, {
            state: sql`${state}`,
            metadata: sql`${JSON.stringify(metadata)}::jsonb`,
            at: sql`${at}::timestamptz`,
            keeps: sql`${keepsPlace}`,
            ran: sql`${handlerRan}`
          })}${fairTag}
          WHERE id = ${job.id} AND state = 'Processing' AND locked_by = ${workerId} AND attempt = ${job.attempt}
          RETURNING id${notifies ? sql`, ${freedNotify(sql, sql`${freed}`, sql`${Wakeup.freedPayload(freed)}`)} AS freed` : sql``}
        ), l AS (
          INSERT INTO warp_job_logs (job_id, kind, message, counter) SELECT id, ${log.kind}, ${log.message}, ${counter} FROM u
        )`
  const written = (rows: ReadonlyArray<unknown>) => Number((rows[0] as any)?.n ?? 0) === 1
  if (fused === undefined) {
    return runPrepared(sql`WITH ${write} SELECT count(*)::int AS n FROM u`, prepared).pipe(Effect.map(written), Effect.mapError(fail("finalize")))
  }
  const alone = sql`WITH ${write}, ${fused.statement} SELECT count(*)::int AS n, (SELECT released FROM r) AS released FROM u`
  // the slot's connection could not run it (lost, or the statement failed there): the slot is lost
  // either way, and the write goes through the pool alone (it lands only if this attempt still owns the
  // row) — if the slot stayed held up to the run's end (`FusedRelease.fallback`); else the error goes
  // back to the worker, which writes the requeue instead
  const viaPool = (self: Effect.Effect<boolean, SemaphoreError>) =>
    Effect.catchTag(self, "SemaphoreError", (e) =>
      Effect.flatMap(fused.fallback ?? Effect.succeed(true), (kept): Effect.Effect<boolean, unknown> => (kept ? Effect.map(alone, written) : Effect.fail(e)))
    )
  if (claim === undefined) {
    const [text, params] = alone.compile()
    return fused.run(text, params).pipe(Effect.map(written), viaPool, Effect.mapError(fail("finalize")))
  }
  // with the lane's next claim: one row when it claimed none, else one per claimed row (the write's
  // columns repeated); the claim never takes the row this statement writes. The slot's release is the
  // provider's carrying one: it may also take, on the same connection, the slot of a claimed row's key
  // (`FusedRelease.carry`), which the row's attempt then gets from the provider without a scan.
  return Effect.flatMap(readsLimits, (limitsTable) => {
    const next = claimCtes(sql, limitsTable, workerId, claim.limit, claim.lease, claim.hint, job.id)
    const carry = fused.carry(sql`kc`)
    const [text, params] = sql`WITH RECURSIVE ${write}, ${next.ctes}, kc AS MATERIALIZED (SELECT * FROM ${next.rows} k0), ${carry.ctes}
        SELECT s.n AS warp_written, a.*, k.*
        FROM (SELECT count(*)::int AS n${
          freed === undefined ? sql`` : sql`, ${carriedFreed(sql, freed, sql`count(*) = 1`, sql`kc`, claim.limit)} AS freed`
        } FROM u) s CROSS JOIN ${carry.columns} a
        LEFT JOIN kc k ON true
        ORDER BY k.schedule_time, k.id`.compile()
    return carry.run(text, params).pipe(
      Effect.map((rows) => {
        claim.claimed(claimedJobs(rows.filter((row: any) => row.id !== null && row.id !== undefined)))
        return Number((rows[0] as any)?.warp_written ?? 0) === 1
      }),
      viaPool
    )
  }).pipe(Effect.mapError(fail("finalize")))
})
