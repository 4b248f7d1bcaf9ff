"""Drop files from the page cache (posix_fadvise DONTNEED), so a warm machine imports cold again.

usage: python devscripts/evict.py DIR... ; no root needed (clean pages of files one can open).
"""
import os
import sys

files = pages = 0
for top in sys.argv[1:]:
    for root, _dirs, names in os.walk(top):
        for name in names:
            path = os.path.join(root, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                files += 1
            except OSError:
                pass
            finally:
                os.close(fd)
print(f"evicted {files} files under {' '.join(sys.argv[1:])}")
