/**
 * A small SVG writer: one horizontal bar chart per panel, panels stacked. No dependencies; the output
 * is plain SVG 1.1 text.
 */

/** One bar. */
export interface Bar {
  readonly label: string
  readonly value: number
  /** Text after the bar (default: the value). */
  readonly note?: string
  /** Highlights this project's bars. */
  readonly ours?: boolean
}

/** One panel: a title, a unit and its bars. */
export interface Panel {
  readonly title: string
  readonly unit: string
  readonly bars: ReadonlyArray<Bar>
  /** Which way is better (shown in the title; default higher). */
  readonly better?: "higher" | "lower" | "neither"
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

/** Renders panels into one SVG document. */
export const render = (title: string, subtitle: string, panels: ReadonlyArray<Panel>): string => {
  const width = 960
  const labelW = 250
  const noteW = 230
  const barH = 18
  const gap = 6
  const plotW = width - labelW - noteW - 20
  const out: Array<string> = []
  // the subtitle, wrapped at commas
  const sub: Array<string> = [""]
  for (const part of subtitle.split(", ")) {
    const line = sub[sub.length - 1]!
    if (line.length > 0 && line.length + part.length > 130) sub.push(part)
    else sub[sub.length - 1] = line.length === 0 ? part : `${line}, ${part}`
  }
  let y = 44 + sub.length * 16
  for (const p of panels) {
    const max = Math.max(...p.bars.map((b) => (Number.isFinite(b.value) ? b.value : 0)), 1e-9)
    out.push(`<text x="10" y="${y}" class="panel">${esc(p.title)} <tspan class="unit">(${esc(p.unit)}${p.better === "neither" ? "" : p.better === "lower" ? ", lower is better" : ", higher is better"})</tspan></text>`)
    y += 10
    for (const b of p.bars) {
      const v = Number.isFinite(b.value) ? b.value : 0
      const w = Math.max(1, (v / max) * plotW)
      out.push(`<text x="${labelW - 6}" y="${y + barH - 5}" class="label" text-anchor="end">${esc(b.label)}</text>`)
      out.push(`<rect x="${labelW}" y="${y}" width="${w.toFixed(1)}" height="${barH}" class="${b.ours ? "ours" : "peer"}"/>`)
      out.push(`<text x="${(labelW + w + 6).toFixed(1)}" y="${y + barH - 5}" class="note">${esc(b.note ?? String(b.value))}</text>`)
      y += barH + gap
    }
    y += 26
  }
  const height = y
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">`,
    `<style>.title{font-size:18px;font-weight:bold}.sub{font-size:12px;fill:#555}.panel{font-size:14px;font-weight:bold}.unit{font-weight:normal;fill:#555;font-size:12px}.label{font-size:12px}.note{font-size:12px;fill:#222}.ours{fill:#2f6fb5}.peer{fill:#9aa5b1}</style>`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="10" y="24" class="title">${esc(title)}</text>`,
    ...sub.map((line, i) => `<text x="10" y="${42 + i * 16}" class="sub">${esc(line)}</text>`),
    ...out,
    `</svg>`,
    ""
  ].join("\n")
}
