/**
 * The workload shared by the multi-process proof, the crash test and the soak: one job contract
 * whose handler records when it enters and leaves (PostgreSQL `clock_timestamp()`, so every process
 * is measured by one clock), plus the tables those records live in.
 *
 * Enter is written after the concurrency gate acquired the slot and exit before the slot is
 * released (the slot is held by the attempt's scope, which closes after the handler), so each
 * recorded interval lies inside the slot's holding time.
 */
import * as SqlClient from "effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { Contract, Handler, Job } from "warp-effect"
import { LOCK_PREFIX } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"

/**
 * The one job type. `ms`: time inside the handler; `fail`: the handler fails (every attempt);
 * `hangFirst`: the first attempt never returns (crash tests kill the process during it); `write`: once
 * its work ends (done, failed or interrupted), the handler writes its slot's resource row (`rel_resource`) with the README's
 * fencing pattern (`fenced`: `... AND fence < $token`: one write per holder) or without the condition
 * (`unfenced`: the ablation that shows the checker catching a stale write), each try recorded in
 * `rel_writes`.
 */
export const Work = Contract.job(
  "Work",
  Schema.Struct({
    ms: Schema.Number,
    fail: Schema.Boolean,
    hangFirst: Schema.optional(Schema.Boolean),
    write: Schema.optional(Schema.Literals(["fenced", "unfenced"]))
  })
)

/** The handler's own failure text (so a checker can tell handler failures from anything else). */
export const HANDLER_FAILURE = "handler failed on purpose"

/** Tables of the records (created by the parent before any worker starts). */
export const createTables = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE IF NOT EXISTS rel_intervals (
      job_id text NOT NULL,
      attempt integer NOT NULL,
      key text,
      lim integer,
      proc text NOT NULL,
      pid integer NOT NULL,
      claimed_at timestamptz NOT NULL,
      entered timestamptz NOT NULL,
      exited timestamptz,
      result text,
      holders text[],
      PRIMARY KEY (job_id, attempt)
    )`
  yield* sql`
    CREATE TABLE IF NOT EXISTS rel_acquired (
      proc text NOT NULL,
      name text NOT NULL,
      index integer NOT NULL,
      at timestamptz NOT NULL,
      holders text[]
    )`
  yield* sql`
    CREATE TABLE IF NOT EXISTS rel_deaths (
      pid integer NOT NULL,
      proc text NOT NULL,
      at timestamptz NOT NULL,
      -- a process is its name (one per spawn) and pid: pids are reused (a 32,768 pid space wraps within
      -- one soak on a busy machine)
      PRIMARY KEY (proc, pid)
    )`
  // a resource per slot of a key (a fenced resource is one a single holder writes at a time: the slot
  // of a Semaphore(N), not the key), and every write tried on it: by which run, with which token
  yield* sql`
    CREATE TABLE IF NOT EXISTS rel_resource (
      key text NOT NULL,
      slot integer NOT NULL,
      fence bigint NOT NULL DEFAULT 0,
      writer text,
      PRIMARY KEY (key, slot)
    )`
  yield* sql`
    CREATE TABLE IF NOT EXISTS rel_writes (
      job_id text NOT NULL,
      attempt integer NOT NULL,
      phase text NOT NULL,
      key text NOT NULL,
      slot integer NOT NULL,
      token bigint NOT NULL,
      accepted boolean NOT NULL,
      at timestamptz NOT NULL
    )`
  yield* sql`
    CREATE TABLE IF NOT EXISTS rel_faults (
      id serial PRIMARY KEY,
      kind text NOT NULL,
      proc text NOT NULL,
      pid integer NOT NULL,
      started timestamptz,
      at timestamptz NOT NULL,
      locks text[] NOT NULL DEFAULT '{}'
    )`
})

/** Where the records of one process come from. */
export interface Recorder {
  readonly proc: string
  readonly pid: number
}

// A record must survive connection faults: retry, bounded (about 5 s).
const persist = Schedule.max([Schedule.spaced("25 millis"), Schedule.recurs(200)])

/** The recording handler of {@link Work}. Requires only the `SqlClient` of its process. */
export const recordingHandler = (recorder: Recorder) =>
  Handler.job(Work, ({ fail, hangFirst, ms, write }, info) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const attempt = yield* Effect.serviceOption(Job.CurrentAttempt)
      const policy = Option.flatMap(attempt, (a) => Option.fromNullishOr(a.policies.concurrency))
      const key = Option.match(policy, { onNone: () => null, onSome: (p) => p.key })
      const lim = Option.match(policy, { onNone: () => null, onSome: (p) => p.limit })
      const claimedAt = Option.match(attempt, { onNone: () => new Date(0), onSome: (a) => a.job.updatedAt })
      const enter = sql`
        INSERT INTO rel_intervals (job_id, attempt, key, lim, proc, pid, claimed_at, entered)
        VALUES (${info.jobId}, ${info.attempt}, ${key}, ${lim}, ${recorder.proc}, ${recorder.pid}, ${claimedAt.toISOString()}, clock_timestamp())
        ON CONFLICT (job_id, attempt) DO NOTHING`.pipe(Effect.retry(persist), Effect.orDie)
      const leave = (result: string) =>
        sql`
          UPDATE rel_intervals SET exited = clock_timestamp(), result = ${result}
          WHERE job_id = ${info.jobId} AND attempt = ${info.attempt} AND exited IS NULL`.pipe(Effect.retry(persist), Effect.ignore)
      // WARP_SOAK_DIAG=1: also record which backends hold the key's slot locks as the handler enters
      const diagnose =
        process.env.WARP_SOAK_DIAG === "1" && key !== null && lim !== null
          ? sql`
              UPDATE rel_intervals SET holders = (
                SELECT array_agg(a.application_name || '/' || l.pid) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
                  AND ((l.classid::bigint << 32) | l.objid::bigint)::text IN ${sql.in(Array.from({ length: lim }, (_, i) => lockId(slotName(LOCK_PREFIX + key, i))))})
              WHERE job_id = ${info.jobId} AND attempt = ${info.attempt}`.pipe(Effect.ignore)
          : Effect.void
      // the resource write of a keyed run holding a fencing token (one statement: the write and its record)
      const slot = info.slot
      const writeResource = (phase: "exit") =>
        write === undefined || slot === undefined || slot.fence === undefined
          ? Effect.void
          : sql
              .unsafe(
                `WITH w AS (UPDATE rel_resource SET fence = $1::bigint, writer = $2 || '#' || $3::text
                            WHERE key = $4 AND slot = $5${write === "fenced" ? " AND fence < $1::bigint" : ""} RETURNING 1)
                 INSERT INTO rel_writes (job_id, attempt, phase, key, slot, token, accepted, at)
                 SELECT $2, $3::int, $6, $4, $5, $1::bigint, EXISTS (SELECT 1 FROM w), clock_timestamp()`,
                [slot.fence.toString(), info.jobId, info.attempt, slot.key, slot.index, phase]
              )
              .pipe(Effect.retry(persist), Effect.orDie)
      const body =
        hangFirst === true && info.attempt === 1
          ? Effect.never
          : Effect.sleep(Duration.millis(ms)).pipe(
              Effect.andThen(fail ? Effect.fail(HANDLER_FAILURE) : Effect.void)
            )
      yield* Effect.acquireUseRelease(
        enter,
        () => Effect.andThen(diagnose, body),
        // the resource write comes last whatever ended the work — interrupted too (told its slot was lost,
        // replaced, shut down): the worst holder, one that writes what it has anyway; the fence is what
        // must refuse it
        (_, exit) => Effect.andThen(Effect.ignore(writeResource("exit")), leave(Exit.isSuccess(exit) ? "ok" : Exit.hasInterrupts(exit) ? "interrupted" : "failed"))
      )
    })
  )
