"""Drop files from the page cache (posix_fadvise DONTNEED), so a warm machine imports cold again.

What for: timing a cold preflight on a machine that has already run one (devscripts/timing.sh
calls it before each run). Drops only clean pages of files one can open, so no root is needed;
pages mapped by a running process stay. Comes within about 1 s of a genuinely cold H200 run
(docs/benchmarks-history.md, "The preflight's wall time").

    python devscripts/evict.py PATH...     # folders are walked (symlinks inside are not followed);
                                           # a file, or a symlink given by name, is dropped itself

Runs anywhere (here or on the GPU machine); about 0.5 s for a 28,000-file site-packages here.
Writes nothing; prints one line: how many files it dropped. Needs the suite importable (batch.sh installs it).
"""
import os
import sys

from spark_gotchas.microbench.safetensors_load import drop_file_cache as drop

files = 0
for top in sys.argv[1:]:
    if os.path.isfile(top):
        files += drop(top, follow=True)
        continue
    for root, _dirs, names in os.walk(top):
        files += sum(drop(os.path.join(root, name), follow=False) for name in names)
print(f"evicted {files} files under {' '.join(sys.argv[1:])}")
