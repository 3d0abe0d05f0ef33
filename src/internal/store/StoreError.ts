/**
 * @since 0.1.0
 */
import * as Data from "effect/Data"

/** The job store could not be read or written (connection lost, constraint, ...). */
export class StoreError extends Data.TaggedError("StoreError")<{
  readonly operation: string
  readonly cause: unknown
}> {
  override get message(): string {
    return `JobStore.${this.operation} failed: ${String((this.cause as any)?.message ?? this.cause)}`
  }
}
