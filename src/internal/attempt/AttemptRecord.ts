/**
 * What one attempt keeps while it runs, in its own scope (provided by a layer of the attempt, so that
 * nothing of it outlives the attempt or is shared with another): whether its handler ran, how long,
 * and how its finalizing write went.
 *
 * @since 0.3.0
 */
import * as Context from "effect/Context"
import type { Outcome } from "../job/Outcome.js"

/** One attempt's record. */
export interface AttemptRecordState {
  /** The outcome its finalizing write recorded (a write lands once per attempt). */
  outcome: Outcome | undefined
  /** Whether its handler started (a claim whose handler never ran is not an attempt: the store gives its number back). */
  handlerRan: boolean
  /** How long its handler ran, ms: what a lane's batch sizing calls the job's length. */
  handlerMs: number
  /**
   * When (`performance.now()`) the run inside its slot ended — the handler and the behaviors around it
   * returned their outcome — if it did: the instant a slot's validity is judged at (see `SlotEnd`).
   */
  handlerEndedAt: number | undefined
  /** Under a reused slot: its finalizing write was forked (it owns the job's place in the worker's in-flight set until it lands). */
  writing: boolean
  /** Under a reused slot: the job was handed back to run after the slot's release (it stays in flight). */
  deferred: boolean
}

/** The running attempt's record. */
export class AttemptRecord extends Context.Service<AttemptRecord, AttemptRecordState>()("warp/AttemptRecord") {}

/** A fresh record. */
export const make = (): AttemptRecordState => ({ outcome: undefined, handlerRan: false, handlerMs: 0, handlerEndedAt: undefined, writing: false, deferred: false })

/** Whether the attempt's job needs no write from its scope's finalization: written, being written, or handed back. */
export const settled = (record: AttemptRecordState): boolean => record.outcome !== undefined || record.writing || record.deferred
