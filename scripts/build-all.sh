#!/usr/bin/env bash
# Builds the prebuilt binaries that can be built on a Linux x64 machine, in napi-rs's layout:
# artifacts/<triple>/lcm-native.<platform>.node for each target, then npm/<platform>/ (the
# platform packages, one .node each). Not part of `npm install`: contributors build their own
# platform with it; the release workflow (.github/workflows/release.yml) builds the rest.
#
#   npm run build:all                  # the four Linux targets
#   npm run build:all -- <triple>...   # some of them, or aarch64-apple-darwin /
#                                      # x86_64-apple-darwin (zig's libSystem stubs, no Apple
#                                      # SDK: built, not run; releases build them on macOS)
#
# Tools are installed on first use: the Rust targets (rustup), zig and cargo-zigbuild (PyPI,
# into ~/.cache/lcm-native/pytools), so a clean machine needs only rustup, python3 and npm.
set -euo pipefail
cd "$(dirname "$0")/.."

# glibc targets name the oldest glibc they run on (2.17: CentOS 7, Debian 8, Ubuntu 14.04).
ALL=(x86_64-unknown-linux-gnu.2.17 x86_64-unknown-linux-musl aarch64-unknown-linux-gnu.2.17 aarch64-unknown-linux-musl)
TARGETS=("${@:-${ALL[@]}}")
[ $# -gt 0 ] || TARGETS=("${ALL[@]}")

TOOLS="${LCM_TOOLS_DIR:-$HOME/.cache/lcm-native/pytools}"
if ! PYTHONPATH="$TOOLS" python3 -c 'import ziglang' 2>/dev/null || [ ! -x "$TOOLS/bin/cargo-zigbuild" ]; then
  echo "build-all: installing ziglang and cargo-zigbuild into $TOOLS" >&2
  python3 -m pip install --quiet --target "$TOOLS" ziglang==0.17.1 cargo-zigbuild==0.24.1 \
    || python3 -m pip install --quiet --target "$TOOLS" ziglang cargo-zigbuild
fi
# `zig` on PATH for napi's --cross-compile and cargo-zigbuild.
mkdir -p "$TOOLS/shim"
cat > "$TOOLS/shim/zig" <<EOF
#!/bin/sh
PYTHONPATH="$TOOLS" exec python3 -m ziglang "\$@"
EOF
chmod +x "$TOOLS/shim/zig"
export PATH="$TOOLS/shim:$TOOLS/bin:$PATH"
export PYTHONPATH="$TOOLS${PYTHONPATH:+:$PYTHONPATH}"

for t in "${TARGETS[@]}"; do
  rustup target add "${t%.2.17}" >/dev/null
done

for t in "${TARGETS[@]}"; do
  echo "build-all: $t" >&2
  started=$(date +%s)
  npx napi build --platform --release --cross-compile --target "$t" --output-dir "artifacts/${t%.2.17}" --no-js
  echo "build-all: $t built in $(( $(date +%s) - started )) s" >&2
done

# The platform packages (npm/<platform>/package.json is committed; the .node is copied in).
npx napi create-npm-dirs >/dev/null
for t in "${TARGETS[@]}"; do
  for f in artifacts/"${t%.2.17}"/*.node; do
    platform=$(basename "$f" .node)
    platform=${platform#lcm-native.}
    cp "$f" "npm/$platform/"
    echo "build-all: npm/$platform/$(basename "$f") ($(stat -c %s "$f") bytes)"
  done
done
