#!/usr/bin/env bash
# Ray for the GPU machines, which have no Ray and cannot fetch it: its cp312 wheel (79 MB) is over one device
# call's 64 MiB, so it travels in two halves, one a call, joined there (the machine stays warm 30 s after a call:
# make the second call at once).
#
#   here, in the repository root, once:  bash experiments/carry_ray.sh prepare [NAME==VERSION ...]
#       downloads the wheels (Ray's version here, else 2.60.0; its dependencies the GPU image may lack; any NAME
#       given) into .carry-a (the first half of Ray's wheel and the small wheels) and .carry-b (the second half),
#       both ignored by git (.git/info/exclude)
#   call 1: carry [".carry-a"], command  bash experiments/carry_ray.sh stage
#   call 2: carry [".carry-b"], command  bash experiments/carry_ray.sh join && ...the measurement...
#       (join: the halves joined, the wheels installed with pip --no-index, warpcode installed --no-deps)
#
# The measurement of issue 26 is bench/batch_replicas.py's docstring. NCCL_NVLS_ENABLE=0 and the
# machine's other variables stay as they are: replicas use no NCCL.
set -euo pipefail
STAGE=/tmp/warpcode-carry
RAY_DEPENDENCIES="msgpack click jsonschema jsonschema-specifications referencing rpds-py attrs"

prepare() {
    local version exclude
    exclude=$(git rev-parse --git-path info/exclude)  # .git is a file in a worktree
    version=$(python3 -c 'import ray; print(ray.__version__)' 2>/dev/null || echo 2.60.0)
    for folder in .carry-a .carry-b .carry-download; do
        grep -qx "/$folder/" "$exclude" 2>/dev/null || echo "/$folder/" >>"$exclude"
    done
    rm -rf .carry-a .carry-b .carry-download && mkdir -p .carry-a .carry-b .carry-download
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .carry-download "ray==$version" $RAY_DEPENDENCIES "$@"
    local wheel
    wheel=$(ls .carry-download/ray-*.whl)
    basename "$wheel" >.carry-a/ray.whl.name
    split -n 2 -d "$wheel" .carry-download/ray.whl.part-
    mv .carry-download/ray.whl.part-00 .carry-a/ && mv .carry-download/ray.whl.part-01 .carry-b/
    rm "$wheel" && mv .carry-download/*.whl .carry-a/ && rm -r .carry-download
    du -sh .carry-a .carry-b
}

stage() {
    mkdir -p "$STAGE" && cp .carry-a/* "$STAGE/"
    echo "staged in $STAGE: $(ls "$STAGE" | tr '\n' ' ')"
}

join() {
    if [ ! -f "$STAGE/ray.whl.part-00" ]; then
        echo "the first half is not here (a fresh machine?): make call 1 (stage) again, then this one at once" >&2
        exit 1
    fi
    cp .carry-b/* "$STAGE/"
    local wheel
    wheel="$STAGE/$(cat "$STAGE/ray.whl.name")"
    cat "$STAGE"/ray.whl.part-* >"$wheel" && rm "$STAGE"/ray.whl.part-*
    # what the image already has satisfies the rest of Ray's needs; pip names anything still missing
    python3 -m pip install -q --no-index --find-links "$STAGE" "$STAGE"/*.whl
    python3 -m pip install -q --no-deps --no-build-isolation -e .
    python3 -c 'import ray, warpcode.agent.batch.ray_pool; print("ray", ray.__version__)'
}

"$@"
