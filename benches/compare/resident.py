#!/usr/bin/env python3
"""Which sections of an index's segments a command keeps resident.

    python3 benches/compare/resident.py CMD [ARGS...]

Runs CMD and, every half second until it exits, reads /proc/PID/maps and
/proc/PID/pagemap (Linux only) to count the pages
of each mapped segment file (`*.nds`) that are present, by section, from
each file's section table (FORMAT.md, section 7). Prints the sample with
the most present pages, section by section, and the process's RssAnon
then. A page that holds the end of one section and the start of the next
counts for both. Example: the self-join of an index on its own,

    NO_QUERIES=1 python3 benches/compare/resident.py \\
        benches/compare/target/release/neardex-compare requery DIR shingles
"""
import bisect
import re
import struct
import subprocess
import sys
import time

NAMES = {
    1: "docs", 2: "lengths", 3: "hashes", 4: "freqs", 5: "posting keys",
    6: "posting entries", 7: "posting data", 8: "document band keys",
    9: "band keys", 10: "band entries", 11: "band data", 12: "id index",
    13: "frequent lists", 14: "frequency escapes", 15: "fingerprints",
}
PAGE = 4096
HEADER = 64
ENTRY = 24


def sections(path):
    """(kind, offset, length) of each section of the segment file."""
    with open(path, "rb") as f:
        head = f.read(HEADER + 15 * ENTRY)
    if head[:8] != b"NDXSEGMT":
        return []
    count = struct.unpack_from("<I", head, 12)[0]
    return [struct.unpack_from("<I4xQQ", head, HEADER + ENTRY * i) for i in range(min(count, 15))]


def sample(pid, tables):
    """Present pages by section kind, their total, and RssAnon in MiB."""
    with open(f"/proc/{pid}/status") as f:
        anon = int(re.search(r"RssAnon:\s+(\d+)", f.read()).group(1)) // 1024
    with open(f"/proc/{pid}/maps") as f:
        maps = f.read().splitlines()
    counts, total = {}, 0
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for line in maps:
            parts = line.split()
            if len(parts) < 6 or not parts[5].endswith(".nds"):
                continue
            path = parts[5]
            if path not in tables:
                tables[path] = sections(path)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            map_offset = int(parts[2], 16)
            pagemap.seek(lo // PAGE * 8)
            data = pagemap.read((hi - lo) // PAGE * 8)
            entries = struct.unpack(f"<{len(data) // 8}Q", data)
            present = [i for i, e in enumerate(entries) if e >> 63]
            total += len(present)
            for kind, offset, length in tables[path]:
                if length == 0:
                    continue
                first = max(0, (offset - map_offset) // PAGE)
                end = max(0, (offset + length - map_offset + PAGE - 1) // PAGE)
                pages = bisect.bisect_left(present, end) - bisect.bisect_left(present, first)
                counts[kind] = counts.get(kind, 0) + pages
    return counts, total, anon


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
    tables, best = {}, ({}, 0, 0)
    while child.poll() is None:
        try:
            taken = sample(child.pid, tables)
        except (FileNotFoundError, ProcessLookupError):
            break
        if taken[1] > best[1]:
            best = taken
        time.sleep(0.5)
    child.wait()
    counts, total, anon = best
    mib = PAGE / 2**20
    print(f"peak: {total * mib:.0f} MiB of segment pages mapped, RssAnon then {anon} MiB")
    sizes = {}
    for table in tables.values():
        for kind, _, length in table:
            sizes[kind] = sizes.get(kind, 0) + length
    for kind in sorted(sizes):
        if sizes[kind]:
            print(f"  {NAMES.get(kind, kind):18s} {counts.get(kind, 0) * mib:8.0f} of {sizes[kind] / 2**20:8.0f} MiB")
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
