#!/usr/bin/env python3
"""The physical limit of unbatched durable writes on this disk.

Appends 4 KiB and calls fdatasync, in a loop (as a journal does), for a fixed time (default 3 s)
in a scratch file next to where the broker keeps its data, and prints the
rate. A broker that syncs once per durable send cannot beat this rate; one
that groups commits can, by putting many messages in each sync, which is
what BENCHMARKS.md compares it with.

    python3 bench/fsync_rate.py [DIR] [SECONDS]
"""
import os
import sys
import tempfile
import time

directory = sys.argv[1] if len(sys.argv) > 1 else "."
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
block = os.urandom(4096)
fd, path = tempfile.mkstemp(prefix="fsync-rate-", dir=directory)
try:
    syncs = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        os.write(fd, block)
        os.fdatasync(fd)
        syncs += 1
    elapsed = time.monotonic() - start
finally:
    os.close(fd)
    os.unlink(path)
print(f"{syncs / elapsed:.0f} fdatasync/s ({syncs} x 4 KiB append + fdatasync in {elapsed:.1f} s, {directory})")
