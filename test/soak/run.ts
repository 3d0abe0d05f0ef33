/**
 * `npm run soak [-- --flag value ...]`: the soak / fault harness at scale (see `harness.ts`).
 * Uses DATABASE_URL (a fresh database is created on that server) or an embedded PostgreSQL.
 *
 * Flags: --processes 4 --fibers 6 --jobs 100000 --keys 100 --fault-every-ms 2000
 *        --kill 1 --terminate 1 --interrupt 1 (fault weights; 0 disables a kind)
 *        --max-handler-ms 4 --fail-rate 0.01 --ping-ms 100 --lease-ms 4000 --poll-ms 20
 *        --timeout-ms 1800000 --seed 1 --keep (keep the database) --slot-reuse (workers reuse Wait-mode slots)
 *        --provider redis (Redis leases at REDIS_URL, default redis://127.0.0.1:6379) --redis-lease-ms 2000
 *        --group-keys 4 --group-total 3 (keys under one total cap; 0: none) --cancel-running-keys 3 (0: none)
 *        --cap-share 0.1 (share of the jobs on those keys) --group-ms 40 --cancel-running-ms 100 (their handler times) --cancel-check-ms 50
 *        --pause 1 --pause-long 1 (SIGSTOP weights) --pause-ms 500 --pause-long-ms 3000 (below / beyond --slot-deadline-ms)
 *        --redis-faults restart,stall (with --provider redis: a private redis-server, restarted / stalled; weight 1 each,
 *        or --redis-restart W --redis-stall W) --redis-stall-ms MS (default twice the lease)
 *        --writes fenced|unfenced (resource writes by every keyed handler) --no-lapse-check --ignore-slot-loss (ablations)
 * Exits 1 unless every check passed.
 */
import { EmbeddedPostgres } from "warp-effect/testing"
import { defaults, formatSummary, passed, runSoak, type SoakOptions } from "./harness.js"

const args = process.argv.slice(2)
const flag = (name: string): string | undefined => {
  const i = args.indexOf(`--${name}`)
  return i === -1 ? undefined : args[i + 1]
}
const num = (name: string, fallback: number): number => {
  const v = flag(name)
  if (v === undefined) return fallback
  const n = Number(v)
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} expects a non-negative number, got '${v}'`)
  return n
}
if (args.includes("--help")) {
  console.log("usage: npm run soak -- [--processes N] [--fibers N] [--jobs N] [--keys N] [--fault-every-ms MS] [--fault-window-ms MS] [--kill W] [--terminate W] [--interrupt W] [--max-handler-ms MS] [--fail-rate R] [--ping-ms MS] [--lease-ms MS] [--slot-deadline-ms MS] [--no-lock-delay] [--poll-ms MS] [--min-uptime-ms MS] [--timeout-ms MS] [--seed N] [--keep] [--slot-reuse] [--provider pg|redis] [--redis-lease-ms MS] [--group-keys N] [--group-total N] [--cancel-running-keys N] [--cap-share R] [--group-ms MS] [--cancel-running-ms MS] [--cancel-check-ms MS] [--pause W] [--pause-long W] [--pause-ms MS] [--pause-long-ms MS] [--redis-faults restart,stall] [--redis-restart W] [--redis-stall W] [--redis-stall-ms MS] [--writes fenced|unfenced] [--no-lapse-check] [--ignore-slot-loss]")
  process.exit(0)
}

const provider = flag("provider") ?? "pg"
if (provider !== "pg" && provider !== "redis") throw new Error(`--provider expects pg or redis, got '${provider}'`)

const redisFaults = (flag("redis-faults") ?? "").split(",").filter((f) => f !== "")
for (const f of redisFaults) if (f !== "restart" && f !== "stall") throw new Error(`--redis-faults expects restart and/or stall, got '${f}'`)
const writes = flag("writes")
if (writes !== undefined && writes !== "fenced" && writes !== "unfenced") throw new Error(`--writes expects fenced or unfenced, got '${writes}'`)

const main = async () => {
  const given = process.env.DATABASE_URL
  const server = given !== undefined && given !== "" ? undefined : await EmbeddedPostgres.start({ maxConnections: 400 })
  try {
    const options: SoakOptions = {
      ...defaults,
      serverUrl: given !== undefined && given !== "" ? given : server!.url,
      processes: num("processes", defaults.processes),
      fibers: num("fibers", defaults.fibers),
      jobs: num("jobs", defaults.jobs),
      keys: num("keys", defaults.keys),
      faultEveryMs: num("fault-every-ms", defaults.faultEveryMs),
      ...(flag("fault-window-ms") === undefined ? {} : { faultWindowMs: num("fault-window-ms", 0) }),
      weights: {
        kill: num("kill", defaults.weights.kill),
        terminate: num("terminate", defaults.weights.terminate),
        interrupt: num("interrupt", defaults.weights.interrupt),
        pause: num("pause", 0),
        pauseLong: num("pause-long", 0),
        redisRestart: num("redis-restart", redisFaults.includes("restart") ? 1 : 0),
        redisStall: num("redis-stall", redisFaults.includes("stall") ? 1 : 0)
      },
      pauseMs: num("pause-ms", 500),
      pauseLongMs: num("pause-long-ms", 3_000),
      ...(flag("redis-stall-ms") === undefined ? {} : { redisStallMs: num("redis-stall-ms", 0) }),
      ...(writes === undefined ? {} : { writes }),
      lapseCheck: !args.includes("--no-lapse-check"),
      ignoreSlotLoss: args.includes("--ignore-slot-loss"),
      maxHandlerMs: num("max-handler-ms", defaults.maxHandlerMs),
      failRate: num("fail-rate", defaults.failRate),
      pingMs: num("ping-ms", defaults.pingMs),
      leaseMs: num("lease-ms", defaults.leaseMs),
      slotDeadlineMs: num("slot-deadline-ms", defaults.slotDeadlineMs),
      lockDelay: !args.includes("--no-lock-delay"),
      pollMs: num("poll-ms", defaults.pollMs),
      minUptimeMs: num("min-uptime-ms", 1_000),
      timeoutMs: num("timeout-ms", defaults.timeoutMs),
      seed: num("seed", defaults.seed),
      keep: args.includes("--keep"),
      slotReuse: args.includes("--slot-reuse"),
      provider,
      redisLeaseMs: num("redis-lease-ms", defaults.redisLeaseMs),
      groupKeys: num("group-keys", defaults.groupKeys),
      groupTotal: Math.max(1, num("group-total", defaults.groupTotal)),
      cancelRunningKeys: num("cancel-running-keys", defaults.cancelRunningKeys),
      capShare: num("cap-share", defaults.capShare),
      groupHandlerMs: num("group-ms", defaults.groupHandlerMs),
      cancelRunningHandlerMs: num("cancel-running-ms", defaults.cancelRunningHandlerMs),
      cancelCheckMs: Math.max(1, num("cancel-check-ms", defaults.cancelCheckMs))
    }
    console.log(`soak: ${JSON.stringify({ ...options, serverUrl: undefined, log: undefined })}`)
    const summary = await runSoak(options)
    console.log(formatSummary(summary))
    process.exitCode = passed(summary) ? 0 : 1
  } finally {
    await server?.stop()
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
