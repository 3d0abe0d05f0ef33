/**
 * The slot-leak audit's latest findings (`warp_slot_audit`) in the PostgreSQL store.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { SlotAuditFinding } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/**
 * `JobStoreService.recordSlotAudit`: in one transaction, under a lock of the table (two processes
 * auditing at once write one after the other, never a mix of both runs), deletes the findings stored
 * and inserts these.
 */
export const recordSlotAudit = (sql: SqlClient.SqlClient, findings: ReadonlyArray<SlotAuditFinding>): Effect.Effect<void, StoreError> =>
  sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`LOCK TABLE warp_slot_audit IN EXCLUSIVE MODE`
      yield* sql`DELETE FROM warp_slot_audit`
      if (findings.length === 0) return
      const rows = findings.map((f) => ({
        kind: f.kind,
        key: f.key,
        slot: f.slot ?? null,
        job_id: f.jobId ?? null,
        detail: f.detail,
        found_at: f.foundAt.toISOString()
      }))
      yield* sql`
        INSERT INTO warp_slot_audit (kind, key, slot, job_id, detail, found_at)
        SELECT kind, key, slot, job_id, detail, found_at
        FROM json_to_recordset(${JSON.stringify(rows)}::json)
          AS r(kind text, key text, slot integer, job_id text, detail text, found_at timestamptz)`
    })
  ).pipe(Effect.mapError(fail("recordSlotAudit")))

/** `JobStoreService.slotAuditFindings`: the stored findings, in the order they were recorded. */
export const slotAuditFindings = (sql: SqlClient.SqlClient): Effect.Effect<ReadonlyArray<SlotAuditFinding>, StoreError> =>
  sql`SELECT kind, key, slot, job_id, detail, found_at FROM warp_slot_audit ORDER BY id`.pipe(
    Effect.map((rows) =>
      (rows as Array<any>).map(
        (r): SlotAuditFinding => ({
          kind: r.kind,
          key: r.key,
          slot: r.slot === null ? undefined : Number(r.slot),
          jobId: r.job_id ?? undefined,
          detail: r.detail,
          foundAt: new Date(r.found_at)
        })
      )
    ),
    Effect.mapError(fail("slotAuditFindings"))
  )
