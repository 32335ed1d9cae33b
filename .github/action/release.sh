#!/usr/bin/env bash
# The release step of action.yml: when the action's own sources are those of the release of its
# version (the `sources` hash prepare.sh computes equals the one that release published), it
# installs that release's binary, checked against its SHA-256 sum, and writes `installed=true`;
# otherwise (a branch, a commit between releases, no such release, no network, an unknown
# runner) `installed=false`, and the action builds from source as before. Never fails the job.
# Inputs (env): VERSION and SOURCES (prepare.sh's outputs), REPOSITORY (owner/name),
# RUNNER_OS, RUNNER_ARCH, RUNNER_TEMP; BANKCONF_RELEASE_URL replaces the download folder
# (tests use a file:// one).
set -uo pipefail

out() {
    if [ -n "${GITHUB_OUTPUT:-}" ]; then echo "$1" >> "$GITHUB_OUTPUT"; else echo "$1"; fi
}
fallback() {
    echo "bankconf: $1; building from source instead" >&2
    out "installed=false"
    exit 0
}

case "${RUNNER_OS:-}-${RUNNER_ARCH:-}" in
    Linux-X64) target=x86_64-unknown-linux-musl ;;
    Linux-ARM64) target=aarch64-unknown-linux-musl ;;
    macOS-ARM64) target=aarch64-apple-darwin ;;
    macOS-X64) target=x86_64-apple-darwin ;;
    *) fallback "no release binary for runner ${RUNNER_OS:-?}/${RUNNER_ARCH:-?}" ;;
esac
[ -n "${VERSION:-}" ] && [ -n "${SOURCES:-}" ] || fallback "no version or sources hash"
command -v curl >/dev/null 2>&1 || fallback "curl is missing"
url=${BANKCONF_RELEASE_URL:-https://github.com/${REPOSITORY:-bankconf/bankconf}/releases/download/v$VERSION}
name="bankconf-v$VERSION-$target"
dir="${RUNNER_TEMP:-/tmp}/bankconf-release"
rm -rf "$dir" && mkdir -p "$dir" || fallback "cannot create $dir"
get() { curl -fsSL --retry 2 --max-time 120 -o "$dir/$1" "$url/$1"; }

get "bankconf-v$VERSION-sources.txt" || fallback "no release v$VERSION"
released=$(tr -d '[:space:]' < "$dir/bankconf-v$VERSION-sources.txt")
[ "$released" = "$SOURCES" ] || fallback "the action's sources are not those of release v$VERSION"
get "$name.tar.gz" && get "$name.tar.gz.sha256" || fallback "release v$VERSION has no $name.tar.gz"
if command -v sha256sum >/dev/null 2>&1; then
    (cd "$dir" && sha256sum -c --status "$name.tar.gz.sha256") || fallback "$name.tar.gz does not match its SHA-256 sum"
else
    (cd "$dir" && shasum -a 256 -c --status "$name.tar.gz.sha256") || fallback "$name.tar.gz does not match its SHA-256 sum"
fi
tar -C "$dir" -xzf "$dir/$name.tar.gz" || fallback "cannot unpack $name.tar.gz"
"$dir/$name/bankconf" --version >/dev/null 2>&1 || fallback "the release binary does not run here"
if [ -n "${GITHUB_PATH:-}" ]; then echo "$dir/$name" >> "$GITHUB_PATH"; fi
echo "bankconf: release v$VERSION binary ($target)" >&2
out "installed=true"
out "bin=$dir/$name/bankconf"
