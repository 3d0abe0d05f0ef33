#!/usr/bin/env bash
# Prepares the "before" tree of the bench's before/after comparison (BENCH_BEFORE, see bench/README.md):
# a git worktree of one commit of this repository (default 44c18c5: warp-effect 0.2 on Effect 3, main
# before the Effect 4 port) under bench/.before/<commit> (gitignored), with that commit's own root
# install (`npm ci` from its own package-lock.json, so its Effect 3 packages), and this bench's child
# driver (lib/backlogChild.ts) copied into its bench/lib/, where it runs that tree's bench/systems/*.ts.
#
#   bash bench/lib/before.sh [commit]        prints the tree's path on its last line
#
# Idempotent: an existing tree of the commit is kept (its install too, when its node_modules is there);
# the driver is copied again every time. The main work tree is not touched (a worktree is a checkout of
# its own; `git worktree add --detach`, no branch is made).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench="$(dirname "$here")"
repo="$(git -C "$bench" rev-parse --show-toplevel)"
commit="$(git -C "$repo" rev-parse --verify "${1:-44c18c5}^{commit}")"
short="${commit:0:7}"
tree="$bench/.before/$short"

if [ ! -e "$tree/.git" ]; then
  mkdir -p "$bench/.before"
  # a stale registration (a folder removed by hand) would make `worktree add` refuse
  git -C "$repo" worktree prune
  echo "before.sh: git worktree add --detach $tree $short" >&2
  git -C "$repo" worktree add --detach "$tree" "$commit" >&2
fi
if [ "$(git -C "$tree" rev-parse HEAD)" != "$commit" ]; then
  echo "before.sh: $tree is not at $commit" >&2
  exit 1
fi
if [ ! -d "$tree/node_modules/effect" ] || [ "$tree/package-lock.json" -nt "$tree/node_modules/.package-lock.json" ]; then
  echo "before.sh: npm ci in $tree (its own lock file)" >&2
  (cd "$tree" && npm ci --no-audit --no-fund >&2)
fi
mkdir -p "$tree/bench/lib"
cp "$here/backlogChild.ts" "$tree/bench/lib/backlogChild.ts"
echo "before.sh: $tree: warp-effect $(node -p "require('$tree/package.json').version"), effect $(node -p "require('$tree/node_modules/effect/package.json').version")" >&2
echo "$tree"
