#!/usr/bin/env python3
"""The physical limit of unbatched durable writes on this disk.

Writes 4 KiB and calls fdatasync, in a loop, for a fixed time (default 3 s
each) in a scratch file next to where the broker keeps its data, and prints
the rate for two patterns:

- append: the file grows with every write, so each fdatasync also commits
  the new file size (a log that is not preallocated);
- preallocated: the writes go into a file already written with zeros and
  synced, so each fdatasync has only data to commit (rebound's journal
  segments, Artemis's pre-filled journal files).

A broker that syncs once per durable send cannot beat these rates; one that
groups commits can, by putting many messages in each sync, which is what
BENCHMARKS.md compares it with.

    python3 bench/fsync_rate.py [DIR] [SECONDS]
"""
import os
import sys
import tempfile
import time

directory = sys.argv[1] if len(sys.argv) > 1 else "."
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
block = os.urandom(4096)
PREALLOCATED = 256 << 20


def rate(preallocate):
    fd, path = tempfile.mkstemp(prefix="fsync-rate-", dir=directory)
    try:
        if preallocate:
            zeros = bytes(1 << 20)
            for _ in range(PREALLOCATED // len(zeros)):
                os.write(fd, zeros)
            os.fdatasync(fd)
        syncs = 0
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            if preallocate:
                os.pwrite(fd, block, (syncs * len(block)) % PREALLOCATED)
            else:
                os.write(fd, block)
            os.fdatasync(fd)
            syncs += 1
        return syncs, time.monotonic() - start
    finally:
        os.close(fd)
        os.unlink(path)


for name, preallocate in (("append", False), ("preallocated", True)):
    syncs, elapsed = rate(preallocate)
    print(f"{name:>12}: {syncs / elapsed:.0f} fdatasync/s ({syncs} x 4 KiB write + fdatasync in {elapsed:.1f} s, {directory})")
