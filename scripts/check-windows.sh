#!/usr/bin/env bash
# Run the Rust kernels' tests as a Windows program, under Wine, from Linux:
#   1. the extension (pyo3 included) passes clippy for x86_64-pc-windows-msvc and -gnu;
#   2. rust/kernels (pure Rust: the vector file, its lock, replace_file, the SIMD top-k)
#      is built as its own crate for x86_64-pc-windows-gnu with MinGW, without pyo3 (a
#      copy of rust/errors.rs without its Python conversion stands in for crate::errors);
#   3. its tests run under wine64: positional I/O through seek_read/seek_write, LockFileEx,
#      and the move-aside replace (Wine, like Windows, refuses a rename over a mapped file).
#
# Usage: scripts/check-windows.sh [WORKDIR]    (default: a new temporary folder)
# Needs: rustup targets x86_64-pc-windows-gnu and x86_64-pc-windows-msvc, and
#        apt-get install gcc-mingw-w64-x86-64-posix wine64
# Not proven here: the Python layer on Windows (no Windows CPython under Wine here); the
# Windows job of .github/workflows/release.yml runs the tests on Windows itself.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d -t cortex-windows-XXXXXX)}
wine=${WINE:-/usr/lib/wine/wine64}
say() { printf '\ncheck-windows: %s\n' "$*" >&2; }

say "1. clippy for Windows (the extension, pyo3 included)"
for target in x86_64-pc-windows-msvc x86_64-pc-windows-gnu; do
    (cd "$root" && PYO3_CROSS_PYTHON_VERSION=3.11 cargo clippy --quiet --target "$target" \
        --all-targets -- -D warnings)
    say "clippy clean for $target"
done

say "2. the kernels as a crate of their own in $work"
mkdir -p "$work/src" "$work/.cargo"
cp "$root/Cargo.lock" "$work/"
memmap=$(sed -n 's/^memmap2 = \(.*\)$/\1/p' "$root/Cargo.toml")
libc=$(sed -n 's/^libc = \(.*\)$/\1/p' "$root/Cargo.toml")
proptest=$(sed -n 's/^proptest = \(.*\)$/\1/p' "$root/Cargo.toml")
cat > "$work/Cargo.toml" <<EOF
[package]
name = "cortex-kernels-windows"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
memmap2 = $memmap
libc = $libc

[dev-dependencies]
proptest = $proptest
EOF
sed '/^mod py {/,$d' "$root/rust/errors.rs" > "$work/src/errors.rs"
cat > "$work/src/lib.rs" <<EOF
//! rust/kernels of cortex without pyo3 (scripts/check-windows.sh).
pub mod errors;
#[path = "$root/rust/kernels/mod.rs"]
pub mod kernels;
EOF
cat > "$work/.cargo/config.toml" <<EOF
[target.x86_64-pc-windows-gnu]
linker = "x86_64-w64-mingw32-gcc"
EOF
(cd "$work" && cargo test --quiet --target x86_64-pc-windows-gnu --no-run)
exe=$(ls -t "$work"/target/x86_64-pc-windows-gnu/debug/deps/cortex_kernels_windows-*.exe | head -1)

# Wine 8 has no bcryptprimitives.dll, from which Rust's std (>= 1.78) imports ProcessPrng:
# a stand-in over RtlGenRandom, beside the test program (never shipped).
cat > "$work/bcryptprimitives.c" <<'EOF'
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID, ULONG);
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n; len -= n;
    }
    return TRUE;
}
EOF
x86_64-w64-mingw32-gcc -shared -O2 -o "$(dirname "$exe")/bcryptprimitives.dll" \
    "$work/bcryptprimitives.c" -ladvapi32

say "3. the kernels' tests, as a Windows program under $("$wine" --version)"
WINEDEBUG=-all WINEPREFIX="$work/wineprefix" "$wine" "$exe" --test-threads 1
say "ok: rust/kernels passes its tests under Wine ($work)"
