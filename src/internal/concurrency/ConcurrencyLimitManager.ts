/**
 * Admin overrides of concurrency limits, editable at run time without a redeploy. Rows are sticky:
 * they live in the database, so a deploy that declares another limit still runs with the admin's
 * until `removeLimit`.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Describe from "../error/Describe.js"
import * as Migrations from "../store/Migrations.js"
import { call, PolicyKey, PositiveInt, validate } from "../policy/PolicyValues.js"
import { InvalidPolicy } from "../policy/InvalidPolicy.js"

/** One admin override. */
export class ConcurrencyLimit extends Schema.Class<ConcurrencyLimit>("ConcurrencyLimit")({
  key: PolicyKey,
  slots: PositiveInt,
  updatedAt: Schema.DateFromSelf
}) {}

/** The limit table could not be read or written. */
export class LimitStoreError extends Data.TaggedError("LimitStoreError")<{ readonly operation: string; readonly cause: unknown }> {}

/** The admin limit service. */
export interface ConcurrencyLimitManagerService {
  /** Sets `key`'s limit to `slots` (an integer >= 1). */
  readonly addOrUpdateLimit: (key: string, slots: number) => Effect.Effect<void, InvalidPolicy | LimitStoreError>
  /** Removes `key`'s override; the declared limit applies again. */
  readonly removeLimit: (key: string) => Effect.Effect<boolean, LimitStoreError>
  /** Every override, ordered by key (code-unit order, the same on every layer). */
  readonly list: Effect.Effect<ReadonlyArray<ConcurrencyLimit>, LimitStoreError>
  /** One override. */
  readonly get: (key: string) => Effect.Effect<Option.Option<ConcurrencyLimit>, LimitStoreError>
  /**
   * True when the overrides are the rows of `warp_concurrency_limits` on the job store's database: the
   * built-in PostgreSQL store reads a claimed row's override in its claiming statement, and the gate
   * then takes it from the claim (`Job.adminLimit`) instead of calling `get`.
   */
  readonly readAtClaim?: boolean | undefined
}

/** The admin limit service tag. */
export class ConcurrencyLimitManager extends Context.Tag("warp/ConcurrencyLimitManager")<
  ConcurrencyLimitManager,
  ConcurrencyLimitManagerService
>() {}

const Input = Schema.Struct({ key: PolicyKey, slots: PositiveInt })
/**
 * A key PostgreSQL cannot hold unchanged (a NUL, an unpaired surrogate, not a string) is refused by
 * every layer alike, and never found.
 */
const hasNul = (key: unknown) => typeof key !== "string" || Describe.unstorableText(key) !== undefined
const check = (key: string, slots: number): Either.Either<unknown, InvalidPolicy> =>
  validate("concurrency", Input, { key, slots }, call("ConcurrencyLimitManager.addOrUpdateLimit", key, slots))

/** In-memory overrides. */
export const layerMemory: Layer.Layer<ConcurrencyLimitManager> = Layer.sync(ConcurrencyLimitManager, () => {
  const rows = new Map<string, ConcurrencyLimit>()
  return {
    addOrUpdateLimit: (key, slots) =>
      Either.match(check(key, slots), {
        onLeft: Effect.fail,
        onRight: () => Effect.sync(() => void rows.set(key, new ConcurrencyLimit({ key, slots, updatedAt: new Date() })))
      }),
    removeLimit: (key) => Effect.sync(() => !hasNul(key) && rows.delete(key)),
    // code-unit order, like PostgreSQL's COLLATE "C" for the keys people use
    list: Effect.sync(() => [...rows.values()].sort((a, b) => (a.key < b.key ? -1 : 1))),
    get: (key) => Effect.sync(() => (hasNul(key) ? Option.none() : Option.fromNullable(rows.get(key))))
  }
})

const toLimit = (r: any) => new ConcurrencyLimit({ key: r.key, slots: Number(r.slots), updatedAt: new Date(r.updated_at) })

/** Builds the PostgreSQL overrides service (table `warp_concurrency_limits`). */
export const makePg = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const fail = (operation: string) => (cause: unknown) => new LimitStoreError({ operation, cause })
  const service: ConcurrencyLimitManagerService = {
    readAtClaim: true,
    addOrUpdateLimit: (key, slots) =>
      Either.match(check(key, slots), {
        onLeft: Effect.fail,
        onRight: () =>
          sql`INSERT INTO warp_concurrency_limits (key, slots) VALUES (${key}, ${slots})
              ON CONFLICT (key) DO UPDATE SET slots = EXCLUDED.slots, updated_at = now()`.pipe(
            Effect.asVoid,
            Effect.mapError(fail("addOrUpdateLimit"))
          )
      }),
    removeLimit: (key) =>
      hasNul(key)
        ? Effect.succeed(false)
        : sql`DELETE FROM warp_concurrency_limits WHERE key = ${key} RETURNING key`.pipe(
            Effect.map((rows) => rows.length > 0),
            Effect.mapError(fail("removeLimit"))
          ),
    list: sql`SELECT key, slots, updated_at FROM warp_concurrency_limits ORDER BY key COLLATE "C"`.pipe(
      Effect.map((rows) => rows.map(toLimit)),
      Effect.mapError(fail("list"))
    ),
    get: (key) =>
      hasNul(key)
        ? Effect.succeed(Option.none())
        : sql`SELECT key, slots, updated_at FROM warp_concurrency_limits WHERE key = ${key}`.pipe(
            Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toLimit)),
            Effect.mapError(fail("get"))
          )
  }
  return service
})

/** PostgreSQL overrides; runs the concurrency addon's migration when built. */
export const layerPg: Layer.Layer<ConcurrencyLimitManager, LimitStoreError, SqlClient.SqlClient> = Layer.effect(
  ConcurrencyLimitManager,
  Migrations.concurrency.pipe(Effect.mapError((cause) => new LimitStoreError({ operation: "migrate", cause })), Effect.zipRight(makePg))
)

/** PostgreSQL overrides without running the migration (when the app migrates on its own). */
export const layerPgWithoutMigrations: Layer.Layer<ConcurrencyLimitManager, never, SqlClient.SqlClient> = Layer.effect(ConcurrencyLimitManager, makePg)
