#!/usr/bin/env python3
"""What moving the profiles' bytes costs by itself: the floor under a patch that rewrites every
published file (issue 30, point 5). With changes spread over every shard, each file of the
Signmap, OCX, CDIF lists and DiWoo categories changes, so a patch reads every published byte and
writes about as many; this does only that, with nothing parsed, merged or hashed.

Usage: floor.py MODE OUT FILE...

  user    reads the FILEs into user space with direct I/O, 2 MiB at a time, as the bridge reads
          them back, and writes the same bytes to OUT with direct I/O, as the bridge writes its
          large files, then fsyncs OUT
  drop    nothing timed: asks the kernel to drop the FILEs' pages from its cache (after `kernel`
          read them through it), as an export leaves its files (written with direct I/O)
  kernel  copies the FILEs into OUT with copy_file_range(2): the bytes never reach user space
          (on ext4 the kernel copies them between page-cache pages; a reflink on btrfs or XFS)

Prints the bytes moved. Run it under GNU time: its CPU-seconds are the floor's.
"""

import mmap
import os
import sys

BLOCK = 1 << 20
WINDOW = 2 << 20  # the bridge's reading window (a huge page)
ALIGN = 4096  # direct I/O's alignment of buffer, offset and length on the usual file systems


def user(out, files):
    # Anonymous pages: aligned as direct I/O requires.
    buf, window = mmap.mmap(-1, BLOCK), mmap.mmap(-1, WINDOW)
    view, read = memoryview(buf), memoryview(window)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
    fill = total = 0
    for name in files:
        src = os.open(name, os.O_RDONLY | os.O_DIRECT)
        while n := os.readv(src, [read]):
            total += n
            # Copied from the window into the writer's buffer, as the bridge copies entries.
            at = 0
            while at < n:
                k = min(n - at, BLOCK - fill)
                view[fill:fill + k] = read[at:at + k]
                fill += k
                at += k
                if fill == BLOCK:
                    os.write(fd, view)
                    fill = 0
            if n % ALIGN:
                break  # the file's end: another direct read would start unaligned
        os.close(src)
    if fill:
        # The last block padded to the alignment, then the file cut back to its length.
        padded = -(-fill // ALIGN) * ALIGN
        view[fill:padded] = bytes(padded - fill)
        os.write(fd, view[:padded])
        os.ftruncate(fd, total)
    os.fsync(fd)
    os.close(fd)
    return total


def drop(_out, files):
    for name in files:
        fd = os.open(name, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    return 0


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
    moved = {"user": user, "kernel": kernel, "drop": drop}[mode](out, files)
    print(moved)


if __name__ == "__main__":
    main()
