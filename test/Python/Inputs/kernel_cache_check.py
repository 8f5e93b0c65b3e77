"""The disk cache of compiled kernels, case by case (kernel-cache.test).

Every kernel set is made in a new process (this interpreter running CHILD)
with KPOOL_CACHE_DIR pointing at a folder of the case's own, so that what
one process stores is what the next one finds. The children report the
cache's statistics (kpool.cache.statistics), whether libMLIR.so was loaded,
and a hash of a compress result.

Usage: kernel_cache_check.py <scratch folder>
"""

import glob
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

CHILD = r"""
import hashlib, json, sys
import numpy as np
import kpool, kpool.cache
ks = kpool.KernelSet("f32", 8, 2)
rng = np.random.default_rng(3)
k = rng.standard_normal((9, 8)).astype(np.float32)
gate = rng.standard_normal((9, 8)).astype(np.float32)
ape = rng.standard_normal((2, 8)).astype(np.float32)
out = ks.compress(k, gate, ape, [0, 9], None, [0])
s = kpool.cache.statistics()
maps = open("/proc/self/maps").read()
print(json.dumps({"hits": s.hits, "misses": s.misses, "compiled": s.compiled,
                  "stored": s.stored, "rejected": s.rejected,
                  "problem": s.last_problem, "dir": kpool.cache.directory(),
                  "mlir": "libMLIR.so" in maps,
                  "result": hashlib.sha256(out.tobytes()).hexdigest()}))
"""


def child(env_changes, wait=True):
    env = dict(os.environ)
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    p = subprocess.Popen([sys.executable, "-c", CHILD], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    if not wait:
        return p
    return finish(p)


def finish(p):
    out, err = p.communicate()
    if p.returncode != 0:
        print(f"FAIL: a child exited with {p.returncode}:\n{err}")
        sys.exit(1)
    return json.loads(out.strip().splitlines()[-1])


def entries(folder):
    return sorted(glob.glob(os.path.join(folder, "*.kpool")))


def valid(folder):
    """Whether every entry of `folder` is whole (python -m kpool.cache's
    view, through the C API)."""
    import kpool.cache
    old = os.environ.get("KPOOL_CACHE_DIR")
    os.environ["KPOOL_CACHE_DIR"] = folder
    try:
        return all(e.valid for e in kpool.cache.entries())
    finally:
        if old is None:
            del os.environ["KPOOL_CACHE_DIR"]
        else:
            os.environ["KPOOL_CACHE_DIR"] = old


def fnv(data, seed=0):
    h = 0xCBF29CE484222325 ^ seed
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def rewrite_key(path, change):
    """Rewrites the key of entry `path` with `change` (a function of the key
    text), keeping the entry otherwise whole: lengths and checksums
    recomputed, as a build of another version would have written it."""
    data = open(path, "rb").read()
    magic, key_bytes, content_bytes, _, content_hash, _ = struct.unpack(
        "<8sQQQQQ", data[:48])
    key = data[48:48 + key_bytes]
    contents = data[48 + key_bytes:]
    new_key = change(key.decode()).encode()
    header = struct.pack("<8sQQQQ", magic, len(new_key), content_bytes,
                         fnv(new_key), content_hash)
    header += struct.pack("<Q", fnv(header))
    with open(path, "wb") as f:
        f.write(header + new_key + contents)


def main():
    scratch = sys.argv[1]
    ok = True

    def check(condition, what):
        nonlocal ok
        if not condition:
            print(f"FAIL: {what}")
            ok = False

    home = os.path.join(scratch, "home")
    os.makedirs(home)
    base = {"HOME": home, "XDG_CACHE_HOME": None, "KPOOL_DISABLE_CACHE": None}

    # Miss, then hit.
    a = os.path.join(scratch, "a")
    first = child(dict(base, KPOOL_CACHE_DIR=a))
    print(f"miss: hits {first['hits']}, compiled {first['compiled']}, "
          f"stored {first['stored']}; entries {len(entries(a))}, "
          f"{'valid' if valid(a) else 'DAMAGED'}")
    second = child(dict(base, KPOOL_CACHE_DIR=a))
    print(f"hit: hits {second['hits']}, compiled {second['compiled']}, "
          f"stored {second['stored']}; MLIR loaded: "
          f"{'yes' if second['mlir'] else 'no'}; same results: "
          f"{'yes' if second['result'] == first['result'] else 'no'}")

    # Two processes compiling the same configuration at once.
    b = os.path.join(scratch, "b")
    both = [child(dict(base, KPOOL_CACHE_DIR=b), wait=False)
            for _ in range(2)]
    results = [finish(p) for p in both]
    check(all(r["result"] == first["result"] for r in results),
          "the concurrent processes computed the same")
    third = child(dict(base, KPOOL_CACHE_DIR=b))
    leftovers = [f for f in os.listdir(b) if not f.endswith(".kpool")]
    check(not leftovers, f"temporary files left: {leftovers}")
    print(f"concurrent: both processes succeeded; entries {len(entries(b))}, "
          f"{'valid' if valid(b) else 'DAMAGED'}; next process hits "
          f"{third['hits']}")

    # A truncated entry.
    (entry,) = entries(a)
    size = os.path.getsize(entry)
    with open(entry, "r+b") as f:
        f.truncate(size // 2)
    r = child(dict(base, KPOOL_CACHE_DIR=a))
    again = child(dict(base, KPOOL_CACHE_DIR=a))
    check(r["result"] == first["result"], "results after a truncated entry")
    print(f"truncated: rejected {r['rejected']}, compiled {r['compiled']}; "
          f"entry {'valid' if valid(a) else 'DAMAGED'} again; next process "
          f"hits {again['hits']}")

    # A corrupted one (a byte of the object flipped).
    with open(entry, "r+b") as f:
        f.seek(size - 100)
        byte = f.read(1)
        f.seek(size - 100)
        f.write(bytes([byte[0] ^ 0x40]))
    r = child(dict(base, KPOOL_CACHE_DIR=a))
    check(r["result"] == first["result"], "results after a corrupted entry")
    print(f"corrupted: rejected {r['rejected']}, compiled {r['compiled']}; "
          f"entry {'valid' if valid(a) else 'DAMAGED'} again")

    # One of another version, whole, under this key's name.
    rewrite_key(entry, lambda key: "\n".join(
        "kpool 0.0.0-other" if line.startswith("kpool ") else line
        for line in key.split("\n")))
    r = child(dict(base, KPOOL_CACHE_DIR=a))
    reason = r["problem"].split(": ", 1)[-1]
    print(f"other version: rejected {r['rejected']} ({reason}), compiled "
          f"{r['compiled']}; entry {'valid' if valid(a) else 'DAMAGED'} "
          "again")

    # A folder that cannot be written: a read-only one (chmod 555) for a
    # normal user; root writes there anyway, so for root a folder of the
    # read-only /proc file system.
    if os.geteuid() != 0:
        ro = os.path.join(scratch, "read-only")
        os.makedirs(ro)
        os.chmod(ro, 0o555)
    else:
        ro = "/proc/kpool-kernel-cache-test"
    r = child(dict(base, KPOOL_CACHE_DIR=ro))
    written = os.path.isdir(ro) and any(
        f.endswith(".kpool") for f in os.listdir(ro))
    print(f"read-only folder: kernel set ok, compiled {r['compiled']}, "
          f"stored {r['stored']}; "
          f"{'an entry was written' if written else 'no entry written'}; "
          f"problem: {r['problem'].split(': ', 1)[0]}")

    # Off.
    for name, change in [("KPOOL_CACHE_DIR empty", {"KPOOL_CACHE_DIR": ""}),
                         ("KPOOL_DISABLE_CACHE=1",
                          {"KPOOL_CACHE_DIR": None,
                           "KPOOL_DISABLE_CACHE": "1"})]:
        r = child(dict(base, **change))
        default = os.path.join(home, ".cache", "kpool")
        nothing = not os.path.exists(default)
        print(f"{name}: {'off' if r['dir'] is None else r['dir']}; compiled "
              f"{r['compiled']}, "
              f"{'nothing written' if nothing else 'WROTE ' + default}")

    # Listing and clearing.
    env = dict(os.environ, KPOOL_CACHE_DIR=a)
    for command in ["list", "clear"]:
        out = subprocess.run([sys.executable, "-m", "kpool.cache", command],
                             env=env, check=True, capture_output=True,
                             text=True).stdout
        for line in out.strip().splitlines():
            print(f"{command}: {line.strip()}")
    check(not entries(a), "clear left entries")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
