# Sourced by scripts/build-all.sh and scripts/run-emulated.sh: `windows_gnu` readies this Linux
# machine to build for x86_64-pc-windows-gnu — Debian's mingw-w64 (installed when run as root)
# as C compiler and linker, and the import library napi-build asks for (LIBNODE_PATH must hold
# a libnode.dll): an empty one for node.exe, as the addon imports nothing from it (napi's
# dyn-symbols). Cached in ~/.cache/lcm-native/win-libnode.
windows_gnu() {
  if ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
      || { echo "x86_64-pc-windows-gnu needs Debian's gcc-mingw-w64-x86-64 (apt-get install)" >&2; exit 2; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q gcc-mingw-w64-x86-64 >/dev/null
  fi
  local lib="$HOME/.cache/lcm-native/win-libnode"
  if [ ! -f "$lib/libnode.dll.a" ]; then
    mkdir -p "$lib"
    printf 'LIBRARY node.exe\nEXPORTS\n' > "$lib/node.def"
    x86_64-w64-mingw32-dlltool -d "$lib/node.def" -l "$lib/libnode.dll.a"
    # napi-build looks for this name only; the linker takes libnode.dll.a first.
    echo "placeholder for napi-build (see scripts/windows-gnu.sh)" > "$lib/libnode.dll"
  fi
  export LIBNODE_PATH="$lib"
  export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
  export CC_x86_64_pc_windows_gnu=x86_64-w64-mingw32-gcc
  export AR_x86_64_pc_windows_gnu=x86_64-w64-mingw32-ar
}
