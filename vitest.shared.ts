import { fileURLToPath } from "node:url"

/** `warp-effect` and its subpaths resolve to the sources in tests, as `paths` does for tsc and tsx. */
export const alias = [
  { find: /^warp-effect\/testing\/vitest$/, replacement: fileURLToPath(new URL("./src/testing/vitest.ts", import.meta.url)) },
  { find: /^warp-effect\/(testing|provider|redis|dashboard)$/, replacement: fileURLToPath(new URL("./src/$1.ts", import.meta.url)) },
  { find: /^warp-effect$/, replacement: fileURLToPath(new URL("./src/index.ts", import.meta.url)) }
]
