/**
 * A producer process for `test/multiprocess/JobKeys.test.ts`: `node <bundle> '<json config>'`.
 *
 * Publisher + JobStorePg (no migrations: the parent ran them) on the given database. Prints `READY`,
 * waits for a line `GO` on stdin (so that every process starts at once), then submits each of
 * `keys` `rounds` times with `withJobKey(key, { mode })`, all concurrently, and prints one line
 * `RESULT <json>`: the `Submitted` answers as `[key, tag, id]`.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { Contract, JobParameters, JobStorePg, Publisher, Registry } from "warp-effect"

export interface ProducerConfig {
  readonly url: string
  readonly name: string
  readonly keys: ReadonlyArray<string>
  readonly rounds: number
  readonly mode: "keep" | "replace" | "replacePayload"
}

/** The contract the producers enqueue (no worker runs it). */
export const KeyedWork = Contract.job("MpKeyed", Schema.Struct({ proc: Schema.String, n: Schema.Number }))

const config = JSON.parse(process.argv[2] ?? "{}") as ProducerConfig

const go = new Promise<void>((resolve) => {
  let input = ""
  process.stdin.setEncoding("utf8")
  process.stdin.on("data", (d: string) => {
    input += d
    if (input.includes("GO")) {
      // stdin no longer keeps the process alive: it exits once its result is written
      process.stdin.destroy()
      resolve()
    }
  })
})

const env = Publisher.layer.pipe(
  Layer.provideMerge(Registry.layer({ handlers: [] })),
  Layer.provideMerge(JobStorePg.layerWithoutMigrations),
  Layer.provideMerge(PgClient.layer({ url: Redacted.make(config.url), maxConnections: 6, applicationName: config.name }))
)

const main = Effect.gen(function* () {
  const publisher = yield* Publisher.Publisher
  process.stdout.write("READY\n")
  yield* Effect.promise(() => go)
  const work = config.keys.flatMap((key) => Array.from({ length: config.rounds }, (_, n) => ({ key, n })))
  const results = yield* Effect.forEach(
    work,
    ({ key, n }) =>
      Effect.map(
        publisher.submit(KeyedWork, { proc: config.name, n }, JobParameters.make().withJobKey(key, { mode: config.mode })),
        (s) => [key, s._tag, s.id] as const
      ),
    { concurrency: 32 }
  )
  process.stdout.write(`RESULT ${JSON.stringify(results)}\n`)
})

NodeRuntime.runMain(main.pipe(Effect.provide(env)))
