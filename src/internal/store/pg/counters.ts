/**
 * The counters of the PostgreSQL store, derived from the audit trail: an entry that counts names its
 * counter (`warp_job_logs.counter`); a counter `c` and its per-type counter `c:{type}` are the rows
 * rolled up into `warp_counters` plus the counted entries not rolled up yet. No write that ends a job
 * updates a counter row: it only appends its entry, which it writes anyway (migration 0012).
 */
import type * as SqlClient from "effect/sql/SqlClient"
import type * as Statement from "effect/sql/Statement"
import * as Effect from "effect/Effect"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/**
 * The counted entries of the transactions `>= lo` and `< hi` (fragments), aggregated per counter key
 * (`key`, `n`), read through `warp_counted_entries` as `warp_counter_totals` reads them.
 */
const pending = (sql: SqlClient.SqlClient, lo: Statement.Fragment, hi: Statement.Fragment) => sql`
    SELECT key, count(*)::bigint AS n FROM warp_counted_entries WHERE xact >= ${lo} AND xact < ${hi} GROUP BY key`

/**
 * `JobStoreService.counters`: every counter, as the sum of its rolled-up rows and of the counted
 * entries past the roll-up mark (the view `warp_counter_totals`, migration 0012), in one statement: one
 * snapshot, and a roll-up moves rows and mark together.
 */
export const counters = (sql: SqlClient.SqlClient): Effect.Effect<ReadonlyMap<string, number>, StoreError> =>
  sql`SELECT key, value FROM warp_counter_totals`.pipe(
    Effect.map((rows) => new Map((rows as Array<any>).map((r) => [String(r.key), Number(r.value)]))),
    Effect.mapError(fail("counters"))
  )

/**
 * Folds the counted entries of every finished transaction into `warp_counters` and moves the mark past
 * them, in one transaction. Returns how many entries it folded (each counts for two keys): 0 when
 * another roll-up held the mark, or nothing was left to fold (the mark then stays: an idle store writes
 * nothing).
 *
 * The new mark is the oldest transaction that was running when the folding statement took its snapshot
 * (its `xip` list), leaving out those `pg_stat_activity` shows running in another database (they cannot
 * write this database's entries), else the snapshot's `xmax`. Every transaction below the mark has ended,
 * so each of its committed entries is visible to that statement and none can appear later; an entry of a
 * transaction still running has an `xact` at or above it and waits for a later roll-up. A running
 * transaction whose database is not known (ended since the snapshot, a prepared one, another user's
 * session hidden from this one) holds the mark back for this roll-up, never the other way round: a
 * long transaction in this database holds folding back (reads stay exact; they aggregate more entries
 * meanwhile), one in another database does not. One roll-up at a time: the mark's row is locked first
 * (`SKIP LOCKED`: a roll-up that finds it locked does nothing), by a statement of its own, so the folding
 * statement's snapshot (and the mark it reads) comes after the previous roll-up committed.
 */
export const rollUpCounters = (sql: SqlClient.SqlClient): Effect.Effect<number, StoreError> =>
  sql
    .withTransaction(
      Effect.gen(function* () {
        const mark = yield* sql`SELECT upto FROM warp_counters_rolled FOR UPDATE SKIP LOCKED`
        if (mark.length === 0) return 0
        const rows = yield* sql<{ n: number }>`
          WITH s AS (
            SELECT txid_current_snapshot() AS snap
          ), m AS (
            SELECT r.upto AS lo, coalesce((
                -- the transactions running at the snapshot, but those known to run in another database
                SELECT min(x) FROM s, txid_snapshot_xip(s.snap) AS x
                WHERE NOT EXISTS (
                  SELECT 1 FROM pg_stat_activity a
                  WHERE a.backend_xid IS NOT NULL AND a.datid IS NOT NULL
                    AND a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND a.backend_xid::text::bigint = x % 4294967296)
              ), (SELECT txid_snapshot_xmax(snap) FROM s)) AS hi
            FROM warp_counters_rolled r
          ), p AS (${pending(sql, sql.literal("(SELECT lo FROM m)"), sql.literal("(SELECT hi FROM m)"))}
          ), c AS (
            INSERT INTO warp_counters (key, shard, value) SELECT key, 0, n FROM p
            ON CONFLICT (key, shard) DO UPDATE SET value = warp_counters.value + EXCLUDED.value
          ), mark AS (
            UPDATE warp_counters_rolled SET upto = (SELECT hi FROM m) WHERE EXISTS (SELECT 1 FROM p)
          )
          SELECT (coalesce(sum(n), 0) / 2)::int AS n FROM p`
        return Number(rows[0]?.n ?? 0)
      })
    )
    .pipe(Effect.mapError(fail("rollUpCounters")))
