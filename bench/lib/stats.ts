/** Small statistics helpers. */

/** The median (mean of the middle two for an even count); NaN when empty. */
export const median = (xs: ReadonlyArray<number>): number => {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

/** The p-th percentile (nearest rank), p in 0..100. */
export const percentile = (xs: ReadonlyArray<number>, p: number): number => {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!
}

/** A number for a table: 3 significant digits, thousands separated. */
export const fmt = (x: number, digits = 3): string => {
  if (!Number.isFinite(x)) return "—"
  if (Math.abs(x) >= 1000) return Math.round(x).toLocaleString("en-US")
  return Number(x.toPrecision(digits)).toString()
}
