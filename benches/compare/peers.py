"""The Python peers of the comparison (issue 7): datasketch MinHashLSH and
rensa, on word 3-shingles of the same token text neardex is given.

    python peers.py DIR datasketch|rensa

Prints one JSON object. Both use 128 permutations; datasketch picks its own
banding for tau = 0.8 (9 bands of 13 rows); rensa needs a band count that
divides 128 and gets 16 bands of 8 rows (8 of 16 would put its S-curve's
midpoint near 0.88, above tau).
The pairs are the LSH output as the libraries return it (candidates, not
re-checked against estimated similarity), written to DIR/pairs-TOOL.txt.
"""
import json
import resource
import sys
import time

TAU = 0.8
PERM = 128
QUERIES = 1000


def shingles(line):
    words = line.split(" ")
    if len(words) < 3:
        return [line]
    return list({" ".join(words[i:i + 3]) for i in range(len(words) - 2)})


def read(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield line.rstrip("\n")


def sample(n):
    step = max(n // QUERIES, 1)
    return list(range(0, n, step))[:QUERIES]


def percentiles(times):
    times = sorted(times)
    at = lambda p: times[round((len(times) - 1) * p)] * 1e6
    return at(0.5), at(0.99)


def main():
    directory, tool = sys.argv[1], sys.argv[2]
    path = directory + "/text.txt"
    import datasketch
    default = datasketch.MinHashLSH(threshold=TAU, num_perm=PERM)
    bands, rows = default.b, default.r
    if tool == "datasketch":
        from datasketch import MinHash, MinHashLSH

        def sign(line):
            m = MinHash(num_perm=PERM, seed=1)
            m.update_batch([s.encode("utf-8") for s in shingles(line)])
            return m

        lsh = MinHashLSH(threshold=TAU, num_perm=PERM)
        insert = lsh.insert
        query = lsh.query
        version = datasketch.__version__
    elif tool == "rensa":
        import rensa
        from importlib.metadata import version as package_version

        def sign(line):
            m = rensa.RMinHash(num_perm=PERM, seed=1)
            m.update(shingles(line))
            return m

        bands, rows = 16, PERM // 16
        lsh = rensa.RMinHashLSH(threshold=TAU, num_perm=PERM, num_bands=bands)
        insert = lsh.insert
        query = lsh.query
        version = package_version("rensa")
    else:
        raise SystemExit("tool: datasketch or rensa")

    start = time.perf_counter()
    sketches = [sign(line) for line in read(path)]
    sign_secs = time.perf_counter() - start
    n = len(sketches)

    start = time.perf_counter()
    for i, m in enumerate(sketches):
        insert(i, m)
    insert_secs = time.perf_counter() - start

    times = []
    for i in sample(n):
        t = time.perf_counter()
        query(sketches[i])
        times.append(time.perf_counter() - t)
    p50, p99 = percentiles(times)

    start = time.perf_counter()
    pairs = []
    for i, m in enumerate(sketches):
        for j in query(m):
            if j > i:
                pairs.append((i, j))
    join_secs = time.perf_counter() - start
    with open(f"{directory}/pairs-{tool}.txt", "w") as out:
        out.writelines(f"{a} {b}\n" for a, b in pairs)
    print(json.dumps({
        "tool": tool, "version": version, "documents": n, "bands": bands, "rows": rows,
        "sign_docs_per_s": round(n / sign_secs),
        "insert_docs_per_s": round(n / (sign_secs + insert_secs)),
        "ingest_seconds": round(sign_secs + insert_secs, 2),
        "query_p50_us": round(p50, 1), "query_p99_us": round(p99, 1),
        "all_pairs_seconds": round(join_secs, 2), "pairs": len(pairs),
        "whole_job_seconds": round(sign_secs + insert_secs + join_secs, 2),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))


if __name__ == "__main__":
    main()
