#!/usr/bin/env python3
"""Writes buffer-form kpool functions over the small geometries and the
layouts the verifier accepts (docs/semantics.md, "Layouts"), for
layout-sweep*.test.

  layout_sweep.py [--gpu] [--full]

prints one module with functions over
  op          compress, ring_close, seed_tail, pool_offsets, step
  cache       none; for compress, ring_close and step also the element
              entry (rotate none, hadamard) and FP8 (none + absmax,
              hadamard + pow2)
  head_dim    1, 2
  kpool       1 (ring window 1); with --full also 2 (window 2)
  page_size   1, 2 (with a cache)
  layout      static  static extents, padded static strides, an offset
              inner2  static extents, static innermost stride 2 (CPU only)
              dynamic every extent, stride and offset dynamic
each with a status word. By default (the suite's), each op gets every
(head_dim, layout) pair without a cache and once with a cache, the cache
formats and page sizes taking turns over the pairs, so that each format,
each page size, each head_dim and each layout is lowered; --full writes the
whole product (348 functions for the CPU; 232 functions, 460
kernels, for --gpu).
"""

import argparse
import itertools

T, B, S, N, W, P_ROWS = 6, 2, 3, 4, 3, 8

CACHES = {
    "none": None,
    "el": ("element", "none", None),
    "elh": ("element", "hadamard", None),
    "fp8": ("fp8", "none", "absmax"),
    "fp8hp": ("fp8", "hadamard", "pow2"),
}


def memref(shape, elt, layout, strides=None, offset=0):
    """A memref type of `shape` in `layout`; `strides` the static ones."""
    rank = len(shape)
    if layout == "dynamic":
        dims = "x".join("?" for _ in shape)
        return "memref<%sx%s, strided<[%s], offset: ?>>" % (
            dims, elt, ", ".join("?" for _ in shape))
    dims = "x".join(str(d) for d in shape)
    if strides is None:
        # Dense row-major, padded: each outer stride one element longer
        # than the dense one, the innermost 1 (or 2 for inner2).
        inner = 2 if layout == "inner2" else 1
        strides = [inner]
        for d in reversed(shape[1:]):
            strides.insert(0, strides[0] * d + 1)
    return "memref<%sx%s, strided<[%s], offset: %d>>" % (
        dims, elt, ", ".join(str(s) for s in strides), offset)


def function(op, cache, dim, kpool, page, layout):
    name = "%s_%s_d%d_k%d_p%d_%s" % (op, cache, dim, kpool, page, layout)
    elt = "bf16"
    window = kpool
    args, types = [], {}

    def arg(var, shape, e, offset=3):
        types[var] = memref(shape, e, layout, offset=offset)
        args.append("%%%s: %s" % (var, types[var]))

    meta = "ui32"
    if op != "pool_offsets":
        arg("k", [T, dim], elt)
        arg("gate", [T, dim], elt)
    if op in ("compress", "ring_close", "step"):
        arg("ape", [kpool, dim], "f32")
    arg("iro", [B + 1], meta)
    arg("cl", [B], meta)
    if op in ("ring_close", "seed_tail", "step"):
        arg("slots", [B], meta)
        arg("tail", [S, 2, window, dim], elt)
    if op in ("compress", "pool_offsets", "step"):
        arg("pro", [B + 1], meta)
    if op in ("compress", "step"):
        arg("pooled", [P_ROWS, dim], elt)
    if op in ("ring_close", "step"):
        arg("closed", [B, dim], elt)
        arg("closed_pool", [B], "i32")
    spec = CACHES[cache]
    if spec:
        entry, rotate, scale = spec
        arg("bt", [B, W], "i32")
        arg("ck", [N, page, dim], "f8E4M3FN" if entry == "fp8" else elt)
        if entry == "fp8":
            arg("cs", [N, page], "f32")
    arg("status", [1], "i64", offset=0)
    if op in ("ring_close", "seed_tail", "step"):
        args.append("%n: i32")
    t = types
    status = "status(%%status : %s)" % t["status"]
    to_cache = ""
    if spec:
        entry, rotate, scale = spec
        if entry == "fp8":
            to_cache = "to_cache(%%bt, %%ck, %%cs : %s, %s, %s)" % (
                t["bt"], t["ck"], t["cs"])
        else:
            to_cache = "to_cache(%%bt, %%ck : %s, %s)" % (t["bt"], t["ck"])
        to_cache += " rotate(%s)" % rotate
        if scale:
            to_cache += " scale(%s)" % scale
    geometry = "kpool(%d) head_dim(%d)" % (kpool, dim)
    if op == "compress":
        body = ("kpool.compress %s ins(%%k, %%gate, %%ape, %%iro, %%pro, %%cl"
                " : %s, %s, %s, %s, %s, %s) outs(%%pooled : %s) %s %s" %
                (geometry, t["k"], t["gate"], t["ape"], t["iro"], t["pro"],
                 t["cl"], t["pooled"], to_cache, status))
    elif op == "ring_close":
        body = ("kpool.ring_close %s ins(%%tail, %%k, %%gate, %%ape, %%iro, "
                "%%cl, %%slots : %s, %s, %s, %s, %s, %s, %s) num_requests(%%n)"
                " outs(%%closed, %%closed_pool : %s, %s) %s %s" %
                (geometry, t["tail"], t["k"], t["gate"], t["ape"], t["iro"],
                 t["cl"], t["slots"], t["closed"], t["closed_pool"], to_cache,
                 status))
    elif op == "seed_tail":
        body = ("kpool.seed_tail %s ins(%%k, %%gate, %%iro, %%cl, %%slots : "
                "%s, %s, %s, %s, %s) num_requests(%%n) outs(%%tail : %s) %s" %
                (geometry, t["k"], t["gate"], t["iro"], t["cl"], t["slots"],
                 t["tail"], status))
    elif op == "pool_offsets":
        body = ("kpool.pool_offsets kpool(%d) ins(%%iro, %%cl : %s, %s) "
                "outs(%%pro : %s) %s" %
                (kpool, t["iro"], t["cl"], t["pro"], status))
    else:
        body = ("kpool.step %s ins(%%k, %%gate, %%ape, %%iro, %%cl, %%slots :"
                " %s, %s, %s, %s, %s, %s) num_requests(%%n) outs(%%closed, "
                "%%closed_pool, %%pro, %%pooled, %%tail : %s, %s, %s, %s, %s)"
                " %s %s" %
                (geometry, t["k"], t["gate"], t["ape"], t["iro"], t["cl"],
                 t["slots"], t["closed"], t["closed_pool"], t["pro"],
                 t["pooled"], t["tail"], to_cache, status))
    return "func.func @%s(%s) {\n  %s\n  return\n}\n" % (
        name, ", ".join(args), body)


def combinations(gpu, full):
    layouts = ("static", "dynamic") if gpu else ("static", "inner2",
                                                 "dynamic")
    formats = ["el", "elh", "fp8", "fp8hp"]
    for op in ("compress", "ring_close", "seed_tail", "pool_offsets", "step"):
        cached = op in ("compress", "ring_close", "step")
        turn = 0
        for dim, kpool, layout in itertools.product(
                (1, 2), (1, 2) if full else (1,), layouts):
            yield op, "none", dim, kpool, 1, layout
            if not cached:
                continue
            if full:
                for cache, page in itertools.product(formats, (1, 2)):
                    yield op, cache, dim, kpool, page, layout
                continue
            yield (op, formats[turn % len(formats)], dim, kpool,
                   1 + (turn // 2) % 2, layout)
            turn += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--full", action="store_true")
    args = parser.parse_args()
    count = 0
    for combo in combinations(args.gpu, args.full):
        print(function(*combo))
        count += 1
    print("// %d functions" % count)


if __name__ == "__main__":
    main()
