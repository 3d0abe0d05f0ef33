/**
 * The shared state of circuit breakers, one per dependency group:
 *
 * - **closed** (no row, or no `openedUntil`): attempts run; a failure adds one to the consecutive
 *   failures, a success resets them. The failure that reaches the attempt's `threshold` opens it.
 * - **open** (`now < openedUntil`): attempts do not run; they wait for the end of the cool-down.
 * - **half-open** (`openedUntil <= now`): exactly one attempt — the probe — is let through. Its
 *   success closes the breaker, its failure opens it for another cool-down. A probe claim lapses
 *   after one cool-down (so a probe lost with its process does not hold the group forever).
 *
 * Results of attempts admitted while closed are ignored once the breaker has opened.
 * `layerPg` keeps the state in `warp_circuit_breakers` (created by the core migrations) with time
 * from the database; `layerMemory` keeps it in-process with time from Effect's `Clock`.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import type { CircuitBreakerPolicy } from "../policy/PolicyValues.js"

/** Whether an attempt of a group may run now. */
export type Admission = Data.TaggedEnum<{
  /** Closed: run. */
  Closed: {}
  /** Half-open: run as the group's one probe. */
  Probe: {}
  /** Open until `until`. */
  Open: { readonly until: Date }
  /** Half-open with another attempt probing; ask again at `retryAt`. */
  Probing: { readonly retryAt: Date }
}>

/** Constructors and matchers of {@link Admission}. */
export const Admission = Data.taggedEnum<Admission>()

/** How an admitted attempt ended, as far as its dependency group is concerned. */
export type AttemptResult = "success" | "failure" | "neutral"

/** A breaker's state, for inspection. */
export interface CircuitStatus {
  readonly group: string
  readonly consecutiveFailures: number
  readonly openedUntil: Date | null
  readonly probeJob: string | null
}

/** The breaker table could not be read or written. */
export class CircuitBreakerStoreError extends Data.TaggedError("CircuitBreakerStoreError")<{
  readonly operation: string
  readonly cause: unknown
}> {}

/** The circuit-breaker state service. */
export interface CircuitBreakerStateService {
  /** Asks whether job `jobId` of `policy.group` may run now (claims the probe when half-open). */
  readonly admit: (policy: CircuitBreakerPolicy, jobId: string) => Effect.Effect<Admission, CircuitBreakerStoreError>
  /** Records the result of an admitted attempt (`probe`: it was admitted as the probe). */
  readonly record: (
    policy: CircuitBreakerPolicy,
    jobId: string,
    result: AttemptResult,
    probe: boolean
  ) => Effect.Effect<void, CircuitBreakerStoreError>
  /** One group's state; none = never failed. */
  readonly status: (group: string) => Effect.Effect<Option.Option<CircuitStatus>, CircuitBreakerStoreError>
  /** Closes a group's breaker by hand. */
  readonly reset: (group: string) => Effect.Effect<boolean, CircuitBreakerStoreError>
}

/** The circuit-breaker state tag. */
export class CircuitBreakerState extends Context.Service<CircuitBreakerState, CircuitBreakerStateService>()("warp/CircuitBreakerState") {}

/** While half-open with a probe in flight, others ask again after at most this long. */
export const PROBE_POLL_MS = 1000

const probingRetry = (now: number, policy: CircuitBreakerPolicy, probeUntil: number) =>
  new Date(Math.min(probeUntil, now + Math.min(policy.cooldownMs, PROBE_POLL_MS)))

/** Builds in-process breakers. */
export const makeMemory = Effect.sync((): CircuitBreakerStateService => {
  interface Row {
    failures: number
    openedUntil: number | null
    probeJob: string | null
    probeUntil: number | null
  }
  const rows = new Map<string, Row>()
  return {
    admit: (policy, jobId) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const r = rows.get(policy.group)
        if (r === undefined || r.openedUntil === null) return Admission.Closed()
        if (now < r.openedUntil) return Admission.Open({ until: new Date(r.openedUntil) })
        if (r.probeJob === null || r.probeUntil === null || r.probeUntil <= now) {
          r.probeJob = jobId
          r.probeUntil = now + policy.cooldownMs
          return Admission.Probe()
        }
        return Admission.Probing({ retryAt: probingRetry(now, policy, r.probeUntil) })
      }),
    record: (policy, jobId, result, probe) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const r = rows.get(policy.group)
        if (probe) {
          if (r === undefined || r.probeJob !== jobId) return
          r.probeJob = null
          r.probeUntil = null
          if (result === "success") {
            r.failures = 0
            r.openedUntil = null
          } else if (result === "failure") {
            r.failures++
            r.openedUntil = now + policy.cooldownMs
          }
          return
        }
        if (result === "success") {
          if (r !== undefined && r.openedUntil === null) r.failures = 0
        } else if (result === "failure") {
          const row = r ?? { failures: 0, openedUntil: null, probeJob: null, probeUntil: null }
          rows.set(policy.group, row)
          if (row.openedUntil !== null) return
          row.failures++
          if (row.failures >= policy.threshold) row.openedUntil = now + policy.cooldownMs
        }
      }),
    status: (group) =>
      Effect.sync(() =>
        Option.map(Option.fromNullishOr(rows.get(group)), (r) => ({
          group,
          consecutiveFailures: r.failures,
          openedUntil: r.openedUntil === null ? null : new Date(r.openedUntil),
          probeJob: r.probeJob
        }))
      ),
    reset: (group) => Effect.sync(() => rows.delete(group))
  }
})

const toDate = (u: unknown): Date | null => (u === null || u === undefined ? null : new Date(u as string))

/** Builds the PostgreSQL breakers on the `SqlClient` in context. */
export const makePg = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const fail = (operation: string) => (cause: unknown) => new CircuitBreakerStoreError({ operation, cause })
  const service: CircuitBreakerStateService = {
    admit: (policy, jobId) =>
      sql`
        WITH claim AS (
          UPDATE warp_circuit_breakers
          SET probe_job = ${jobId}, probe_until = now() + ${policy.cooldownMs} * interval '1 millisecond', updated_at = now()
          WHERE group_name = ${policy.group} AND opened_until <= now() AND (probe_job IS NULL OR probe_until <= now())
          RETURNING group_name
        )
        SELECT EXISTS (SELECT 1 FROM claim) AS claimed, b.opened_until, b.probe_until, now() AS now
        FROM (SELECT 1) AS one LEFT JOIN warp_circuit_breakers b ON b.group_name = ${policy.group}`.pipe(
        Effect.map((rows) => {
          const r = rows[0] as { claimed: boolean; opened_until: unknown; probe_until: unknown; now: unknown }
          if (r.claimed) return Admission.Probe()
          const openedUntil = toDate(r.opened_until)
          const now = toDate(r.now)!.getTime()
          if (openedUntil === null) return Admission.Closed()
          if (now < openedUntil.getTime()) return Admission.Open({ until: openedUntil })
          return Admission.Probing({ retryAt: probingRetry(now, policy, toDate(r.probe_until)?.getTime() ?? now) })
        }),
        Effect.mapError(fail("admit"))
      ),
    record: (policy, jobId, result, probe) => {
      const cooldown = policy.cooldownMs
      const statement = probe
        ? result === "success"
          ? sql`UPDATE warp_circuit_breakers
                SET consecutive_failures = 0, opened_until = NULL, probe_job = NULL, probe_until = NULL, updated_at = now()
                WHERE group_name = ${policy.group} AND probe_job = ${jobId}`
          : result === "failure"
            ? sql`UPDATE warp_circuit_breakers
                  SET consecutive_failures = consecutive_failures + 1, opened_until = now() + ${cooldown} * interval '1 millisecond',
                      probe_job = NULL, probe_until = NULL, updated_at = now()
                  WHERE group_name = ${policy.group} AND probe_job = ${jobId}`
            : sql`UPDATE warp_circuit_breakers SET probe_job = NULL, probe_until = NULL, updated_at = now()
                  WHERE group_name = ${policy.group} AND probe_job = ${jobId}`
        : result === "success"
          ? sql`UPDATE warp_circuit_breakers SET consecutive_failures = 0, updated_at = now()
                WHERE group_name = ${policy.group} AND opened_until IS NULL AND consecutive_failures > 0`
          : result === "failure"
            ? sql`
                INSERT INTO warp_circuit_breakers AS b (group_name, consecutive_failures, opened_until)
                VALUES (${policy.group}, 1, CASE WHEN 1 >= ${policy.threshold} THEN now() + ${cooldown} * interval '1 millisecond' END)
                ON CONFLICT (group_name) DO UPDATE SET
                  consecutive_failures = b.consecutive_failures + 1,
                  opened_until = CASE WHEN b.consecutive_failures + 1 >= ${policy.threshold}
                                      THEN now() + ${cooldown} * interval '1 millisecond' END,
                  updated_at = now()
                WHERE b.opened_until IS NULL`
            : undefined
      return statement === undefined ? Effect.void : statement.pipe(Effect.asVoid, Effect.mapError(fail("record")))
    },
    status: (group) =>
      sql`SELECT group_name, consecutive_failures, opened_until, probe_job FROM warp_circuit_breakers WHERE group_name = ${group}`.pipe(
        Effect.map((rows) =>
          Option.map(Option.fromNullishOr(rows[0] as any), (r) => ({
            group: String(r.group_name),
            consecutiveFailures: Number(r.consecutive_failures),
            openedUntil: toDate(r.opened_until),
            probeJob: r.probe_job ?? null
          }))
        ),
        Effect.mapError(fail("status"))
      ),
    reset: (group) =>
      sql`DELETE FROM warp_circuit_breakers WHERE group_name = ${group} RETURNING group_name`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.mapError(fail("reset"))
      )
  }
  return service
})

/** In-process breakers. */
export const layerMemory: Layer.Layer<CircuitBreakerState> = Layer.effect(CircuitBreakerState, makeMemory)

/**
 * Breakers shared by every worker on the database. The table comes with the core migrations (run by
 * `JobStorePg.layer`, or `Migrations.core` when the app migrates on its own).
 */
export const layerPg: Layer.Layer<CircuitBreakerState, never, SqlClient.SqlClient> = Layer.effect(CircuitBreakerState, makePg)
