"""The disk cache of compiled kernels (docs/python.md, "The kernel cache").

Kernels the JIT compiles are kept in ``$KPOOL_CACHE_DIR`` (else
``$XDG_CACHE_HOME/kpool``, else ``~/.cache/kpool``), so that the next
process loads them in milliseconds instead of compiling. ``KPOOL_CACHE_DIR=``
(empty) or ``KPOOL_DISABLE_CACHE=1`` turns the cache off. From a shell::

    python -m kpool.cache            # the folder and its entries
    python -m kpool.cache list
    python -m kpool.cache clear
"""

import collections
import ctypes
import sys

from . import _capi

#: One cache entry: its ``path``, size in ``bytes``, ``summary`` (the
#: configuration, e.g. ``"cpu bf16 d128 k4 vector 16 (kpool 0.1.0)"``),
#: whether it is ``valid`` (whole), and the ``problem`` when not.
Entry = collections.namedtuple("Entry", "path bytes summary valid problem")

#: What this process met in the cache (see :func:`statistics`).
Statistics = collections.namedtuple(
    "Statistics", "hits misses compiled stored rejected last_problem")


def _lib():
    return _capi.load()


def directory():
    """The cache folder, or None when caching is off."""
    d = _lib().kpoolKernelCacheGetDirectory()
    return d.decode() if d is not None else None


def entries():
    """The entries in the cache folder, as :data:`Entry` tuples."""
    out = []

    def add(info, _):
        e = info.contents
        out.append(Entry(e.path.decode(), e.bytes, e.summary.decode(),
                         bool(e.valid), e.problem.decode()))

    _capi.check(_lib().kpoolKernelCacheList(_capi.CacheCallback(add), None))
    return out


def clear():
    """Removes every entry; returns how many were removed."""
    removed = ctypes.c_int64(0)
    _capi.check(_lib().kpoolKernelCacheClear(ctypes.byref(removed)))
    return removed.value


def statistics():
    """What this process met in the cache so far (:data:`Statistics`):
    configurations loaded from the cache (``hits``), looked up and missed,
    ``compiled``, entries ``stored``, entries ``rejected`` (damaged, of
    another version or host, or unloadable: compiled again), and the last
    problem met (a rejected entry or a failed write)."""
    s = _capi.CacheStatistics()
    problem = ctypes.c_char_p()
    _lib().kpoolKernelCacheGetStatistics(ctypes.byref(s), ctypes.byref(problem))
    return Statistics(s.hits, s.misses, s.compiled, s.stored, s.rejected,
                      (problem.value or b"").decode())


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv else "list"
    if command not in ("list", "clear", "dir") or len(argv) > 1:
        print("usage: python -m kpool.cache [list|clear|dir]", file=sys.stderr)
        return 2
    folder = directory()
    if command == "dir":
        print(folder if folder else "(caching is off)")
        return 0
    if folder is None:
        print("kpool kernel cache: off (KPOOL_CACHE_DIR is empty or "
              "KPOOL_DISABLE_CACHE is set)")
        return 0
    if command == "clear":
        print(f"kpool kernel cache {folder}: removed {clear()} entries")
        return 0
    found = entries()
    total = sum(e.bytes for e in found)
    print(f"kpool kernel cache {folder}: {len(found)} entries, "
          f"{total / 1e6:.1f} MB")
    for e in sorted(found, key=lambda e: e.summary):
        state = e.summary if e.valid else f"DAMAGED: {e.problem}"
        print(f"  {e.bytes / 1e3:9.1f} kB  {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
