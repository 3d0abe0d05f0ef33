/**
 * The PostgreSQL job store (@effect/sql-pg). Each operation is one SQL statement: claims use
 * `FOR UPDATE SKIP LOCKED` (and read the admin override of each claimed row's concurrency key), and an
 * attempt's finalizing write updates the row and appends the audit entry, which names the counter it
 * counts, in one round trip (the writes of attempts that end while one is out go together in the next statement, see
 * `./pg/finalizeBatch.ts`) — on the held slot's connection, unlocking the slot too, when the worker hands it the
 * slot's release of a `SemaphoreProviderPg` on the same `SqlClient`. Fifo-mode rows are claimed in submission order per
 * key (see `JobStoreService.fetch`). An insert of more than `insertChunk` rows is one statement per
 * chunk, all in one transaction (a savepoint inside the caller's); one-row inserts that arrive while one
 * is out go together in the next statement (`./pg/insertBatch.ts`), except inside a transaction. Every
 * statement runs on the `SqlClient` in context, so inside the caller's `withTransaction` it joins that
 * transaction.
 *
 * Counters are derived from those entries (`./pg/counters.ts`): while the layer lives, it folds the
 * entries of finished transactions into `warp_counters` every `counterRollUp` (one roll-up at a time
 * across processes; a failed one is retried at the next tick).
 *
 * Each operation's statement lives in its own file under `./pg/` (what they share in `./pg/shared.ts`);
 * this module only assembles the service from them, plus the layers.
 *
 * @since 0.1.0
 */
import * as SqlClient from "effect/sql/SqlClient"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { JobStore, type JobStoreService } from "./JobStore.js"
import * as SemaphoreProviderPg from "../semaphore/SemaphoreProviderPg.js"
import * as KeyInsightPg from "./KeyInsightPg.js"
import * as Migrations from "./Migrations.js"
import { appendLog } from "./pg/appendLog.js"
import { cancelHolders } from "./pg/cancelHolders.js"
import { cancelRequests } from "./pg/cancelRequests.js"
import { countByState } from "./pg/countByState.js"
import { counters, rollUpCounters } from "./pg/counters.js"
import { fetch } from "./pg/fetch.js"
import { makeBatchedFinalize } from "./pg/finalizeBatch.js"
import { makeBatchedInsert } from "./pg/insertBatch.js"
import { get } from "./pg/get.js"
import { heartbeat } from "./pg/heartbeat.js"
import { insertChunk } from "./pg/insert.js"
import { wakeups } from "./pg/listen.js"
import { list } from "./pg/list.js"
import { markHolder } from "./pg/markHolder.js"
import { nextDue } from "./pg/nextDue.js"
import { operate } from "./pg/operate.js"
import { expiredBacklog, prune } from "./pg/prune.js"
import * as ReadsLimits from "./pg/readsLimits.js"
import { removeWorker } from "./pg/removeWorker.js"
import { reportWorker } from "./pg/reportWorker.js"
import { requestCancel } from "./pg/requestCancel.js"
import { recordSlotAudit, slotAuditFindings } from "./pg/slotAudit.js"
import { fail, originEntry, rowToJob } from "./pg/shared.js"
import { workers } from "./pg/workers.js"
import type { StoreError } from "./StoreError.js"

export { insertChunk, originEntry, rowToJob }

/** Options of the PostgreSQL store. */
export interface PgStoreOptions {
  /**
   * Run the worker's hot statements (the claim, the finalizing writes) as named prepared statements,
   * planned once per connection (default true; @effect/sql-pg keeps them, see `PgClientConfig.prepare`).
   * Turn off behind a connection pooler in transaction mode that cannot keep prepared statements (and
   * set `prepare: false` on the client, for the store's other statements).
   */
  readonly preparedStatements?: boolean | undefined
  /** Run the core migrations when the layer is built (default true). */
  readonly migrate?: boolean | undefined
  /**
   * How often the counted audit entries are folded into the counters' rows (default 2 seconds): a read
   * of the counters aggregates the entries written since the last fold.
   */
  readonly counterRollUp?: Duration.Input | undefined
  /**
   * Instant pickup (default true): inserts send one `NOTIFY` per statement (rows due now, the earliest
   * Scheduled time), a finalizing write that frees a slot of a key with due jobs waiting sends one (not
   * when the lane's next claim it carries came back with every row it asked for), and
   * the store offers workers those hints (`JobStoreService.wakeups`) through a `LISTEN` on a connection
   * of its own (outside the pool, held while a worker runs, reconnected when it drops), plus the time the
   * next Scheduled row comes due (`nextDue`). Workers then start due jobs without waiting for their poll,
   * which stays the fallback. Needs the `SqlClient` to be @effect/sql-pg's; false: no notifications, no
   * listener (workers poll).
   */
  readonly instantPickup?: boolean | undefined
}

/** Builds the PostgreSQL store on the `SqlClient` in context, with `options`. */
export const makeWith = (options: PgStoreOptions = {}) => Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const locks = yield* SemaphoreProviderPg.make()
  const prepared = options.preparedStatements !== false
  const pickup = options.instantPickup !== false

  const readsLimits = yield* ReadsLimits.readsLimits(sql)
  const finalize = yield* makeBatchedFinalize(sql, readsLimits, prepared, pickup)
  const batchedInsert = yield* makeBatchedInsert(sql, pickup)
  const hints = pickup ? yield* wakeups(sql) : undefined
  // the first fold one interval after the store starts, then one per interval
  const every = options.counterRollUp ?? "2 seconds"
  yield* Effect.forkScoped(Effect.interruptible(Effect.forever(Effect.andThen(Effect.sleep(every), Effect.ignore(rollUpCounters(sql))))))

  const service: JobStoreService = {
    insert: batchedInsert,
    fetch: (workerId, limit, lease, hint) => fetch(sql, readsLimits, workerId, limit, lease, hint, prepared),
    finalize,
    appendLog: (jobId, kind, message) => appendLog(sql, jobId, kind, message),
    heartbeat: (workerId, ids, lease) => heartbeat(sql, workerId, ids, lease),
    requestCancel: (id, reason) => requestCancel(sql, id, reason),
    markHolder: (id, workerId, key) => markHolder(sql, id, workerId, key),
    cancelHolders: (key, newer) => cancelHolders(sql, key, newer),
    cancelRequests: (workerId, ids) => cancelRequests(sql, workerId, ids),
    reportWorker: (r) => reportWorker(sql, r),
    removeWorker: (workerId) => removeWorker(sql, workerId),
    workers: workers(sql),
    recordSlotAudit: (findings) => recordSlotAudit(sql, findings),
    slotAuditFindings: slotAuditFindings(sql),
    get: (id) => get(sql, id),
    prune: (plan) => prune(sql, plan),
    expiredBacklog: (plan, cap) => expiredBacklog(sql, plan, cap),
    list: (options) => list(sql, options),
    operate: (action, ids) => operate(sql, action, ids, pickup),
    countByState: countByState(sql),
    counters: counters(sql),
    locks,
    insight: KeyInsightPg.make(sql),
    ...(hints === undefined ? {} : { wakeups: hints, nextDue: nextDue(sql) })
  }
  return service
})

/** Builds the PostgreSQL store on the `SqlClient` in context (prepared statements on). */
export const make = makeWith()

/** The PostgreSQL store with `options` (migrations run when built, unless `migrate: false`). */
export const layerWith = (options: PgStoreOptions = {}): Layer.Layer<JobStore, StoreError, SqlClient.SqlClient> =>
  Layer.effect(
    JobStore,
    options.migrate === false ? makeWith(options) : Migrations.core.pipe(Effect.mapError(fail("migrate")), Effect.andThen(makeWith(options)))
  )

/** The PostgreSQL store; runs the core migrations when built. Requires a `SqlClient` (e.g. `PgClient.layer`). */
export const layer: Layer.Layer<JobStore, StoreError, SqlClient.SqlClient> = layerWith()

/** The PostgreSQL store without running migrations (when the app migrates on its own). */
export const layerWithoutMigrations: Layer.Layer<JobStore, never, SqlClient.SqlClient> = Layer.effect(JobStore, make)
