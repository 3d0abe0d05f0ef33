/**
 * The registry: which handlers run which contracts in this process. Built from handler values by
 * `Registry.layer`, which captures the handlers' own requirements from the app's layers.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { AnyContract, RequestContract } from "./Contract.js"
import type { AnyHandler, Requirements } from "./Handler.js"
import type { Recurring } from "./Recurring.js"

/** A handler with its requirements already provided. */
export interface Registered {
  readonly handler: AnyHandler
  readonly context: Context.Context<never>
}

/** The registry service. */
export interface RegistryService {
  /** The handler of a row: a job's handler by type, or a message child's by type and handler name. */
  readonly lookup: (type: string, handler: string | null) => Option.Option<Registered>
  /** Every handler of a message type, in registration order. */
  readonly messageHandlers: (type: string) => ReadonlyArray<Registered>
  /** The contract registered under a type name. */
  readonly contract: (type: string) => Option.Option<AnyContract>
  /** Recurring registrations. */
  readonly recurring: ReadonlyArray<Recurring>
  /** Every registered handler, in registration order. */
  readonly handlers: ReadonlyArray<AnyHandler>
  /** Answers an in-memory request in-process. */
  readonly send: <A, B>(contract: RequestContract<string, A>, request: A) => Effect.Effect<B, unknown>
}

/** The registry tag. */
export class Registry extends Context.Service<Registry, RegistryService>()("warp/Registry") {}

/** Registration input: handlers and (optionally) recurring jobs. */
export interface RegistryInput<H extends ReadonlyArray<AnyHandler>> {
  readonly handlers: H
  readonly recurring?: ReadonlyArray<Recurring>
}

const keyOf = (type: string, handler: string | null) => (handler === null ? type : `${type}\u0000${handler}`)

/**
 * Builds the registry. Throws at layer construction on a duplicate registration (two handlers for one
 * job type, or two message handlers with one name) — that is a programming error, not bad input.
 */
export const make = <H extends ReadonlyArray<AnyHandler>>(input: RegistryInput<H>) =>
  Effect.map(Effect.context<Requirements<H[number]>>(), (ctx): RegistryService => {
    const context = ctx as Context.Context<never>
    const byKey = new Map<string, Registered>()
    const byMessage = new Map<string, Array<Registered>>()
    const contracts = new Map<string, AnyContract>()
    const requests = new Map<string, Registered>()
    for (const handler of input.handlers) {
      const reg: Registered = { handler, context }
      if (handler._tag === "RequestHandler") {
        requests.set(handler.contract.name, reg)
        continue
      }
      const isMessage = handler._tag === "MessageHandler"
      const key = keyOf(handler.contract.name, isMessage ? handler.name : null)
      if (byKey.has(key)) throw new Error(`Registry: two handlers registered for '${key.replace("\u0000", "/")}'`)
      byKey.set(key, reg)
      contracts.set(handler.contract.name, handler.contract as AnyContract)
      if (isMessage) byMessage.set(handler.contract.name, [...(byMessage.get(handler.contract.name) ?? []), reg])
    }
    for (const r of input.recurring ?? []) contracts.set(r.contract.name, r.contract)
    return {
      lookup: (type, handler) => Option.fromNullishOr(byKey.get(keyOf(type, handler))),
      messageHandlers: (type) => byMessage.get(type) ?? [],
      contract: (type) => Option.fromNullishOr(contracts.get(type)),
      recurring: input.recurring ?? [],
      handlers: input.handlers,
      send: <A, B>(contract: RequestContract<string, A>, request: A) => {
        const reg = requests.get(contract.name)
        if (reg === undefined || reg.handler._tag !== "RequestHandler") {
          return Effect.die(new Error(`No request handler registered for '${contract.name}'`))
        }
        return Effect.provide(reg.handler.run(request) as Effect.Effect<B, unknown, never>, reg.context)
      }
    }
  })

/** The registry as a Layer; it requires whatever the registered handlers require. */
export const layer = <const H extends ReadonlyArray<AnyHandler>>(
  input: RegistryInput<H>
): Layer.Layer<Registry, never, Requirements<H[number]>> => Layer.effect(Registry, make(input))
