"""Where a run's cores go, thread by thread: runs a command and samples the
CPU time of each of its threads from /proc (Linux) until it ends.

    python3 benches/compare/threads.py [--interval S] -- COMMAND [ARGS...]

Prints one line per interval (default 0.25 s): the seconds since the start,
the cores the process kept busy in the interval, then each thread that ran
(or waited on the disk, state D) as `TID STATE:CORES` (the thread id's last
four digits; R running or runnable, S sleeping, D in uninterruptible
wait). A thread that began during the interval counts from its start. The
command's own output goes where it would; the samples go to stdout after
it, or to `--out FILE`.

This is how HISTORY.md, "The first bytes of a flush synced while its tables
are built", found the tail of a bulk load: both cores busy while pages were
signed, about one after the last was.
"""
import argparse
import os
import subprocess
import sys
import time


def threads(pid):
    """{tid: (state, CPU ticks)} of the process's threads, or None once it
    is gone."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended meanwhile
        # The command name may hold spaces and parentheses: fields follow
        # the last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        out[tid] = (fields[0], int(fields[11]) + int(fields[12]))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--out", help="write the samples here instead of stdout")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    hz = os.sysconf("SC_CLK_TCK")
    child = subprocess.Popen(command)
    start = last = time.monotonic()
    before = {}
    lines = []
    while child.poll() is None:
        time.sleep(args.interval)
        now_threads = threads(child.pid)
        now = time.monotonic()
        if now_threads is None:
            break
        seconds = now - last
        busy, cores = [], 0.0
        for tid, (state, ticks) in sorted(now_threads.items()):
            used = (ticks - before.get(tid, (state, 0))[1]) / hz / seconds
            cores += used
            if used >= 0.05 or state == "D":
                busy.append(f"{tid[-4:]} {state}:{used:.2f}")
        lines.append(f"{now - start:7.2f} {cores:4.2f}  " + "  ".join(busy))
        before, last = now_threads, now
    code = child.wait()
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    sys.exit(code)


if __name__ == "__main__":
    main()
