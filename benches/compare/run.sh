#!/usr/bin/env bash
# neardex beside datasketch, rensa, gaoya and an exact prefix-filter join,
# on one generated corpus, in one run (issue 7).
#
#   bash benches/compare/run.sh [DOCS] [RUNS]      (defaults: 100000 3)
#
# DOCS is a number of generated pages, or `real`: the real pages of
# ../shared/data (1,562 HTML pages and the 45 responses of its WARC
# samples).
#
# Creates a Python virtual environment under benches/compare/target/venv
# (datasketch, rensa, pinned in requirements.txt), builds the harness,
# generates the corpus once per size under $COMPARE_DIR (default
# benches/compare/target/work), measures the write speed of the disk under
# it (COMPARE_DISK_PROBE=0 skips that), runs every tool RUNS times one after
# another, scores every tool's pairs against the exact pairs of its
# signatures, and prints the table (medians of the runs) that README's
# Performance section shows. Results: $COMPARE_DIR/DOCS/results.jsonl.
set -euo pipefail
docs=${1:-100000}
runs=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
work=${COMPARE_DIR:-$here/target/work}/$docs
venv=$here/target/venv

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
cargo build --quiet --release --manifest-path "$here/Cargo.toml"
bin=$here/target/release/neardex-compare

mkdir -p "$work"
if [ ! -f "$work/corpus.json" ]; then
    if [ "$docs" = real ]; then
        echo "writing the real pages of ../shared/data to $work" >&2
        "$bin" real "$work" >&2
    else
        echo "generating $docs pages in $work" >&2
        "$bin" gen "$docs" "$work" >&2
    fi
fi
# The write speed of the disk the indexes go to (1 GiB of zeros written
# and synced, then removed), which the ingest's figures depend on
# (README, "What limits ingest on this machine"); report.py prints it
# with the machine. COMPARE_DISK_PROBE=0 skips it.
if [ "${COMPARE_DISK_PROBE:-1}" != 0 ]; then
    { dd if=/dev/zero of="$work/.disk-probe" bs=4M count=256 conv=fdatasync 2>&1 || true; } \
        | tail -n 1 | sed -nE 's/.*, ([0-9.,]+ [kMG]?B\/s)$/\1/p' > "$work/disk.txt"
    rm -f "$work/.disk-probe"
else
    rm -f "$work/disk.txt"
fi
results=$work/results.jsonl
# COMPARE_APPEND=1 keeps earlier results (tools run in several invocations,
# e.g. at 1,000,000 pages); scores are recomputed from the pair files.
if [ -z "${COMPARE_APPEND:-}" ]; then
    : > "$results"
else
    grep -v '"score"' "$results" > "$results.tmp" 2>/dev/null || true
    mv "$results.tmp" "$results"
fi
# The harness's tools each run under the allocator they measured fastest
# under (HISTORY.md, "The allocator"): neardex and the prefix filter under
# mimalloc, gaoya under the system's malloc (its ingest, the figure the
# ratio takes, was 5% slower under mimalloc). COMPARE_ALLOCATOR=system or
# mimalloc puts every Rust tool under one.
allocator() { # tool
    if [ -n "${COMPARE_ALLOCATOR:-}" ]; then echo "$COMPARE_ALLOCATOR";
    elif [ "$1" = gaoya ]; then echo system; else echo mimalloc; fi
}
record() { # run allocator tool... : its JSON lines (one, or two with COMPARE_OPTIMIZE=1), tagged with the run and the allocator
    local run=$1 alloc=$2; shift 2
    echo "run $run ($alloc): $*" >&2
    COMPARE_ALLOCATOR=$alloc "$@" | python3 -c "
import json, sys
for line in sys.stdin:
    if line.strip():
        r = json.loads(line); r['run'] = $run; r['allocator'] = '$alloc'; print(json.dumps(r))" >> "$results"
}
# COMPARE_OPTIMIZE=1: neardex also optimizes its index (one segment) after
# its figures and measures queries and all pairs again (rows "-optimized").
# COMPARE_TOOLS picks tools (default: all), e.g. COMPARE_TOOLS="neardex gaoya";
# with COMPARE_APPEND=1 their results join those of earlier invocations.
# COMPARE_SCHEMES picks the signature kinds of prefix and neardex (default:
# both), e.g. COMPARE_SCHEMES=spotsigs.
tools=${COMPARE_TOOLS:-prefix neardex gaoya rensa datasketch}
schemes=${COMPARE_SCHEMES:-shingles spotsigs}
wants() { [[ " $tools " == *" $1 "* ]]; }
for run in $(seq 1 "$runs"); do
    for tool in prefix neardex; do
        if wants "$tool"; then
            for scheme in $schemes; do record "$run" "$(allocator "$tool")" "$bin" "$tool" "$work" "$scheme"; done
        fi
    done
    if wants gaoya; then record "$run" "$(allocator gaoya)" "$bin" gaoya "$work"; fi
    if wants rensa; then record "$run" python "$venv/bin/python" "$here/peers.py" "$work" rensa; fi
    if wants datasketch; then record "$run" python "$venv/bin/python" "$here/peers.py" "$work" datasketch; fi
done
# Quality against exact ground truth: the prefix-filter join's pairs (and
# the two exact tools must agree pair for pair).
score() { # tool truth-scheme
    if [ -f "$work/pairs-$1.txt" ] && [ -f "$work/pairs-prefix-$2.txt" ]; then
        echo "{\"score\": \"$1\", $("$bin" score "$work/pairs-prefix-$2.txt" "$work/pairs-$1.txt" | cut -c2-)" >> "$results"
    fi
}
for tool in neardex-shingles gaoya rensa datasketch; do score "$tool" shingles; done
score neardex-spotsigs spotsigs
python3 "$here/report.py" "$results" "$work/corpus.json" "$venv"
