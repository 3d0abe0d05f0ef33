/**
 * A grouped horizontal bar chart rendered on the server as inline SVG (no script, no images).
 *
 * @since 0.1.0
 */
import { type Html, html } from "./Html.js"

/** One series: a name for the legend and a CSS class for its bars. */
export interface Series {
  readonly name: string
  readonly className: string
}

/** One group of bars (e.g. one job type): a value per series, in series order. */
export interface Group {
  readonly label: string
  readonly values: ReadonlyArray<number>
}

/** A "nice" axis step (1, 2 or 5 times a power of ten) for about `ticks` intervals up to `max`. */
export const niceStep = (max: number, ticks = 5): number => {
  if (max <= 0) return 1
  const rough = max / ticks
  const power = 10 ** Math.floor(Math.log10(rough))
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough)!
  return Math.max(1, step)
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s)

/** Renders the chart; `title` is the accessible name. */
export const barChart = (title: string, series: ReadonlyArray<Series>, groups: ReadonlyArray<Group>): Html => {
  const width = 1020
  const labelWidth = 210
  const right = 70
  const bar = 14
  const gap = 3
  const groupGap = 16
  const top = 34
  const groupHeight = series.length * (bar + gap) - gap
  const height = top + groups.length * (groupHeight + groupGap) + 24
  const max = Math.max(1, ...groups.flatMap((g) => g.values))
  const step = niceStep(max)
  const axisMax = Math.ceil(max / step) * step
  const plot = width - labelWidth - right
  const x = (v: number) => labelWidth + (v / axisMax) * plot
  const ticks = Array.from({ length: Math.round(axisMax / step) + 1 }, (_, i) => i * step)
  const legend = series.map(
    (s, i) => html`<g transform="translate(${labelWidth + i * 130},6)"><rect class="${s.className}" width="12" height="12" rx="2"></rect><text x="18" y="10.5" class="legend">${s.name}</text></g>`
  )
  const grid = ticks.map(
    (t) =>
      html`<line class="grid" x1="${x(t).toFixed(1)}" x2="${x(t).toFixed(1)}" y1="${top - 6}" y2="${height - 20}"></line><text class="tick" x="${x(t).toFixed(1)}" y="${height - 6}" text-anchor="middle">${t}</text>`
  )
  const bars = groups.map((g, gi) => {
    const y0 = top + gi * (groupHeight + groupGap)
    return html`<g><title>${g.label}: ${series.map((s, i) => `${s.name} ${g.values[i] ?? 0}`).join(", ")}</title><text class="label" x="${labelWidth - 10}" y="${y0 + groupHeight / 2 + 4}" text-anchor="end">${clip(g.label, 28)}</text>${series.map((s, i) => {
      const v = g.values[i] ?? 0
      const y = y0 + i * (bar + gap)
      const w = Math.max(v > 0 ? 2 : 0, x(v) - labelWidth)
      return html`<rect class="${s.className}" x="${labelWidth}" y="${y}" width="${w.toFixed(1)}" height="${bar}" rx="2"></rect><text class="value" x="${(labelWidth + w + 6).toFixed(1)}" y="${y + bar - 3}">${v}</text>`
    })}</g>`
  })
  return html`<svg class="chart" role="img" aria-label="${title}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" xmlns="http://www.w3.org/2000/svg">${legend}${grid}${bars}</svg>`
}
