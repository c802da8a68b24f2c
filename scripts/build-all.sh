#!/usr/bin/env bash
# Builds the prebuilt binaries that can be built on a Linux x64 machine, in napi-rs's layout:
# artifacts/<triple>/lcm-native.<platform>.node for each target, then npm/<platform>/ (the
# platform packages, one .node each). Not part of `npm install`: contributors build their own
# platform with it; the release workflow (.github/workflows/release.yml) builds the rest.
#
#   npm run build:all                  # the four Linux targets and win32-x64
#                                      # (x86_64-pc-windows-gnu, below)
#   npm run build:all -- <triple>...   # some of them, or aarch64-apple-darwin /
#                                      # x86_64-apple-darwin (zig's libSystem stubs, no Apple
#                                      # SDK: built, not run; releases build them on macOS)
#
# Tools are installed on first use: the Rust targets (rustup), zig and cargo-zigbuild (PyPI,
# into ~/.cache/lcm-native/pytools), so a clean machine needs only rustup, python3 and npm;
# for win32-x64 also Debian's gcc-mingw-w64-x86-64 (installed when run as root).
#
# win32-x64 is built with mingw-w64 (x86_64-pc-windows-gnu): a DLL the official node.exe loads,
# with mingw's msvcrt as its C runtime, so it goes to npm/win32-x64-msvc/ (the package index.js
# picks for that node.exe; README, Platforms, says why this build and not MSVC's). napi-rs
# resolves Node's functions when the DLL loads (napi's dyn-symbols), so the DLL imports nothing
# from node.exe; napi-build still links an import library for `node`, from the folder
# LIBNODE_PATH names, which must hold a libnode.dll: an empty import library for node.exe
# (dlltool) and a placeholder for that name, made once in ~/.cache/lcm-native/win-libnode.
set -euo pipefail
cd "$(dirname "$0")/.."

# glibc targets name the oldest glibc they run on (2.17: CentOS 7, Debian 8, Ubuntu 14.04).
ALL=(x86_64-unknown-linux-gnu.2.17 x86_64-unknown-linux-musl aarch64-unknown-linux-gnu.2.17 aarch64-unknown-linux-musl x86_64-pc-windows-gnu)
TARGETS=("${@:-${ALL[@]}}")
[ $# -gt 0 ] || TARGETS=("${ALL[@]}")

TOOLS="${LCM_TOOLS_DIR:-$HOME/.cache/lcm-native/pytools}"
# zig builds every target but win32-x64's.
needs_zig=''
for t in "${TARGETS[@]}"; do [ "$t" = x86_64-pc-windows-gnu ] || needs_zig=1; done
if [ -n "$needs_zig" ] && { ! PYTHONPATH="$TOOLS" python3 -c 'import ziglang' 2>/dev/null || [ ! -x "$TOOLS/bin/cargo-zigbuild" ]; }; then
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

# The C compiler, linker and import library for x86_64-pc-windows-gnu (see the top).
. scripts/windows-gnu.sh

for t in "${TARGETS[@]}"; do
  echo "build-all: $t" >&2
  started=$(date +%s)
  if [ "$t" = x86_64-pc-windows-gnu ]; then
    windows_gnu
    # mingw's linker leaves empty temporary files behind (~80 a build): in a folder of its own.
    scratch=$(mktemp -d)
    TMPDIR="$scratch" npx napi build --platform --release --target "$t" --output-dir "artifacts/$t" --no-js
    rm -rf "$scratch"
  else
    npx napi build --platform --release --cross-compile --target "$t" --output-dir "artifacts/${t%.2.17}" --no-js
  fi
  echo "build-all: $t built in $(( $(date +%s) - started )) s" >&2
done

# The platform packages (npm/<platform>/package.json is committed; the .node is copied in).
npx napi create-npm-dirs >/dev/null
for t in "${TARGETS[@]}"; do
  for f in artifacts/"${t%.2.17}"/*.node; do
    platform=$(basename "$f" .node)
    platform=${platform#lcm-native.}
    # The mingw build is the one published for the official (MSVC-built) node.exe.
    [ "$platform" = win32-x64-gnu ] && platform=win32-x64-msvc
    cp "$f" "npm/$platform/lcm-native.$platform.node"
    echo "build-all: npm/$platform/lcm-native.$platform.node ($(stat -c %s "$f") bytes)"
  done
done
