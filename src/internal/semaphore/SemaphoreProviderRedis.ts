/**
 * The Redis semaphore provider: leased slots in one hash per name (ioredis).
 *
 * - Slot-pool rule: the slots of `name` at limit N are the fields `0` .. `N-1` of the hash
 *   `{prefix}{name}` for every N, so `Mutex(k)` and `Semaphore(k, N)` share one pool of N slots.
 * - A field holds `{owner token}|{lease expiry in ms, Redis clock}`. One Lua script per
 *   acquisition scans the slots from a random offset and takes the first one that is absent or
 *   expired: the script runs atomically, so a scan sees one consistent state and "full" means
 *   every slot was held. Release deletes the field only if it still carries the holder's token.
 * - While a slot is held, a heartbeat extends its lease every `heartbeat`; a holder that stops
 *   (its process died) loses the slot when the lease expires. `slot.lost` completes when the
 *   heartbeat finds the lease gone or taken over, or — the holder-side deadline — when no renewal
 *   has succeeded by the lease's end as the holder counts it (from when the last successful acquire
 *   or renewal was sent) minus a margin, so the holder stops before Redis could grant its slot to
 *   anyone else.
 * - A restarted Redis that kept nothing on disk has forgotten every lease while their holders may
 *   still run. The acquire script therefore grants nothing while the server's uptime is below one
 *   lease (Redis's own advice for distributed locks: a restarted instance stays unavailable for the
 *   longest lease); a holder from before the restart finds its lease gone at its next heartbeat, or
 *   stops at its deadline, before that. A `tryAcquire` that meets such a server waits out its
 *   timeout and then fails with a `SemaphoreError` (the gate requeues the job), never "full".
 *   Providers sharing one Redis should use the same lease (the guard uses the caller's).
 * - Every command has a timeout (`commandTimeout`, default a third of the lease, at most 2 s), so a
 *   Redis that stops answering without closing the connection fails calls instead of hanging them.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import {
  acquireWith,
  type Held,
  randomOffset,
  SemaphoreError,
  SemaphoreProvider,
  type SemaphoreProviderService,
  validateLimit
} from "./SemaphoreProvider.js"
import { importPeer, type MissingPeerDependency } from "../MissingPeer.js"

/** Options of the Redis provider. */
export interface RedisProviderOptions {
  /** Prefix of the hash keys (default `"warp:semaphore:"`). */
  readonly prefix?: string
  /** How long a slot stays held without a heartbeat (default 10 seconds). */
  readonly lease?: Duration.Input
  /** How often a held slot's lease is extended (default a third of the lease). */
  readonly heartbeat?: Duration.Input
  /** How often a waiting `tryAcquire` retries (default 10 ms). */
  readonly retryInterval?: Duration.Input
  /**
   * How long before the end of a lease (as the holder counts it) an unrenewed holder gives its slot
   * up (`slot.lost`) (default a tenth of the lease, at least 50 ms). Covers clock-rate drift between
   * the holder and Redis and the time the holder needs to stop.
   */
  readonly margin?: Duration.Input
}

/** Options of {@link layer}: the provider options and the connection. */
export interface RedisLayerOptions extends RedisProviderOptions {
  /** A `redis://` URL or ioredis options (default `redis://127.0.0.1:6379`). */
  readonly redis?: string | RedisConnectionOptions
}

/**
 * Connection options handed to ioredis as they are (`host`, `port`, `password`, `db`, `tls`, …). Typed
 * loosely so that this module's types do not need the optional `ioredis` peer installed.
 */
export interface RedisConnectionOptions {
  readonly host?: string
  readonly port?: number
  readonly [option: string]: unknown
}

/**
 * What the provider needs of a Redis client: an ioredis `Redis` (or `Cluster`) instance fits. Its
 * commands defined by {@link make} are called through it.
 */
export interface RedisClient {
  defineCommand(name: string, definition: { numberOfKeys?: number; lua: string }): void
}


const now = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`

/** Milliseconds since the epoch at which a field's lease expires. */
const expiry = `local function expiry(v)
  local sep = string.find(v, '|', 1, true)
  if not sep then return 0 end
  return tonumber(string.sub(v, sep + 1)) or 0
end`

/** Keeps the hash alive at least as long as its newest lease. */
const keepAlive = `local ttl = redis.call('PTTL', KEYS[1])
if ttl < lease then redis.call('PEXPIRE', KEYS[1], lease) end`

/**
 * KEYS[1] hash; ARGV limit, offset, token, lease ms. Returns the slot taken and its fencing token, -1
 * (full), or -2 minus the server's uptime in seconds while it is below one lease (it restarted and
 * forgot the leases). The token is the server's clock in microseconds, raised past the last token of
 * the name (its `fence` field): it grows per name, and across a restart that forgot the field too, as
 * long as the server's clock does not go back.
 */
const ACQUIRE = `${now}
${expiry}
local limit = tonumber(ARGV[1])
local offset = tonumber(ARGV[2])
local lease = tonumber(ARGV[4])
local uptime = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)'))
if uptime and uptime * 1000 < lease then return -2 - uptime end
local held = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do held[all[i]] = all[i + 1] end
for i = 0, limit - 1 do
  local slot = (offset + i) % limit
  local v = held[tostring(slot)]
  if not v or expiry(v) <= now then
    redis.call('HSET', KEYS[1], slot, ARGV[3] .. '|' .. string.format('%d', now + lease))
    local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local last = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
    if fence <= last then fence = last + 1 end
    redis.call('HSET', KEYS[1], 'fence', string.format('%d', fence))
    ${keepAlive}
    return {slot, string.format('%d', fence)}
  end
end
return -1`

/** KEYS[1] hash; ARGV slot, token. Deletes the field if the token still owns it. */
const RELEASE = `local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.sub(v, 1, #ARGV[2] + 1) == ARGV[2] .. '|' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
return 0`

/** KEYS[1] hash; ARGV slot, token, lease ms. Extends the lease if the token still owns it unexpired. */
const RENEW = `${now}
${expiry}
local lease = tonumber(ARGV[3])
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.sub(v, 1, #ARGV[2] + 1) == ARGV[2] .. '|' and expiry(v) > now then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. '|' .. string.format('%d', now + lease))
  ${keepAlive}
  return 1
end
return 0`

interface Scripts {
  warpSemaphoreAcquire(key: string, limit: number, offset: number, token: string, leaseMs: number): Promise<number | [number, string]>
  warpSemaphoreRelease(key: string, slot: number, token: string): Promise<number>
  warpSemaphoreRenew(key: string, slot: number, token: string, leaseMs: number): Promise<number>
}

/**
 * Builds the provider on an ioredis client (left open: the caller owns it). Heartbeats run in
 * the surrounding scope.
 */
export const make = (client: RedisClient, options: RedisProviderOptions = {}): Effect.Effect<SemaphoreProviderService, never, Scope.Scope> =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    const prefix = options.prefix ?? "warp:semaphore:"
    const lease = Duration.fromInputUnsafe(options.lease ?? "10 seconds")
    const leaseMs = Math.max(1, Math.round(Duration.toMillis(lease)))
    const heartbeat = options.heartbeat === undefined ? Duration.millis(leaseMs / 3) : Duration.fromInputUnsafe(options.heartbeat)
    const every = options.retryInterval ?? "10 millis"
    const marginMs = options.margin === undefined ? Math.max(50, leaseMs / 10) : Duration.toMillis(Duration.fromInputUnsafe(options.margin))
    client.defineCommand("warpSemaphoreAcquire", { numberOfKeys: 1, lua: ACQUIRE })
    client.defineCommand("warpSemaphoreRelease", { numberOfKeys: 1, lua: RELEASE })
    client.defineCommand("warpSemaphoreRenew", { numberOfKeys: 1, lua: RENEW })
    const scripts = client as unknown as Scripts
    const call = <A>(name: string, message: string, f: () => Promise<A>) =>
      Effect.tryPromise({ try: f, catch: (cause) => new SemaphoreError({ name, message, cause }) })

    /**
     * Renews the lease every `heartbeat`, and keeps the holder-side deadline: `lost` completes when the
     * lease is found gone or taken over, or when no renewal has succeeded by `validUntil` (counted from
     * when the last successful call was sent, minus the margin).
     */
    const keepLease = (key: string, name: string, slot: number, token: string, lost: Deferred.Deferred<void>, lease: Lease) => {
      const renew = Effect.flatMap(Clock.currentTimeMillis, (sent) =>
        call(name, "lease renewal failed", () => scripts.warpSemaphoreRenew(key, slot, token, leaseMs)).pipe(
          Effect.flatMap((ok) =>
            ok === 1
              ? Effect.sync(() => {
                  lease.validUntil = Math.max(lease.validUntil, sent + leaseMs - marginMs)
                  lease.provenAt = Math.max(lease.provenAt, sent)
                })
              : Effect.sync(() => void (lease.gone = true)).pipe(Effect.andThen(Effect.fail("gone" as const)))
          ),
          // a failed call is retried at the next beat; the deadline decides when it is too late
          Effect.catchTag("SemaphoreError", () => Effect.void)
        )
      )
      const heartbeats = renew.pipe(Effect.repeat(Schedule.spaced(heartbeat)), Effect.delay(heartbeat))
      const deadline: Effect.Effect<void> = Effect.flatMap(Clock.currentTimeMillis, (t) =>
        t >= lease.validUntil ? Effect.void : Effect.andThen(Effect.sleep(Duration.millis(lease.validUntil - t)), deadline)
      )
      return Effect.raceFirst(Effect.ignore(heartbeats), deadline).pipe(
        Effect.andThen(Deferred.succeed(lost, undefined)),
        Effect.asVoid,
        // forked from an uninterruptible acquisition: the heartbeat itself must be interruptible
        Effect.interruptible,
        Effect.forkIn(scope)
      )
    }

    /** One try; `restarted` is told the server's uptime when a restart guard refused it. */
    const attempt = (name: string, limit: number, restarted: { uptime: number | undefined }): Effect.Effect<Option.Option<Held>, SemaphoreError> =>
      Effect.gen(function* () {
        const key = prefix + name
        const token = randomUUID()
        const sentAt = yield* Clock.currentTimeMillis
        const answer = yield* call(name, "acquire script failed", () => scripts.warpSemaphoreAcquire(key, limit, randomOffset(limit), token, leaseMs))
        restarted.uptime = typeof answer === "number" && answer <= -2 ? -2 - answer : undefined
        if (typeof answer === "number") return Option.none()
        const slot = Number(answer[0])
        const fence = BigInt(answer[1])
        const lost = yield* Deferred.make<void>()
        const lease: Lease = { validUntil: sentAt + leaseMs - marginMs, provenAt: sentAt, gone: false }
        const fiber = yield* keepLease(key, name, slot, token, lost, lease)
        // the holder-side deadline passed (a pause can outrun the deadline's own timer); a lease found gone
        // before it was lost, not lapsed (`lost` and `heldThrough` tell)
        const lapsed = Effect.map(Clock.currentTimeMillis, (t) => t >= lease.validUntil)
        const release = Fiber.interrupt(fiber).pipe(
          Effect.andThen(call(name, "release script failed", () => scripts.warpSemaphoreRelease(key, slot, token))),
          Effect.ignore
        )
        // the run's end `at`: a renewal sent at or after it found the lease this holder's; or, the lease
        // not found gone (only unrenewed: Redis unreachable, or this process paused), `at` came before the
        // holder's own deadline, before which Redis cannot have let the lease expire (a Redis restarted
        // meanwhile grants nothing for one lease after its start). A lease found gone may have been
        // removed at any time since the last renewal: without a later renewal, no verdict of held
        const heldThrough = Effect.map(Clock.currentTimeMillis, (at) =>
          Effect.sync(() => (lease.provenAt >= at || (!lease.gone && at < lease.validUntil) ? true : false))
        )
        return Option.some({ slot: { name, index: slot, lost: Deferred.await(lost), fence, lapsed, heldThrough }, release })
      })

    const service: SemaphoreProviderService = {
      tryAcquire: (name, limit, timeout) =>
        Effect.andThen(
          validateLimit(name, limit),
          Effect.suspend(() => {
            const restarted: { uptime: number | undefined } = { uptime: undefined }
            return Effect.flatMap(acquireWith(attempt(name, limit, restarted), timeout, every), (slot) =>
              Option.isNone(slot) && restarted.uptime !== undefined
                ? Effect.fail(
                    new SemaphoreError({
                      name,
                      message: `Redis restarted ${restarted.uptime} s ago: no slot is granted until one lease (${leaseMs} ms) has passed since its start, while holders from before the restart may still run`
                    })
                  )
                : Effect.succeed(slot)
            )
          })
        )
    }
    return service
  })

/**
 * What a holder knows of its lease: until when (epoch ms, counted from the send of the last successful
 * call, minus the margin) Redis cannot have let it expire, when that call was sent, and whether a
 * renewal found it gone or taken over.
 */
interface Lease {
  validUntil: number
  provenAt: number
  gone: boolean
}

/** A Redis provider Layer owning its own ioredis client (connected when built, closed with the Layer). */
export const layer = (options: RedisLayerOptions = {}): Layer.Layer<SemaphoreProvider, SemaphoreError | MissingPeerDependency> =>
  Layer.effect(
    SemaphoreProvider,
    Effect.gen(function* () {
      const { Redis } = yield* importPeer("ioredis", "warp-effect/redis", () => import("ioredis"))
      const client = yield* Effect.acquireRelease(
        Effect.sync(() => {
          const leaseMs = Duration.toMillis(Duration.fromInputUnsafe(options.lease ?? "10 seconds"))
          // a Redis that stops answering fails calls instead of hanging them (the deadline needs answers)
          const defaults = { lazyConnect: true, maxRetriesPerRequest: 2, commandTimeout: Math.max(100, Math.min(2000, Math.round(leaseMs / 3))) }
          return typeof options.redis === "string"
            ? new Redis(options.redis, defaults)
            : new Redis({ host: "127.0.0.1", port: 6379, ...defaults, ...(options.redis as object) })
        }),
        (client) => Effect.promise(() => client.quit().catch(() => client.disconnect()))
      )
      // ioredis reconnects by itself; without a listener it prints every failed reconnection as an
      // "Unhandled error event". One warning when Redis becomes unreachable, one line when it is back.
      const runFork = Effect.runForkWith(yield* Effect.context<never>())
      let down = false
      client.on("error", (error: Error) => {
        if (down) return
        down = true
        runFork(Effect.logWarning(`Redis unreachable (${error.message}); retrying`))
      })
      client.on("ready", () => {
        if (!down) return
        down = false
        runFork(Effect.log("Redis reachable again"))
      })
      yield* Effect.tryPromise({
        try: () => client.connect(),
        catch: (cause) => new SemaphoreError({ name: "*", message: "could not connect to Redis", cause })
      })
      return yield* make(client, options)
    })
  )
