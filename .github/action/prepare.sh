#!/usr/bin/env bash
# The prepare step of action.yml. Writes to $GITHUB_OUTPUT:
# - key: the build cache's key, from the action's own files (never `github.action_ref`, which a
#   composite action does not get reliably, and which a moving ref never changes): its Cargo.lock,
#   its version, and its sources, so that a branch that changes the code rebuilds;
# - restore-prefix: the key's stable part, for a partial restore (the cargo registry);
# - cargo: `present` or `missing` (the action then installs a stable toolchain, if it builds);
# - version and sources: what release.sh compares with a release's `sources` file (the same
#   hashes, published by .github/workflows/release.yml), to use its binary.
# Runnable locally: GITHUB_ACTION_PATH defaults to this repository, GITHUB_OUTPUT to stdout.
set -euo pipefail

root=${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/../.." && pwd)}
hash() { sha256sum | cut -c1-16; }

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
lock=$(hash < "$root/Cargo.lock")
sources=$(cd "$root" && find Cargo.toml build.rs src cases schemas -type f | LC_ALL=C sort | xargs sha256sum | hash)
prefix="bankconf-${RUNNER_OS:-$(uname -s)}-${RUNNER_ARCH:-$(uname -m)}-"
cargo=missing
command -v cargo >/dev/null 2>&1 && cargo=present
lines=("key=${prefix}v$version-$lock-$sources" "restore-prefix=$prefix" "cargo=$cargo" "version=$version"
       "sources=$lock-$sources")
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf '%s\n' "${lines[@]}" >> "$GITHUB_OUTPUT"
else
    printf '%s\n' "${lines[@]}"
fi
