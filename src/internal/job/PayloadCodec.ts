/**
 * The payload's way into the job row: encoded with the contract's schema, checked to survive the
 * JSON column unchanged, and decoded back — before anything is written. A payload that would come
 * back different (or not at all) is an {@link InvalidPayload} naming the path.
 *
 * Equality is the schema's own `Schema.toEquivalence`: a `-0` (which JSON writes as `0`) is accepted,
 * because the schema's equivalence holds `-0` and `0` equal; the handler receives `0`.
 *
 * @since 0.1.0
 */
import * as Equal from "effect/Equal"
import type * as Equivalence from "effect/Equivalence"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Describe from "../error/Describe.js"
import * as InvalidArgument from "../error/InvalidArgument.js"
import { InvalidPayload } from "./errors.js"

/**
 * What a payload is checked against: a contract's name and schema.
 *
 * @since 0.1.0
 * @category models
 */
export interface Codec<A, I> {
  readonly name: string
  readonly schema: Schema.Codec<A, I>
}

/**
 * One part of a payload that cannot be stored unchanged: where, what, which rule.
 *
 * @since 0.1.0
 * @category models
 */
export interface Problem {
  readonly path: ReadonlyArray<PropertyKey>
  readonly value: unknown
  readonly rule: string
}

/**
 * The first part of an encoded payload that JSON (and PostgreSQL's jsonb) would not give back as it
 * is, or undefined. Object members whose value is `undefined` are left to the round trip (JSON drops
 * them; the schema decides whether that is the same value).
 *
 * @since 0.1.0
 * @category validation
 */
export const firstUnstorable = (value: unknown): Problem | undefined => {
  const ancestors = new Set<object>()
  const go = (v: unknown, path: ReadonlyArray<PropertyKey>, inArray: boolean): Problem | undefined => {
    switch (typeof v) {
      case "string": {
        const rule = Describe.unstorableText(v)
        return rule === undefined ? undefined : { path, value: v, rule }
      }
      case "number":
        return Number.isFinite(v) ? undefined : { path, value: v, rule: "expected a finite number (JSON cannot carry NaN or Infinity)" }
      case "boolean":
        return undefined
      case "bigint":
        return { path, value: v, rule: "expected a JSON value (JSON has no bigint; encode it as a string, e.g. Schema.BigIntFromString)" }
      case "undefined":
        return inArray ? { path, value: v, rule: "expected a JSON value (JSON turns undefined in an array into null)" } : undefined
      case "function":
      case "symbol":
        return { path, value: v, rule: "expected a JSON value" }
    }
    if (v === null) return undefined
    const o = v as object
    if (ancestors.has(o)) return { path, value: v, rule: "is a circular reference (JSON cannot carry it)" }
    if (Array.isArray(o)) {
      ancestors.add(o)
      for (let i = 0; i < o.length; i++) {
        const p = i in o ? go(o[i], [...path, i], true) : { path: [...path, i], value: undefined, rule: "is a hole in an array (JSON turns it into null)" }
        if (p !== undefined) return p
      }
      ancestors.delete(o)
      return undefined
    }
    const proto = Object.getPrototypeOf(o)
    if (proto !== Object.prototype && proto !== null) {
      return {
        path,
        value: v,
        rule:
          o instanceof Date
            ? "expected a JSON value: a Date is stored as a string (use Schema.DateFromString, which encodes to an ISO string, rather than Schema.Date)"
            : "expected a JSON value (plain object, array, string, finite number, boolean or null), not a class instance"
      }
    }
    ancestors.add(o)
    for (const k of Object.keys(o)) {
      const keyRule = Describe.unstorableText(k)
      if (keyRule !== undefined) return { path: [...path, k], value: k, rule: `has a key that ${keyRule}` }
      const p = go((o as Record<string, unknown>)[k], [...path, k], false)
      if (p !== undefined) return p
    }
    ancestors.delete(o)
    return undefined
  }
  return go(value, [], false)
}

const isPlain = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u) && [Object.prototype, null].includes(Object.getPrototypeOf(u))

/** Where `sent` and `back` first differ (plain objects and arrays are walked; anything else is a leaf). */
const differenceAt = (sent: unknown, back: unknown, path: ReadonlyArray<PropertyKey>): Problem | undefined => {
  if (Array.isArray(sent) && Array.isArray(back) && sent.length === back.length) {
    for (let i = 0; i < sent.length; i++) {
      const d = differenceAt(sent[i], back[i], [...path, i])
      if (d !== undefined) return d
    }
    return undefined
  }
  if (isPlain(sent) && isPlain(back)) {
    for (const k of Object.keys(sent)) {
      if (!(k in back)) {
        return sent[k] === undefined
          ? { path: [...path, k], value: undefined, rule: "is undefined: JSON drops the field, and the schema tells a missing field from an undefined one (omit the field instead)" }
          : { path: [...path, k], value: sent[k], rule: "does not come back from JSON (the field is lost)" }
      }
      const d = differenceAt(sent[k], back[k], [...path, k])
      if (d !== undefined) return d
    }
    for (const k of Object.keys(back)) if (!(k in sent)) return { path: [...path, k], value: undefined, rule: `comes back from JSON as ${Describe.show(back[k])}` }
    return undefined
  }
  if (sent === back || Equal.equals(sent, back)) return undefined
  return { path, value: sent, rule: `does not come back from JSON unchanged (a worker would receive ${Describe.show(back)})` }
}

const firstDifference = (sent: unknown, back: unknown): Problem =>
  differenceAt(sent, back, []) ?? { path: [], value: sent, rule: `does not come back from JSON unchanged (a worker would receive ${Describe.show(back)})` }

const equivalences = new WeakMap<object, Equivalence.Equivalence<any>>()
const equivalenceOf = (schema: Schema.Schema<any>): Equivalence.Equivalence<any> => {
  let eq = equivalences.get(schema)
  if (eq === undefined) {
    try {
      eq = Schema.toEquivalence(schema)
    } catch {
      eq = Equal.equals
    }
    equivalences.set(schema, eq)
  }
  return eq
}

const fail = (entry: string, type: string, p: Problem, issue?: InvalidPayload["issue"]) =>
  new InvalidPayload({
    type,
    entry,
    path: p.path,
    value: p.value,
    rule: p.rule,
    issue,
    message: `${entry}: ${Describe.clause(type, { path: p.path, found: true, value: p.value, rule: p.rule })}`
  })

/**
 * Encodes `payload` for the job row. Succeeds with the JSON value to store — exactly what a worker
 * will read back — only if decoding it gives a value equal (under the schema's equivalence) to
 * `payload`; otherwise fails with {@link InvalidPayload} naming `entry`, the path, the rule and the
 * value. A contract whose name cannot be stored fails with {@link InvalidArgument.InvalidArgument}.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encode = <A, I>(
  entry: string,
  contract: Codec<A, I>,
  payload: A
): Result.Result<unknown, InvalidPayload | InvalidArgument.InvalidArgument> => {
  const type = contract.name
  const nameRule = InvalidArgument.nameRule(type)
  if (nameRule !== undefined) return Result.fail(InvalidArgument.make(entry, "the contract's name", type, nameRule))
  const encoded = Schema.encodeResult(contract.schema)(payload)
  if (Result.isFailure(encoded)) {
    const vs = Describe.violations(encoded.failure, payload)
    const v = vs[0] ?? { path: [], found: true, value: payload, rule: "does not match the schema" }
    const more = vs.length > 1 ? ` (and ${vs.length - 1} more)` : ""
    return Result.fail(
      new InvalidPayload({ type, entry, path: v.path, value: v.value, rule: v.rule, issue: encoded.failure, message: `${entry}: ${Describe.clause(type, v)}${more}` })
    )
  }
  const unstorable = firstUnstorable(encoded.success)
  if (unstorable !== undefined) return Result.fail(fail(entry, type, unstorable))
  const json: unknown = JSON.parse(JSON.stringify(encoded.success) ?? "null")
  const decoded = Schema.decodeUnknownResult(contract.schema)(json)
  if (Result.isFailure(decoded)) {
    const v = Describe.violations(decoded.failure, json)[0]
    const path = v?.path ?? []
    return Result.fail(
      fail(entry, type, { path, value: Describe.at(encoded.success, path).value, rule: `does not come back from JSON (${v?.rule ?? "it no longer matches the schema"})` }, decoded.failure)
    )
  }
  let same: boolean
  try {
    same = equivalenceOf(contract.schema)(decoded.success, payload)
  } catch {
    same = false
  }
  if (!same) {
    // an equivalence that falls back to reference equality (an empty struct) is not the last word:
    // plain data equal member by member (leaves by Equal.equals) arrives as it was sent
    const difference = differenceAt(payload, decoded.success, [])
    if (difference !== undefined || (!isPlain(payload) && !Array.isArray(payload))) {
      return Result.fail(fail(entry, type, difference ?? firstDifference(payload, decoded.success)))
    }
  }
  return Result.succeed(json)
}
