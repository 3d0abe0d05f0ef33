/**
 * HTML built from a tagged template that escapes every interpolated value. Only values that are
 * already {@link Html} (from `html` itself or {@link raw}) are inserted as-is, so text from the
 * database, the request or the application can never become markup.
 *
 * @since 0.1.0
 */

/** A fragment of trusted HTML. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value
  }
}

/** What a template accepts: text (escaped), numbers, trusted fragments, lists of them, or nothing. */
export type Interpolation = Html | string | number | bigint | boolean | null | undefined | ReadonlyArray<Interpolation>

const replacements: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }

/** Escapes text for use in element content and in quoted attribute values. */
export const escape = (text: string): string => text.replace(/[&<>"']/g, (c) => replacements[c]!)

const render = (value: Interpolation): string => {
  if (value instanceof Html) return value.value
  if (value === null || value === undefined || value === false) return ""
  if (Array.isArray(value)) return (value as ReadonlyArray<Interpolation>).map(render).join("")
  return escape(String(value))
}

/** Builds trusted HTML; interpolations are escaped unless they already are {@link Html}. */
export const html = (strings: TemplateStringsArray, ...values: ReadonlyArray<Interpolation>): Html => {
  let out = strings[0]!
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!
  return new Html(out)
}

/** Marks a string as trusted HTML. Use only for markup this module's callers generated themselves. */
export const raw = (markup: string): Html => new Html(markup)
