#!/usr/bin/env bash
# Set up and run benchmarks/gpu_check.py on a machine without network (the GPU machine), from
# the repository root.
#
#   bash benchmarks/gpu_check.sh fetch        # here, with network: the wheels the GPU machine
#                                             # lacks, for Python 3.12 x86_64, into .whl/
#   bash benchmarks/gpu_check.sh              # there (.whl/ carried): install .whl/ into
#                                             # /tmp/site, build the Cython extensions in place,
#                                             # run the check; ${OUT:-.}/gpu_check.json and .log
#   bash benchmarks/gpu_check.sh setup        # the setup alone (install, build, import check)
#   bash benchmarks/gpu_check.sh run --quick  # arguments after "run" go to gpu_check.py
#
# Environment: GPU_CHECK_WHEELS (the wheel folder, default .whl), GPU_CHECK_SITE (where they
# are installed, default /tmp/site), GPU_CHECK_PYTHON_VERSION (fetch: the target Python,
# default 3.12), GPU_CHECK_VERSIONS_FROM (fetch: the Python whose installed versions are
# fetched, default .venv/bin/python), GPU_CHECK_BUDGET (seconds for setup and check together,
# default 270; the check's hard limit adds 20), OUT (the folder of the JSON and the log, default .).
# "python3" is whatever python3 comes first on the PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=run
case "${1:-}" in
    fetch|setup|run) MODE=$1; shift ;;
esac
WHEELS=${GPU_CHECK_WHEELS:-.whl}
SITE=${GPU_CHECK_SITE:-/tmp/site}
OUT_DIR=${OUT:-.}
# what the GPU machine lacks: pydantic and its dependencies (typing-extensions too, for a
# pydantic newer than the machine's); setuptools (build/) only where python3 has none
PACKAGES="pydantic pydantic-core annotated-types typing-inspection typing-extensions"
BUILD_PACKAGES="setuptools"

fetch() {
    local pyv=${GPU_CHECK_PYTHON_VERSION:-3.12}
    local from=${GPU_CHECK_VERSIONS_FROM:-.venv/bin/python}
    [ -x "$from" ] || from=python3
    local specs=() build=() name version
    for name in $PACKAGES $BUILD_PACKAGES; do
        version=$("$from" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name")
        if [[ " $BUILD_PACKAGES " == *" $name "* ]]; then build+=("$name==$version"); else specs+=("$name==$version"); fi
    done
    mkdir -p "$WHEELS/build"
    rm -f "$WHEELS"/*.whl "$WHEELS"/build/*.whl
    local flags=(--no-deps --only-binary=:all: --python-version "$pyv" --implementation cp
                 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
                 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
    python3 -m pip download -q "${flags[@]}" -d "$WHEELS" "${specs[@]}"
    python3 -m pip download -q "${flags[@]}" -d "$WHEELS/build" "${build[@]}"
    if [ "$WHEELS" = ".whl" ] && [ -d .git/info ] && ! grep -qxF "/.whl/" .git/info/exclude 2>/dev/null; then
        echo "/.whl/" >> .git/info/exclude
    fi
    echo "wheels for Python $pyv in $WHEELS:"
    ls -1 "$WHEELS"/*.whl "$WHEELS"/build/*.whl
}

install_wheels() {
    mkdir -p "$SITE"
    if python3 -m pip --version >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$@"
    else    # no pip: a wheel is a zip archive of what goes on the path
        local w
        for w in "$@"; do python3 -m zipfile -e "$w" "$SITE"; done
    fi
}

# A JSON that says why the check could not start (the run's one chance leaves a record).
setup_failed() {
    local what=$1 log=$2
    python3 - "$OUT_DIR/gpu_check.json" "$what" "$log" <<'EOF'
import json, platform, sys
out, what, log = sys.argv[1:4]
with open(log, errors="replace") as f:
    tail = f.read()[-3000:]
json.dump({"check": "yamblab benchmarks/gpu_check.py", "finished": False, "setup_error": what,
           "log_tail": tail, "python": platform.python_version()}, open(out, "w"), indent=1)
EOF
    echo "gpu_check.sh: $what (see $OUT_DIR/gpu_check.json)" >&2
    exit 1
}

setup() {
    echo "gpu_check.sh: python3 is $(command -v python3) ($(python3 -V 2>&1)); wheels from $WHEELS into $SITE"
    local t0=$SECONDS tmp
    tmp=$(mktemp)
    shopt -s nullglob
    local wheels=("$WHEELS"/*.whl) build=("$WHEELS"/build/*.whl)
    shopt -u nullglob
    if [ ${#wheels[@]} -gt 0 ]; then
        install_wheels "${wheels[@]}" || setup_failed "installing the wheels of $WHEELS failed" /dev/null
    else
        echo "gpu_check.sh: no wheels in $WHEELS (run 'bash benchmarks/gpu_check.sh fetch' where there is network)"
    fi
    export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
    if ! python3 -c "import setuptools" 2>/dev/null; then
        [ ${#build[@]} -gt 0 ] || setup_failed "python3 has no setuptools and $WHEELS/build has no wheel of it" /dev/null
        install_wheels "${build[@]}" || setup_failed "installing setuptools from $WHEELS/build failed" /dev/null
    fi
    echo "gpu_check.sh: building the Cython extensions in place"
    if ! python3 setup.py -q build_ext --inplace -j "$(nproc 2>/dev/null || echo 4)" >"$tmp" 2>&1; then
        cat "$tmp"
        setup_failed "building the Cython extensions failed (python3 setup.py build_ext --inplace)" "$tmp"
    fi
    grep -v "^$" "$tmp" | tail -5 || true
    if ! python3 - >"$tmp" 2>&1 <<'EOF'
import os
import yamblab.games.yamb._engine as e, yamblab.games._dice_kernels as k, yamblab.oracle.yamb._turn as t
import yamblab.training.config  # pydantic
for m in (e, k, t):
    assert os.path.realpath(m.__file__).startswith(os.path.realpath(os.getcwd())), m.__file__
print("gpu_check.sh: the extensions import from the tree:", ", ".join(os.path.basename(m.__file__) for m in (e, k, t)))
EOF
    then
        cat "$tmp"
        setup_failed "the built extensions or yamblab.training.config do not import" "$tmp"
    fi
    cat "$tmp"
    rm -f "$tmp"
    echo "gpu_check.sh: setup took $((SECONDS - t0)) s"
}

case $MODE in
    fetch)
        fetch
        ;;
    setup|run)
        mkdir -p "$OUT_DIR"
        exec > >(tee -a "$OUT_DIR/gpu_check.log") 2>&1
        started=$SECONDS
        setup
        if [ "$MODE" = run ]; then
            # the whole command within about 5 minutes: the check's budget (its own default,
            # 270 s) less what the setup took, unless --budget is given
            budget=()
            if [[ " $* " != *" --budget"* ]]; then
                budget=(--budget $(( ${GPU_CHECK_BUDGET:-270} - (SECONDS - started) > 120 ?
                                     ${GPU_CHECK_BUDGET:-270} - (SECONDS - started) : 120 )))
            fi
            set +e
            PYTHONUNBUFFERED=1 python3 benchmarks/gpu_check.py --out "$OUT_DIR/gpu_check.json" ${budget[@]+"${budget[@]}"} "$@"
            rc=$?
            echo "gpu_check.sh: gpu_check.py exited with $rc"
            exit $rc
        fi
        ;;
esac
