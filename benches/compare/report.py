"""Prints the comparison table (medians over runs) from results.jsonl.

    python report.py RESULTS CORPUS_JSON VENV
"""
import json
import os
import platform
import statistics
import subprocess
import sys

results_path, corpus_path, venv = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(line) for line in open(results_path) if line.strip()]
corpus = json.load(open(corpus_path))
runs = {}
scores = {}
for r in rows:
    if "score" in r:
        scores[r["score"]] = r
    else:
        runs.setdefault(r["tool"], []).append(r)


def median(tool, key):
    values = [r[key] for r in runs.get(tool, []) if key in r]
    return statistics.median(values) if values else None


def query(tool, key):
    """A query figure of the table: neardex's warm (second) pass, a running
    reader's, as the prefix filter's is its second pass; the first pass,
    right after the ingest and the warm-up, is printed below the tables."""
    warm = median(tool, f"warm_{key}")
    return warm if warm is not None else median(tool, key)


def fmt(value, digits=0):
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


order = ["neardex-shingles", "neardex-spotsigs", "neardex-shingles-optimized", "neardex-spotsigs-optimized", "prefix-shingles", "prefix-spotsigs", "gaoya", "rensa", "datasketch"]
what = corpus.get("source", "generated pages")
print(f"Corpus: {corpus['documents']:,} {what} (mean {corpus['mean_html_bytes']:,} bytes of HTML, "
      f"{corpus['mean_words']} words of visible text; digest {corpus['digest']}); tau = 0.8; "
      f"medians of {max(len(v) for v in runs.values())} runs.")


def read(path):
    """A file's text, or None where it is missing (not Linux, say)."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def machine():
    """What the figures depend on, as far as this machine tells: the CPU
    (model, family and model numbers, second-level cache a core, whether it
    is a virtual machine), memory, kernel, the Rust compiler, Python, and
    the disk's write speed when run.sh measured it (`disk.txt` beside the
    results)."""
    parts = [f"{os.cpu_count()} cores", platform.machine()]
    cpuinfo = read("/proc/cpuinfo") or ""
    fields = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "model name" in fields:
        cpu = fields["model name"]
        if "cpu family" in fields and "model" in fields:
            cpu += f" (family {fields['cpu family']}, model {fields['model']})"
        parts.append(cpu)
    l2 = read("/sys/devices/system/cpu/cpu0/cache/index2/size")
    if l2 and (read("/sys/devices/system/cpu/cpu0/cache/index2/level") or "").strip() == "2":
        size = l2.strip()
        parts.append(f"{size[:-1]} {size[-1]}iB of L2 a core" if size[-1:] in ("K", "M") else f"{size} of L2 a core")
    if " hypervisor" in fields.get("flags", ""):
        parts.append("a virtual machine")
    meminfo = read("/proc/meminfo") or ""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            parts.append(f"{int(line.split()[1]) / 2**20:.1f} GiB of memory")
    parts.append(f"{platform.system()} {platform.release()}")
    try:
        rustc = subprocess.run(["rustc", "-V"], capture_output=True, text=True, check=True).stdout.split()
        parts.append(f"Rust {rustc[1]}")
    except (OSError, subprocess.CalledProcessError, IndexError):
        pass
    parts.append(f"Python {platform.python_version()}")
    disk = read(os.path.join(os.path.dirname(os.path.abspath(results_path)), "disk.txt"))
    if disk and disk.strip():
        parts.append(f"the disk under the corpus wrote {disk.strip()} (1 GiB, `dd` with `conv=fdatasync`)")
    return ", ".join(parts)


print(f"Machine: {machine()}.")
print()
print("| tool | signatures docs/s | ingest docs/s | query p50 µs | query p99 µs | all pairs s | whole job s | peak RSS MiB | disk MiB | pairs | recall | precision |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for tool in order:
    if tool not in runs:
        continue
    s = scores.get(tool, {})
    # The prefix filter's column is its join's peak (what the all-pairs
    # memory is compared with); the note below gives the peak with its
    # query structures too.
    rss = median(tool, "join_peak_rss_bytes") or median(tool, "peak_rss_bytes")
    disk = median(tool, "disk_bytes")
    print(f"| {tool} | {fmt(median(tool, 'sign_docs_per_s'))} | {fmt(median(tool, 'insert_docs_per_s'))} | "
          f"{fmt(query(tool, 'query_p50_us'), 1)} | {fmt(query(tool, 'query_p99_us'), 1)} | "
          f"{fmt(median(tool, 'all_pairs_seconds'), 2)} | {fmt(median(tool, 'whole_job_seconds'), 2)} | "
          f"{fmt(rss and rss / 2**20)} | {fmt(disk and disk / 2**20)} | {fmt(median(tool, 'pairs'))} | "
          f"{fmt(s.get('recall'), 4)} | {fmt(s.get('precision'), 4)} |")
print()


def ratio(a_tool, a_key, b_tool, b_key, invert=False):
    def figure(tool, key):
        return query(tool, key) if key.startswith("query_") else median(tool, key)
    a, b = figure(a_tool, a_key), figure(b_tool, b_key)
    if a is None or b is None or a == 0 or b == 0:
        return None
    return b / a if invert else a / b


# One table of ratios: each signature kind neardex ran with against the
# MinHash peers (word 3-shingles) and the prefix filter on its signatures.
labels = {"shingles": "word 3-shingles", "spotsigs": "SpotSigs"}
print("| neardex | against | ingest × | query p50 speed-up | all pairs speed-up | whole job speed-up |")
print("|---|---|---:|---:|---:|---:|")
for scheme, label in labels.items():
    ours = f"neardex-{scheme}"
    if ours not in runs:
        continue
    for peer in ["gaoya", "rensa", "datasketch", f"prefix-{scheme}"]:
        if peer not in runs:
            continue
        print(f"| {label} | {peer} | {fmt(ratio(ours, 'insert_docs_per_s', peer, 'insert_docs_per_s'), 2)} | "
              f"{fmt(ratio(ours, 'query_p50_us', peer, 'query_p50_us', invert=True), 2)} | "
              f"{fmt(ratio(ours, 'all_pairs_seconds', peer, 'all_pairs_seconds', invert=True), 2)} | "
              f"{fmt(ratio(ours, 'whole_job_seconds', peer, 'whole_job_seconds', invert=True), 2)} |")
    # The prefix filter's queries start from a page's signature vector, as
    # neardex's do (the rows above); its probe alone, on the ranks its
    # join computed for the stored page, is timed too.
    tool = f"prefix-{scheme}"
    if median(tool, "ranked_query_p50_us") is not None:
        print(f"| {label} | {tool}, probe alone on stored ranks | — | "
              f"{fmt(ratio(ours, 'query_p50_us', tool, 'ranked_query_p50_us', invert=True), 2)} | — | — |")
    if f"{ours}-optimized" in runs:
        # After Index::optimize (COMPARE_OPTIMIZE=1); its whole job includes the optimize.
        print(f"| {label}, optimized index | {tool} | — | "
              f"{fmt(ratio(f'{ours}-optimized', 'query_p50_us', tool, 'query_p50_us', invert=True), 2)} | "
              f"{fmt(ratio(f'{ours}-optimized', 'all_pairs_seconds', tool, 'all_pairs_seconds', invert=True), 2)} | — |")
print()
first = [f"{tool} {fmt(median(tool, 'query_p50_us'), 1)} / {fmt(median(tool, 'query_p99_us'), 1)}"
         for tool in ["neardex-shingles", "neardex-spotsigs"] if median(tool, "warm_query_p50_us") is not None]
if first:
    # The tables' neardex query figures are the second pass; the first
    # comes right after the ingest and the warm-up.
    print(f"neardex first query pass, right after the ingest, p50 / p99 µs: {'; '.join(first)}.")
prefix = [f"{tool} {fmt(median(tool, 'query_p50_us'), 1)} / {fmt(median(tool, 'query_p99_us'), 1)} from signatures, "
          f"{fmt(median(tool, 'ranked_query_p50_us'), 1)} / {fmt(median(tool, 'ranked_query_p99_us'), 1)} probe alone"
          for tool in ["prefix-shingles", "prefix-spotsigs"] if median(tool, "ranked_query_p50_us") is not None]
if prefix:
    # Its second pass, as neardex's warm one.
    print(f"Prefix filter queries (second pass), p50 / p99 µs: {'; '.join(prefix)}.")
    peaks = [f"{tool} {fmt(median(tool, 'join_peak_rss_bytes') / 2**20)} through the join, "
             f"{fmt(median(tool, 'peak_rss_bytes') / 2**20)} with the query index and rank table"
             for tool in ["prefix-shingles", "prefix-spotsigs"] if median(tool, "join_peak_rss_bytes") is not None]
    if peaks:
        print(f"Prefix filter peak RSS, MiB: {'; '.join(peaks)}.")
# Queries of pages the index does not hold (pages n.. of the generator,
# as a crawler asks before it adds them), second pass; both exact, so
# their matches must agree.
new = []
for scheme, label in labels.items():
    ours, peer = f"neardex-{scheme}", f"prefix-{scheme}"
    if median(ours, "new_query_p50_us") is None or median(peer, "new_query_p50_us") is None:
        continue
    agree = median(ours, "new_matches") == median(peer, "new_matches")
    new.append(f"{label} neardex {fmt(median(ours, 'new_query_p50_us'), 1)} / {fmt(median(ours, 'new_query_p99_us'), 1)}, "
               f"prefix filter {fmt(median(peer, 'new_query_p50_us'), 1)} / {fmt(median(peer, 'new_query_p99_us'), 1)} "
               f"({fmt(ratio(ours, 'new_query_p50_us', peer, 'new_query_p50_us', invert=True), 2)}× at p50; "
               f"{fmt(median(ours, 'new_matches'))} matches{'' if agree else ' — THE TWO DISAGREE: ' + fmt(median(peer, 'new_matches'))})")
if new:
    print(f"Queries of {fmt(1000)} pages the index does not hold (second pass), p50 / p99 µs: {'; '.join(new)}.")
# neardex's peak RSS column is the whole job's (the ingest, the query
# passes after a page warm-up, the join); the ingest's and the join's own
# (VmHWM reset before it) are recorded too.
phases = [f"{label} ingest {fmt(median(f'neardex-{scheme}', 'ingest_peak_rss_bytes') / 2**20)}, self-join "
          f"{fmt(median(f'neardex-{scheme}', 'self_join_peak_rss_bytes') / 2**20)}"
          for scheme, label in labels.items() if median(f"neardex-{scheme}", "self_join_peak_rss_bytes") is not None]
if phases:
    print(f"neardex peak RSS by phase, MiB: {'; '.join(phases)}.")
html = median("neardex-spotsigs", "sign_html_docs_per_s")
if html is not None:
    # SpotSigs signs the token text the peers are given; the same vectors
    # come from the pages' HTML (checked on the sample), more slowly.
    print(f"neardex SpotSigs signatures from the token text {fmt(median('neardex-spotsigs', 'sign_docs_per_s'))} docs/s, "
          f"from the pages' HTML {fmt(html)} docs/s.")
for scheme, label in labels.items():
    ours = f"neardex-{scheme}"
    if median(ours, "lsh_query_p50_us") is not None:
        print(f"neardex LSH query path ({label}): p50 {fmt(median(ours, 'lsh_query_p50_us'), 1)} µs, "
              f"p99 {fmt(median(ours, 'lsh_query_p99_us'), 1)} µs, recall on the query sample "
              f"(matches other than the query page itself) {fmt(median(ours, 'lsh_sample_recall'), 4)}.")
versions = {r["tool"]: r.get("version") for rs in runs.values() for r in rs if r.get("version")}
gaoya = subprocess.run(["cargo", "tree", "--manifest-path", os.path.join(os.path.dirname(os.path.abspath(__file__)), "Cargo.toml"),
                        "-p", "gaoya", "--depth", "0"], capture_output=True, text=True).stdout.strip()
print(f"Peers: datasketch {versions.get('datasketch', '?')}, rensa {versions.get('rensa', '?')}, {gaoya or 'gaoya (see Cargo.lock)'}.")
allocators = {}
for tool in order:
    for r in runs.get(tool, []):
        if r.get("allocator") not in (None, "python"):
            allocators.setdefault(r["allocator"], set()).add(tool)
if allocators:
    # Results from before the harness chose an allocator carry none.
    print("Allocators: " + "; ".join(f"{a} for {', '.join(t for t in order if t in tools)}"
                                     for a, tools in sorted(allocators.items())) + ".")
