import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The latest findings of the slot-leak audit (`SlotAudit`), for the dashboard: one row per leaked
 * slot or stuck holder, replaced as a whole by each audit run (`JobStoreService.recordSlotAudit`). A
 * run that finds nothing leaves the table empty.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE IF NOT EXISTS warp_slot_audit (
      id bigserial PRIMARY KEY,
      kind text NOT NULL CHECK (kind IN ('LeakedSlot','StuckHolder')),
      key text NOT NULL,
      slot integer,
      job_id text,
      detail text NOT NULL,
      found_at timestamptz NOT NULL
    )`
})
