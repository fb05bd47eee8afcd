"""How slowly this machine gives a process memory that was freed a while ago.

    python3 benches/compare/fresh_memory.py [GIB] [IDLE_SECONDS]

Maps GIB (default 2) of anonymous memory, writes one byte in each 4 KiB
page, unmaps it, and does that again: right away, then after
IDLE_SECONDS (default 5) of idleness, in turns, three times each. On a
virtual machine whose balloon device reports free pages to the host
(virtio-balloon's free page reporting), the guest's freed memory goes
back to the host a few seconds after it is freed, and the next first
write to it waits for the host to back it again: the runs after an idle
spell then take longer than those right after a free. The script also
says whether a virtio balloon here offers that reporting (feature bit
5, VIRTIO_BALLOON_F_REPORTING).

Every figure of the benchmark that allocates fresh memory (an ingest's
buffers, the page cache of the segments it writes) pays this on such a
machine, and how much depends on how long the memory lay free: one
cause of the spread from run to run (README, "What limits ingest on
this machine").
"""
import glob
import mmap
import os
import sys
import time

PAGE = 4096


def touch(size):
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    start = time.perf_counter()
    for offset in range(0, size, PAGE):
        m[offset] = 1
    seconds = time.perf_counter() - start
    m.close()
    return seconds


def balloon_reporting():
    """True, False, or None when there is no virtio balloon."""
    for device in glob.glob("/sys/bus/virtio/devices/*"):
        try:
            with open(os.path.join(device, "device")) as f:
                if int(f.read().strip(), 16) != 5:
                    continue
            with open(os.path.join(device, "features")) as f:
                features = f.read().strip()
        except (OSError, ValueError):
            continue
        return len(features) > 5 and features[5] == "1"
    return None


def main():
    gib = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    idle = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    size = int(gib * (1 << 30)) // PAGE * PAGE
    reporting = balloon_reporting()
    print(
        {None: "no virtio balloon", True: "a virtio balloon with free page reporting",
         False: "a virtio balloon without free page reporting"}[reporting]
    )
    touch(size)  # the first map of the process, not reported
    for _ in range(3):
        now = touch(size)
        time.sleep(idle)
        later = touch(size)
        print(f"{gib:g} GiB written page by page: {now:.2f} s right after a free, "
              f"{later:.2f} s after {idle:g} s idle", flush=True)


if __name__ == "__main__":
    main()
