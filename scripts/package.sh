#!/usr/bin/env bash
# Builds the release archive of one target, as .github/workflows/release.yml does for each:
#   dist/bankconf-v<version>-<target>.tar.gz, holding bankconf-v<version>-<target>/ with
#     bankconf            the binary
#     man/*.1             the man pages (`bankconf man`, as docs/man)
#     completions/        bankconf.bash, _bankconf (zsh), bankconf.fish, bankconf.elv, _bankconf.ps1
#     LICENSE-MIT LICENSE-APACHE README.md
#   and its SHA-256 sum beside it (<archive>.sha256, `sha256sum -c` format).
# The names are the ones Cargo.toml's [package.metadata.binstall] resolves to (tests/action.rs).
# Reproducible: the same binary gives the same archive, byte for byte (tests/action.rs runs it
# twice): the binary stripped, every entry dated SOURCE_DATE_EPOCH (default: the last commit's
# time, else 0), names sorted, owner 0:0 numeric, fixed modes, gzip without name or time (-n).
#
# Usage: scripts/package.sh [--target TRIPLE] [--bin PATH] [--out DIR]
#   --target  the target triple the archive is named after (default: the host's, from rustc)
#   --bin     a bankconf already built for that target (default: cargo build --release --locked)
#   --out     where the archive goes (default: dist/)
# The man pages and completions are written by the binary itself: with --bin for another
# architecture, give BANKCONF_HOST_BIN, a bankconf of this machine built from the same commit.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target="" bin="" out="$root/dist"
while [ $# -gt 0 ]; do
    case "$1" in
        --target) target=${2:?--target needs a triple}; shift 2 ;;
        --bin) bin=${2:?--bin needs a path}; shift 2 ;;
        --out) out=${2:?--out needs a folder}; shift 2 ;;
        *) echo "usage: scripts/package.sh [--target TRIPLE] [--bin PATH] [--out DIR]" >&2; exit 2 ;;
    esac
done

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
if [ -z "$target" ]; then
    target=$(rustc -vV | sed -n 's/^host: //p')
fi
if [ -z "$bin" ]; then
    cargo build --release --locked --target "$target" --manifest-path "$root/Cargo.toml" >&2
    bin="${CARGO_TARGET_DIR:-$root/target}/$target/release/bankconf"
fi
[ -x "$bin" ] || { echo "package.sh: no executable bankconf at $bin" >&2; exit 2; }
runs=${BANKCONF_HOST_BIN:-$bin}

name="bankconf-v$version-$target"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
dir="$stage/$name"
mkdir -p "$dir/man" "$dir/completions"
cp "$bin" "$dir/bankconf"
chmod 755 "$dir/bankconf"
# Stripped (a release build is already, Cargo.toml's profile): no symbol table, no debug info.
# The host's strip may not know another architecture's binary; then it is left as built.
strip=${STRIP:-strip}
if command -v "$strip" >/dev/null 2>&1; then
    "$strip" "$dir/bankconf" 2>/dev/null || echo "package.sh: $strip could not strip $bin (left as built)" >&2
fi
# The release's day on each man page's .TH line (docs/man, written without it, has none).
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}
SOURCE_DATE_EPOCH="$epoch" "$runs" man "$dir/man"
"$runs" completions bash > "$dir/completions/bankconf.bash"
"$runs" completions zsh > "$dir/completions/_bankconf"
"$runs" completions fish > "$dir/completions/bankconf.fish"
"$runs" completions elvish > "$dir/completions/bankconf.elv"
"$runs" completions powershell > "$dir/completions/_bankconf.ps1"
cp "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$root/README.md" "$dir/"

mkdir -p "$out"
# The same inputs, the same archive: fixed dates (epoch, above), modes, owners and order, gzip
# without a time.
find "$dir" -type d -exec chmod 755 {} +
find "$dir" -type f ! -name bankconf -exec chmod 644 {} +
gnu_tar=""
for candidate in gtar tar; do
    if "$candidate" --version 2>/dev/null | grep -q GNU; then gnu_tar=$candidate; break; fi
done
if [ -n "$gnu_tar" ]; then
    "$gnu_tar" -C "$stage" --format=gnu --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
        -cf - "$name" | gzip -n -9 > "$out/$name.tar.gz"
else
    # bsdtar (macOS without gtar): the names sorted by hand, the dates set on the files.
    find "$dir" -exec touch -h -d "$(date -u -r "$epoch" +%Y-%m-%dT%H:%M:%S 2>/dev/null || date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%S)" {} +
    (cd "$stage" && find "$name" | LC_ALL=C sort | tar -c -n --uid 0 --gid 0 --uname "" --gname "" -T - -f -) |
        gzip -n -9 > "$out/$name.tar.gz"
fi
if command -v sha256sum >/dev/null 2>&1; then
    (cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
else
    (cd "$out" && shasum -a 256 "$name.tar.gz" > "$name.tar.gz.sha256")
fi
echo "$out/$name.tar.gz"
