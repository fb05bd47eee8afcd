"""Alternated runs of two or more builds of the harness on one index: how
HISTORY.md's "alternated pairs" are measured.

    python3 benches/compare/ab.py [--queries] [--passes N] DIR SCHEME ROUNDS BIN BIN...

DIR is a corpus directory that `run.sh` (or `neardex-compare neardex`)
left an index in (`DIR/neardex-SCHEME`); each BIN a `neardex-compare`
built from the code to compare (copy `target/release/neardex-compare`
aside after each build). Every round runs each BIN once, one after
another, the order rotated from round to round (on these shared machines
which build runs first in a pair has weighed more than a small change).

Default: the self-join alone (`NO_QUERIES=1 BIN requery DIR SCHEME`): its
seconds, the process's CPU seconds, and the md5 of the pairs it wrote,
which must be the same for every run (the join is exact, so a change that
alters them is a bug). `--queries`: the warm single queries instead
(`REQUERY_WARM_UP=pages REQUERY_PASSES=N NO_JOIN=1`, N = `--passes`,
default 20): the median of the warm passes' mean query times, µs.
`--ingest`: the load instead (`INGEST_ONLY=1 NO_SIGN_ONLY=1
COMPARE_BULK=200000 BIN neardex DIR SCHEME`, `COMPARE_BULK` as set if
it is): its seconds, CPU seconds and peak RSS, the seconds of its last
commit that wrote a segment (the one nothing else overlaps: the load's
tail, and a commit's latency on an idle machine), and a CRC32 of the
index's segment files, which must be the same for every run (a change to how a
load is made must not change what it writes).

Prints each run, then for each BIN the median and range, and against the
first BIN the rounds it was faster in and the median of its per-round
time ratio. A difference inside the range of either build's runs is not
a result.
"""
import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import zlib


def md5(path):
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run(binary, args, env):
    """Runs `binary args` to its end: (stdout, stderr, CPU seconds, peak
    RSS MiB), the last two its own (`wait4`); exits on a failure."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen([binary, *args], env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if child.returncode != 0:
        sys.exit(f"{binary} failed ({child.returncode}):\n{stderr[-2000:]}")
    return stdout, stderr, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def segments_crc(index):
    crc = 0
    for name in sorted(n for n in os.listdir(index) if n.endswith(".nds")):
        with open(os.path.join(index, name), "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                crc = zlib.crc32(block, crc)
    return f"{crc:08x}"


def ingest_once(binary, directory, scheme):
    """One load: (seconds, CPU seconds, peak RSS MiB, segments' CRC32, the
    last segment-writing commit's seconds or None)."""
    env = dict(os.environ, INGEST_ONLY="1", NO_SIGN_ONLY="1")
    env.setdefault("COMPARE_BULK", "200000")
    _, stderr, cpu, rss = run(binary, ["neardex", directory, scheme], env)
    found = re.search(r"ingest: \d+ documents in ([0-9.]+) s", stderr)
    if not found:
        sys.exit(f"{binary} printed no ingest time:\n{stderr[-2000:]}")
    digest = segments_crc(os.path.join(directory, f"neardex-{scheme}"))
    commits = re.search(r"ingest: commits of ([0-9. /]+) s", stderr)
    written = [float(c) for c in commits.group(1).split(" / ") if float(c) > 0] if commits else []
    return float(found.group(1)), cpu, rss, digest, (written[-1] if written else None)


def run_once(binary, directory, scheme, queries, passes):
    env = dict(os.environ)
    if queries:
        env.update(REQUERY_WARM_UP="pages", REQUERY_PASSES=str(passes), NO_JOIN="1")
    else:
        env["NO_QUERIES"] = "1"
    stdout, stderr, cpu, _ = run(binary, ["requery", directory, scheme], env)
    if queries:
        found = re.search(r"warm passes: median of their mean query times ([0-9.]+) us", stderr)
        if not found:
            sys.exit(f"{binary} printed no warm passes:\n{stderr[-2000:]}")
        return float(found.group(1)), cpu, None
    result = json.loads(stdout.strip().splitlines()[-1])
    pairs = os.path.join(directory, f"pairs-requery-{scheme}.txt")
    return float(result["all_pairs_seconds"]), cpu, md5(pairs)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", action="store_true", help="time the warm single queries, not the self-join")
    parser.add_argument("--passes", type=int, default=20, help="warm query passes a run (with --queries)")
    parser.add_argument("--ingest", action="store_true", help="time the load, not the self-join")
    parser.add_argument("directory")
    parser.add_argument("scheme", choices=["spotsigs", "shingles"])
    parser.add_argument("rounds", type=int)
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args(argv)
    if args.ingest and args.queries:
        parser.error("--ingest or --queries, not both")
    if args.rounds < 1 or len(args.binaries) < 2:
        parser.error("at least one round and two builds")
    binaries = args.binaries
    unit = "us" if args.queries else "s"
    # By position, so that one build given twice (CI's check) is two.
    times = [[] for _ in binaries]
    last_commits = [[] for _ in binaries]
    first_digest = None
    for r in range(args.rounds):
        shift = r % len(binaries)
        for b in list(range(shift, len(binaries))) + list(range(shift)):
            if args.ingest:
                value, cpu, rss, digest, last = ingest_once(binaries[b], args.directory, args.scheme)
                tail = f", peak RSS {rss:.0f} MiB, segments crc32 {digest}"
                if last is not None:
                    last_commits[b].append(last)
                    tail += f", last commit {last:.2f} s"
            else:
                value, cpu, digest = run_once(binaries[b], args.directory, args.scheme, args.queries, args.passes)
                tail = f" pairs md5 {digest[:8]}" if digest else ""
            times[b].append((r, value))
            print(f"round {r + 1} build {b + 1} ({binaries[b]}): {value:.2f} {unit}, CPU {cpu:.2f} s{tail}", flush=True)
            first_digest = first_digest or digest
            if digest != first_digest:
                what = "segments" if args.ingest else "pairs"
                sys.exit(f"build {b + 1} wrote other {what} than the first run ({digest} against {first_digest})")
    base = dict(times[0])
    for b, binary in enumerate(binaries):
        values = [v for _, v in times[b]]
        line = f"build {b + 1} ({binary}): median {statistics.median(values):.2f} {unit}"
        line += f" ({min(values):.2f}-{max(values):.2f})"
        # A time printed as 0.00 (a tiny corpus) has no ratio.
        ratios = [v / base[r] for r, v in times[b] if base.get(r)] if b > 0 else []
        if ratios:
            faster = sum(1 for ratio in ratios if ratio < 1)
            line += f"; faster than build 1 in {faster} of {len(ratios)} rounds"
            line += f", median ratio {statistics.median(ratios):.3f}"
        if last_commits[b]:
            lasts = last_commits[b]
            line += f"; last commit median {statistics.median(lasts):.2f} s ({min(lasts):.2f}-{max(lasts):.2f})"
        print(line)

if __name__ == "__main__":
    main(sys.argv[1:])
