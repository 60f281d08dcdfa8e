#!/usr/bin/env python3
"""What moving the profiles' bytes costs by itself: the floor under a patch that rewrites every
published file (issue 30, point 5). With changes spread over every shard, each file of the
Signmap, OCX, CDIF lists and DiWoo categories changes, so a patch reads every published byte and
writes about as many; this does only that, with nothing parsed, merged or hashed.

Usage: floor.py MODE OUT FILE...

  user    reads the FILEs through user space, 1 MiB at a time, and writes the same bytes to OUT
          with direct I/O, as the bridge writes its large files, then fsyncs OUT
  kernel  copies the FILEs into OUT with copy_file_range(2): the bytes never reach user space
          (on ext4 the kernel copies them between page-cache pages; a reflink on btrfs or XFS)

Prints the bytes moved. Run it under GNU time: its CPU-seconds are the floor's.
"""

import mmap
import os
import sys

BLOCK = 1 << 20
ALIGN = 4096  # direct I/O's alignment of buffer, offset and length on the usual file systems


def user(out, files):
    buf = mmap.mmap(-1, BLOCK)  # anonymous pages: aligned as direct I/O requires
    view = memoryview(buf)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
    fill = total = 0
    for name in files:
        with open(name, "rb", buffering=0) as f:
            while n := f.readinto(view[fill:]):
                fill += n
                total += n
                if fill == BLOCK:
                    os.write(fd, view)
                    fill = 0
    if fill:
        # The last block padded to the alignment, then the file cut back to its length.
        padded = -(-fill // ALIGN) * ALIGN
        view[fill:padded] = bytes(padded - fill)
        os.write(fd, view[:padded])
        os.ftruncate(fd, total)
    os.fsync(fd)
    os.close(fd)
    return total


def kernel(out, files):
    total = 0
    with open(out, "wb") as o:
        for name in files:
            with open(name, "rb") as f:
                left = os.fstat(f.fileno()).st_size
                while left > 0:
                    n = os.copy_file_range(f.fileno(), o.fileno(), left)
                    if n == 0:
                        break
                    left -= n
                    total += n
        os.fsync(o.fileno())
    return total


def main():
    mode, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    moved = {"user": user, "kernel": kernel}[mode](out, files)
    print(moved)


if __name__ == "__main__":
    main()
