#!/usr/bin/env python3
"""Differential test of the pool cache (docs/semantics.md, "The pool cache")
on the CPU against the numpy reference (python/kpool/reference.py).

  pool_cache_check.py --emit SEED CONFIG > t.mlir
      writes a buffer-form program (memrefs only; inputs as dense globals)
      that serves a ragged batch of 3 requests (slots 2, 0, 1 of 3) through
      three schedules of the same tokens, each into its own pool cache: ONE i8 allocation per cache,
      filled with the canary byte 0xA5, holding N pages at a padded page
      stride behind a header (FP8: page_size*D code bytes then page_size f32
      scales per page; element entries: page_size*D elements per page),
      seen through memref.view + memref.reinterpret_cast. It prints every
      call's dense outputs (bits) and, at the end, every byte of each cache.

  pool_cache_check.py --check SEED CONFIG < runner_output
      recomputes everything with kpool.reference and exits 1 on any
      difference, printing the first ones:
      * the pools each call produces (closed_pool, pool_row_offsets) exactly;
      * each dense pool against the exact (float64) pooling function within
        the contract's tolerance ("The pooling function"), and bit for bit
        across the schedules;
      * each cache byte by byte: reference.cache_entry of the dense row's
        f32 value (the bits the dense output holds, as the contract defines
        the entry), placed by reference.store_cache through the call's block
        table, the canary everywhere else.

Schedule A (engine style): chunked prefill whose chunk boundaries fall
inside pools (3 calls), then 3 decode calls of one token per request, each
call ring_close (to_cache) -> pool_offsets -> compress (to_cache) ->
seed_tail. Schedule B: the same four ops over a one-shot prefill with the
batch rows permuted (2, 0, 1), then 3 decode calls with other permutations
(the block-table rows, slots and cache lengths follow the requests).
Schedule S: A's calls through one kpool.step with to_cache (the fused step).

The block table maps request 0 -> pages (4, 1), request 1 -> (0, 5),
request 2 -> (3, -1): request 1 has more pools than the table's 2 pages
(the rest is not written), request 2's second page is the -1 padding (not
written). CONFIG `guard` uses (4, N), (0, 5), (2^31 - 1, 3) instead: pages
at or past N are not written.
"""

import argparse
import re
import struct
import sys

import numpy as np

from kpool import reference
from kpool.types import from_f32, to_f32, ulp_distance

CANARY = 0xA5
N_PAGES = 6
HEADER = 64  # canary bytes before page 0
PAGE_PAD = 64  # canary bytes after each page
WIDTH = 2
SLOTS = [2, 0, 1]  # ring slot of request r (not r)
TABLE = [[4, 1], [0, 5], [3, -1]]
GUARD_TABLE = [[4, N_PAGES], [0, 5], [2**31 - 1, 3]]

# name: (element type, head_dim, kpool, page_size, entry, rotate, scale)
CONFIGS = {
    "bf16-fp8-hadamard-absmax": ("bf16", 128, 4, 4, "fp8", "hadamard",
                                 "absmax"),
    "bf16-fp8-hadamard-pow2": ("bf16", 128, 4, 4, "fp8", "hadamard", "pow2"),
    "bf16-fp8-none-absmax": ("bf16", 128, 4, 4, "fp8", "none", "absmax"),
    "f16-fp8-hadamard-pow2": ("f16", 32, 3, 8, "fp8", "hadamard", "pow2"),
    "f32-fp8-hadamard-pow2": ("f32", 32, 3, 4, "fp8", "hadamard", "pow2"),
    "bf16-element-hadamard": ("bf16", 32, 4, 4, "element", "hadamard", None),
    "bf16-element-none": ("bf16", 32, 4, 4, "element", "none", None),
    "f16-element-hadamard": ("f16", 32, 3, 8, "element", "hadamard", None),
    "f16-element-none": ("f16", 32, 3, 8, "element", "none", None),
    "f32-element-hadamard": ("f32", 16, 3, 2, "element", "hadamard", None),
    "f32-element-none": ("f32", 16, 3, 2, "element", "none", None),
    "guard": ("bf16", 128, 4, 4, "fp8", "hadamard", "absmax"),
    # The smallest geometries (layout-sweep.test): head_dim 1 and 2, kpool
    # 1 (ring window 1), page_size 1 and 2.
    "d1-k1-bf16-fp8-hadamard-absmax": ("bf16", 1, 1, 2, "fp8", "hadamard",
                                       "absmax"),
    "d1-k1-f32-element-none": ("f32", 1, 1, 1, "element", "none", None),
    "d2-k1-f16-fp8-none-pow2": ("f16", 2, 1, 2, "fp8", "none", "pow2"),
    "d2-k1-bf16-element-hadamard": ("bf16", 2, 1, 1, "element", "hadamard",
                                    None),
}

MLIR_TYPE = {"bf16": "bf16", "f16": "f16", "f32": "f32"}
STORAGE = {"bf16": np.uint16, "f16": np.float16, "f32": np.float32}
BITS = {"bf16": (np.uint16, "i16"), "f16": (np.uint16, "i16"),
        "f32": (np.uint32, "i32")}
ESIZE = {"bf16": 2, "f16": 2, "f32": 4}


class Config:
    def __init__(self, name, overrides=()):
        if name not in CONFIGS:
            sys.exit(f"unknown config {name!r}; one of {', '.join(CONFIGS)}")
        (self.t, self.d, self.k, self.p, self.entry, self.rotate,
         self.scale) = CONFIGS[name]
        for item in overrides:  # --override scale=pow2 (the test can fail)
            key, value = item.split("=", 1)
            setattr(self, key, value)
        self.name = name
        self.table = GUARD_TABLE if name == "guard" else TABLE
        self.fp8 = self.entry == "fp8"
        self.ebytes = 1 if self.fp8 else ESIZE[self.t]
        entry_bytes = self.p * self.d * self.ebytes
        # Within a page (FP8), at a whole f32 (a multiple of 4 bytes already
        # unless head_dim * page_size is not).
        self.scales_at = -(-entry_bytes // 4) * 4
        self.page_stride = self.scales_at + (4 * self.p if self.fp8 else 0) + \
            PAGE_PAD
        total = HEADER + N_PAGES * self.page_stride
        self.total = -(-total // 32) * 32  # printed in 32-byte chunks
        p, k = self.p, self.k
        # Request lengths: request 0 fills its first page and part of its
        # second, with an open pool at the end; request 1 has one pool past
        # the table's width; request 2 reaches its -1 page.
        self.pools = [2 * p - 1, 2 * p + 1, p + 2]
        self.lengths = [self.pools[0] * k + k - 1, self.pools[1] * k + 1,
                        self.pools[2] * k + 2]
        # The schedules need a few tokens per request (only the smallest
        # geometries, page_size 1 with kpool 1, have fewer).
        self.lengths = [max(n, 7) for n in self.lengths]


def inputs(seed, cfg):
    """Keys, gates (T storage) per request, ape (f32)."""
    rng = np.random.default_rng(seed)
    keys, gates = [], []
    for r, length in enumerate(cfg.lengths):
        k = rng.normal(0.0, 1.5, (length, cfg.d)).astype(np.float32)
        k[:, rng.integers(0, cfg.d)] *= 8  # one large channel per request
        if r == 0:  # pool 2 all -0: a = max(0, 1e-4), codes keep the sign
            k[2 * cfg.k:3 * cfg.k] = -0.0
        if r == 1:  # pool 1 tiny: below the 1e-4 floor
            k[cfg.k:2 * cfg.k] *= 1e-6
        if r == 2:  # pool 0 large; pool 1 with channels that round to +-0
            k[0:cfg.k] *= 64
            k[cfg.k:2 * cfg.k, :8] *= 1e-5
        g = rng.uniform(-6.0, 6.0, (length, cfg.d)).astype(np.float32)
        keys.append(from_f32(k, cfg.t))
        gates.append(from_f32(g, cfg.t))
    ape = rng.normal(0.0, 1.5, (cfg.k, cfg.d)).astype(np.float32)
    return keys, gates, ape


def schedules(cfg):
    """Each schedule: calls, each a list of (request, start, end)."""
    k = cfg.k
    pre = [n - 3 for n in cfg.lengths]

    def inside(x):  # a cut inside a pool (with kpool 1 every cut is)
        return x if k == 1 or x % k else x + 1

    cuts = []
    for r, n in enumerate(pre):
        c1 = inside(n * (3 + r) // 10)
        c2 = inside(max(c1 + 1, n * (6 + r) // 10))
        cuts.append((c1, min(c2, n)))
    a = [[(r, 0, cuts[r][0]) for r in range(3)],
         [(r, cuts[r][0], cuts[r][1]) for r in range(3)],
         [(r, cuts[r][1], pre[r]) for r in range(3)]]
    for i in range(3):
        a.append([(r, pre[r] + i, pre[r] + i + 1) for r in range(3)])
    b = [[(r, 0, pre[r]) for r in (2, 0, 1)]]
    for i, order in enumerate(((1, 2, 0), (0, 1, 2), (2, 1, 0))):
        b.append([(r, pre[r] + i, pre[r] + i + 1) for r in order])
    # S: A's calls through one kpool.step with to_cache (the fused step).
    return {"A": a, "B": b, "S": a}


def call_operands(cfg, keys, gates, call):
    ks = np.concatenate([keys[r][s:e] for r, s, e in call])
    gs = np.concatenate([gates[r][s:e] for r, s, e in call])
    iro = [0]
    for _, s, e in call:
        iro.append(iro[-1] + e - s)
    cache = [s for _, s, _ in call]
    slots = [SLOTS[r] for r, _, _ in call]
    table = np.array([cfg.table[r] for r, _, _ in call], dtype=np.int32)
    return ks, gs, iro, cache, slots, table


def simulate(cfg, keys, gates, ape, calls):
    """Reference outputs per call: (closed_ids, closed, pro, pooled,
    produced [(batch row, request, pool id, 'closed' b | 'pooled' row)])."""
    tail = np.zeros((3, 2, cfg.k, cfg.d), dtype=STORAGE[cfg.t])
    out = []
    for call in calls:
        ks, gs, iro, cache, slots, _ = call_operands(cfg, keys, gates, call)
        closed, ids = reference.ring_close(tail, ks, gs, ape, iro, cache,
                                           slots)
        pro = reference.pool_offsets(iro, cache, cfg.k)
        pooled = reference.compress(ks, gs, ape, iro, pro, cache)
        reference.seed_tail(tail, ks, gs, iro, cache, slots)
        produced = []
        for b, (r, s, e) in enumerate(call):
            if ids[b] >= 0:
                produced.append((b, r, int(ids[b]), ("closed", b)))
            first = -(-s // cfg.k)
            for j in range(int(pro[b + 1]) - int(pro[b])):
                produced.append((b, r, first + j, ("pooled", int(pro[b]) + j)))
        out.append((ids, closed, pro, pooled, produced))
    return out


# --- emit --------------------------------------------------------------------


def hexdata(array):
    return '"0x' + np.ascontiguousarray(array).tobytes().hex().upper() + '"'


def emit(seed, cfg):
    keys, gates, ape = inputs(seed, cfg)
    scheds = schedules(cfg)
    t, d, k = MLIR_TYPE[cfg.t], cfg.d, cfg.k
    ibits = BITS[cfg.t][1]
    rows = f"memref<?x{d}x{t}>"
    meta = "memref<?xi32>"
    ring = f"memref<?x2x{k}x{d}x{t}>"
    etype = "f8E4M3FN" if cfg.fp8 else t
    ckeys = f"memref<?x?x{d}x{etype}, strided<[?, {d}, 1], offset: ?>>"
    cscales = "memref<?x?xf32, strided<[?, 1], offset: ?>>"
    fmt = f"rotate({cfg.rotate})"
    if cfg.fp8:
        fmt += f" scale({cfg.scale})"
        to_cache = (f"to_cache(%bt, %ckeys, %cscales : memref<?x?xi32>, "
                    f"{ckeys}, {cscales})")
        cache_args = f"%ckeys: {ckeys}, %cscales: {cscales}"
    else:
        to_cache = f"to_cache(%bt, %ckeys : memref<?x?xi32>, {ckeys})"
        cache_args = f"%ckeys: {ckeys}"
    o = []
    w = o.append
    w(f"// pool_cache_check.py --emit {seed} {cfg.name}: T={cfg.t} D={d} "
      f"K={k} page_size={cfg.p} entry={cfg.entry} {fmt}")
    w(f"// cache: {cfg.total} bytes, header {HEADER}, page stride "
      f"{cfg.page_stride}, {N_PAGES} pages; table {cfg.table}")
    w("")
    w(f"memref.global \"private\" constant @ape : memref<{k}x{d}xf32> = "
      f"dense<{hexdata(ape)}>")
    for sname, calls in scheds.items():
        if sname == "S":
            continue  # A's globals
        for i, call in enumerate(calls):
            ks, gs, iro, cache, slots, table = call_operands(cfg, keys, gates,
                                                             call)
            n, bsz = ks.shape[0], len(call)
            w(f"memref.global \"private\" constant @k_{sname}{i} : "
              f"memref<{n}x{d}x{t}> = dense<{hexdata(ks)}>")
            w(f"memref.global \"private\" constant @g_{sname}{i} : "
              f"memref<{n}x{d}x{t}> = dense<{hexdata(gs)}>")
            for nm, vals in (("iro", iro), ("cache", cache), ("slots", slots)):
                w(f"memref.global \"private\" constant @{nm}_{sname}{i} : "
                  f"memref<{len(vals)}xi32> = dense<{list(vals)}>")
            w(f"memref.global \"private\" constant @bt_{sname}{i} : "
              f"memref<{bsz}x{WIDTH}xi32> = dense<{table.tolist()}>")
    w("")
    # One serving step: the four ops in the engine's order.
    w(f"func.func @serve(%k: {rows}, %g: {rows}, %ape: memref<{k}x{d}xf32>, "
      f"%iro: {meta}, %cache: {meta}, %slots: {meta}, %n: i32, "
      f"%bt: memref<?x?xi32>, %tail: {ring}, {cache_args}, "
      f"%closed: {rows}, %ids: {meta}, %pro: {meta}, %pooled: {rows}) {{")
    w(f"  kpool.ring_close kpool({k}) head_dim({d})")
    w(f"      ins(%tail, %k, %g, %ape, %iro, %cache, %slots : {ring}, {rows}, "
      f"{rows}, memref<{k}x{d}xf32>, {meta}, {meta}, {meta})")
    w(f"      num_requests(%n) outs(%closed, %ids : {rows}, {meta})")
    w(f"      {to_cache} {fmt}")
    w(f"  kpool.pool_offsets kpool({k}) ins(%iro, %cache : {meta}, {meta}) "
      f"outs(%pro : {meta})")
    w(f"  kpool.compress kpool({k}) head_dim({d})")
    w(f"      ins(%k, %g, %ape, %iro, %pro, %cache : {rows}, {rows}, "
      f"memref<{k}x{d}xf32>, {meta}, {meta}, {meta})")
    w(f"      outs(%pooled : {rows})")
    w(f"      {to_cache} {fmt}")
    w(f"  kpool.seed_tail kpool({k}) head_dim({d})")
    w(f"      ins(%k, %g, %iro, %cache, %slots : {rows}, {rows}, {meta}, "
      f"{meta}, {meta})")
    w(f"      num_requests(%n) outs(%tail : {ring})")
    w("  return")
    w("}")
    w("")
    w(f"func.func @serve_step(%k: {rows}, %g: {rows}, "
      f"%ape: memref<{k}x{d}xf32>, %iro: {meta}, %cache: {meta}, "
      f"%slots: {meta}, %n: i32, %bt: memref<?x?xi32>, %tail: {ring}, "
      f"{cache_args}, %closed: {rows}, %ids: {meta}, %pro: {meta}, "
      f"%pooled: {rows}) {{")
    w(f"  kpool.step kpool({k}) head_dim({d})")
    w(f"      ins(%k, %g, %ape, %iro, %cache, %slots : {rows}, {rows}, "
      f"memref<{k}x{d}xf32>, {meta}, {meta}, {meta})")
    w(f"      num_requests(%n) outs(%closed, %ids, %pro, %pooled, %tail : "
      f"{rows}, {meta}, {meta}, {rows}, {ring})")
    w(f"      {to_cache} {fmt}")
    w("  return")
    w("}")
    w("")
    w(f"func.func @print_rows(%m: {rows}) {{")
    w("  %c0 = arith.constant 0 : index")
    w("  %c1 = arith.constant 1 : index")
    w(f"  %n = memref.dim %m, %c0 : {rows}")
    w(f"  %cd = arith.constant {d} : index")
    w("  scf.for %i = %c0 to %n step %c1 {")
    w("    scf.for %j = %c0 to %cd step %c1 {")
    w(f"      %v = memref.load %m[%i, %j] : {rows}")
    w(f"      %b = arith.bitcast %v : {t} to {ibits}")
    w(f"      vector.print %b : {ibits} punctuation <no_punctuation>")
    w("      vector.print punctuation <comma>")
    w("    }")
    w("    vector.print punctuation <newline>")
    w("  }")
    w("  return")
    w("}")
    w("")
    w(f"func.func @print_meta(%m: {meta}) {{")
    w("  %c0 = arith.constant 0 : index")
    w("  %c1 = arith.constant 1 : index")
    w(f"  %n = memref.dim %m, %c0 : {meta}")
    w("  scf.for %i = %c0 to %n step %c1 {")
    w(f"    %v = memref.load %m[%i] : {meta}")
    w("    vector.print %v : i32")
    w("  }")
    w("  return")
    w("}")
    w("")
    w("func.func @print_bytes(%m: memref<?xi8>) {")
    w("  %c0 = arith.constant 0 : index")
    w("  %c1 = arith.constant 1 : index")
    w("  %c32 = arith.constant 32 : index")
    w("  %n = memref.dim %m, %c0 : memref<?xi8>")
    w("  scf.for %i = %c0 to %n step %c32 {")
    w("    scf.for %j = %c0 to %c32 step %c1 {")
    w("      %at = arith.addi %i, %j : index")
    w("      %v = memref.load %m[%at] : memref<?xi8>")
    w("      %x = arith.extui %v : i8 to i32")
    w("      vector.print %x : i32 punctuation <no_punctuation>")
    w("      vector.print punctuation <comma>")
    w("    }")
    w("    vector.print punctuation <newline>")
    w("  }")
    w("  return")
    w("}")
    w("")
    w("func.func @main() {")
    w("  %c0 = arith.constant 0 : index")
    w(f"  %canary = arith.constant {CANARY - 256} : i8")
    w(f"  %zero = arith.constant 0.0 : {t}")
    w(f"  %ape = memref.get_global @ape : memref<{k}x{d}xf32>")
    for sname, calls in scheds.items():
        s = sname
        w(f"  // Schedule {s}: its own cache and ring.")
        w(f"  %buf{s} = memref.alloc() : memref<{cfg.total}xi8>")
        w(f"  linalg.fill ins(%canary : i8) outs(%buf{s} : "
          f"memref<{cfg.total}xi8>)")
        flat = cfg.total // cfg.ebytes
        w(f"  %kflat{s} = memref.view %buf{s}[%c0][] : memref<{cfg.total}xi8> "
          f"to memref<{flat}x{etype}>")
        kstride = cfg.page_stride // cfg.ebytes
        koff = HEADER // cfg.ebytes
        w(f"  %kview{s} = memref.reinterpret_cast %kflat{s} to offset: "
          f"[{koff}], sizes: [{N_PAGES}, {cfg.p}, {d}], strides: [{kstride}, "
          f"{d}, 1] : memref<{flat}x{etype}> to memref<{N_PAGES}x{cfg.p}x{d}x"
          f"{etype}, strided<[{kstride}, {d}, 1], offset: {koff}>>")
        w(f"  %ckeys{s} = memref.cast %kview{s} : memref<{N_PAGES}x{cfg.p}x{d}"
          f"x{etype}, strided<[{kstride}, {d}, 1], offset: {koff}>> to "
          f"{ckeys}")
        cache_vals = f"%ckeys{s}"
        if cfg.fp8:
            sflat = cfg.total // 4
            sstride = cfg.page_stride // 4
            soff = (HEADER + cfg.scales_at) // 4
            w(f"  %sflat{s} = memref.view %buf{s}[%c0][] : "
              f"memref<{cfg.total}xi8> to memref<{sflat}xf32>")
            w(f"  %sview{s} = memref.reinterpret_cast %sflat{s} to offset: "
              f"[{soff}], sizes: [{N_PAGES}, {cfg.p}], strides: [{sstride}, 1]"
              f" : memref<{sflat}xf32> to memref<{N_PAGES}x{cfg.p}xf32, "
              f"strided<[{sstride}, 1], offset: {soff}>>")
            w(f"  %cscales{s} = memref.cast %sview{s} : memref<{N_PAGES}x"
              f"{cfg.p}xf32, strided<[{sstride}, 1], offset: {soff}>> to "
              f"{cscales}")
            cache_vals += f", %cscales{s}"
        w(f"  %tail{s}s = memref.alloc() : memref<3x2x{k}x{d}x{t}>")
        w(f"  linalg.fill ins(%zero : {t}) outs(%tail{s}s : "
          f"memref<3x2x{k}x{d}x{t}>)")
        w(f"  %tail{s} = memref.cast %tail{s}s : memref<3x2x{k}x{d}x{t}> to "
          f"{ring}")
        for i, call in enumerate(calls):
            n = sum(e - st for _, st, e in call)
            bsz = len(call)
            npooled = int(reference.pool_offsets(
                *call_operands(cfg, keys, gates, call)[2:4], cfg.k)[-1])
            v = f"{s}{i}"
            gv = ("A" if s == "S" else s) + str(i)  # the call's globals
            w(f"  // {s}{i}: " + ", ".join(
                f"request {r} positions [{st}, {e})" for r, st, e in call))
            for nm, shape in (("k", f"{n}x{d}x{t}"), ("g", f"{n}x{d}x{t}")):
                w(f"  %{nm}{v}s = memref.get_global @{nm}_{gv} : "
                  f"memref<{shape}>")
                w(f"  %{nm}{v} = memref.cast %{nm}{v}s : memref<{shape}> to "
                  f"{rows}")
            for nm, ln in (("iro", bsz + 1), ("cache", bsz), ("slots", bsz)):
                w(f"  %{nm}{v}s = memref.get_global @{nm}_{gv} : "
                  f"memref<{ln}xi32>")
                w(f"  %{nm}{v} = memref.cast %{nm}{v}s : memref<{ln}xi32> to "
                  f"{meta}")
            w(f"  %bt{v}s = memref.get_global @bt_{gv} : "
              f"memref<{bsz}x{WIDTH}xi32>")
            w(f"  %bt{v} = memref.cast %bt{v}s : memref<{bsz}x{WIDTH}xi32> to "
              f"memref<?x?xi32>")
            w(f"  %n{v} = arith.constant {bsz} : i32")
            for nm, shape, ty in (("closed", f"{bsz}x{d}x{t}", rows),
                                  ("ids", f"{bsz}xi32", meta),
                                  ("pro", f"{bsz + 1}xi32", meta),
                                  ("pooled", f"{npooled}x{d}x{t}", rows)):
                w(f"  %{nm}{v}s = memref.alloc() : memref<{shape}>")
                w(f"  %{nm}{v} = memref.cast %{nm}{v}s : memref<{shape}> to "
                  f"{ty}")
            w(f"  linalg.fill ins(%zero : {t}) outs(%pooled{v} : {rows})")
            fn = "serve_step" if s == "S" else "serve"
            w(f"  call @{fn}(%k{v}, %g{v}, %ape, %iro{v}, %cache{v}, "
              f"%slots{v}, %n{v}, %bt{v}, %tail{s}, {cache_vals}, "
              f"%closed{v}, %ids{v}, %pro{v}, %pooled{v}) : ({rows}, {rows}, "
              f"memref<{k}x{d}xf32>, {meta}, {meta}, {meta}, i32, "
              f"memref<?x?xi32>, {ring}, {ckeys}"
              + (f", {cscales}" if cfg.fp8 else "")
              + f", {rows}, {meta}, {meta}, {rows}) -> ()")
            w(f"  vector.print str \"CALL {s} {i}\\n\"")
            w("  vector.print str \"IDS\\n\"")
            w(f"  call @print_meta(%ids{v}) : ({meta}) -> ()")
            w("  vector.print str \"CLOSED\\n\"")
            w(f"  call @print_rows(%closed{v}) : ({rows}) -> ()")
            w("  vector.print str \"PRO\\n\"")
            w(f"  call @print_meta(%pro{v}) : ({meta}) -> ()")
            w("  vector.print str \"POOLED\\n\"")
            w(f"  call @print_rows(%pooled{v}) : ({rows}) -> ()")
    for sname in scheds:
        s = sname
        w(f"  vector.print str \"CACHE {s}\\n\"")
        w(f"  %bytes{s} = memref.cast %buf{s} : memref<{cfg.total}xi8> to "
          f"memref<?xi8>")
        w(f"  call @print_bytes(%bytes{s}) : (memref<?xi8>) -> ()")
    w("  vector.print str \"END\\n\"")
    w("  return")
    w("}")
    print("\n".join(o))


# --- check -------------------------------------------------------------------


def parse(text):
    """{('CALL', s, i): {section: [int lists]}, ('CACHE', s): bytes}."""
    out, cur, sec, ended = {}, None, None, False
    num = re.compile(r"-?\d+")
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("CALL "):
            _, s, i = line.split()
            cur = out.setdefault(("CALL", s, int(i)), {})
            sec = None
        elif line.startswith("CACHE "):
            cur = out.setdefault(("CACHE", line.split()[1]), {})
            sec = "BYTES"
            cur[sec] = []
        elif line in ("IDS", "CLOSED", "PRO", "POOLED"):
            sec = line
            cur[sec] = []
        elif line == "END":
            ended = True
        elif cur is not None and sec is not None:
            cur[sec].append([int(x) for x in num.findall(line)])
    return out, ended


def ulp(value, etype):
    """The ulp of T at magnitude `value` (float64 arrays)."""
    mant, emin = {"bf16": (7, -126), "f16": (10, -14),
                  "f32": (23, -126)}[etype]
    e = np.floor(np.log2(np.maximum(np.abs(value), 1e-300)))
    e = np.maximum(e, emin)
    return np.exp2(e - mant)


def exact_pool(keys, gates, ape, etype):
    """(value, S) in float64 of one pool [K, D] (docs: the tolerance), with
    the CPU kernels' rule for subnormal weights: those whose float32
    argument z - max z is below -126 ln 2 are zero."""
    k = to_f32(keys, etype).astype(np.float64)
    z = to_f32(gates, etype).astype(np.float64) + ape.astype(np.float64)
    e = np.exp(z - z.max(axis=0))
    z32 = (to_f32(gates, etype) + ape).astype(np.float32)  # as the kernels
    e[(z32 - z32.max(axis=0)) < np.float32(-87.33654022216796875)] = 0
    total = e.sum(axis=0)
    return (e * k).sum(axis=0) / total, (e * np.abs(k)).sum(axis=0) / total, \
        np.abs(to_f32(gates, etype) + ape).max(axis=0)


class Failures:
    def __init__(self, limit=12):
        self.count, self.limit, self.kinds = 0, limit, {}

    def add(self, kind, message):
        self.count += 1
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if self.kinds[kind] <= self.limit:
            print(f"MISMATCH [{kind}] {message}")


def entry_bytes(cfg, values, scale):
    """The bytes of one entry (codes or T storage) and its scale."""
    data = np.ascontiguousarray(values).tobytes()
    return data, (struct.pack("<f", float(scale)) if scale is not None
                  else None)


def expected_cache(cfg, produced_entries):
    """Canary bytes with every stored entry; produced_entries is a list of
    (table, batch_row, pool_id, dense f32 row). Returns (bytes, owner) where
    owner maps an entry (page, row) to (batch_row, pool_id, y, s)."""
    buf = bytearray([CANARY]) * cfg.total
    keys = np.zeros((N_PAGES, cfg.p, cfg.d),
                    dtype=np.uint8 if cfg.fp8 else STORAGE[cfg.t])
    scales = np.zeros((N_PAGES, cfg.p), dtype=np.float32) if cfg.fp8 else None
    owner = {}
    for table, b, pool, x, tag in produced_entries:
        values, s = reference.cache_entry(
            x, cfg.t, rotate=cfg.rotate,
            entry="fp8" if cfg.fp8 else "element",
            scale=cfg.scale or "absmax")
        if not reference.store_cache(keys, scales, table, b, pool, values,
                                     s if cfg.fp8 else None):
            continue
        page = int(table[b, pool // cfg.p]) & 0xFFFFFFFF
        row = pool % cfg.p
        owner[(page, row)] = (tag, x, s)
        base = HEADER + page * cfg.page_stride
        data, sbytes = entry_bytes(cfg, keys[page, row],
                                   scales[page, row] if cfg.fp8 else None)
        at = base + row * cfg.d * cfg.ebytes
        buf[at:at + len(data)] = data
        if sbytes is not None:
            at = base + cfg.scales_at + 4 * row
            buf[at:at + 4] = sbytes
    return bytes(buf), owner


def locate(cfg, offset):
    """(page, row, what) of a cache byte offset; what is a channel, 'scale
    byte i' or 'padding'."""
    if offset < HEADER:
        return None, None, "header"
    page, within = divmod(offset - HEADER, cfg.page_stride)
    if page >= N_PAGES:
        return None, None, "tail padding"
    entry_bytes_ = cfg.p * cfg.d * cfg.ebytes
    if within < entry_bytes_:
        row, rest = divmod(within, cfg.d * cfg.ebytes)
        return page, row, f"channel {rest // cfg.ebytes}" + (
            f" byte {rest % cfg.ebytes}" if cfg.ebytes > 1 else "")
    if cfg.fp8 and cfg.scales_at <= within < cfg.scales_at + 4 * cfg.p:
        row, byte = divmod(within - cfg.scales_at, 4)
        return page, row, f"scale byte {byte}"
    return page, None, "page padding"


def describe_entry(cfg, got, want, page, row, owner):
    """One line per differing entry: scale and codes, with the pre-rounding
    value of each differing code."""
    base = HEADER + page * cfg.page_stride
    at = base + row * cfg.d * cfg.ebytes
    n = cfg.d * cfg.ebytes
    gk = np.frombuffer(got[at:at + n],
                       dtype=np.uint8 if cfg.fp8 else STORAGE[cfg.t])
    wk = np.frombuffer(want[at:at + n],
                       dtype=np.uint8 if cfg.fp8 else STORAGE[cfg.t])
    lines = []
    tag, x, s = owner.get((page, row), (None, None, None))
    if cfg.fp8:
        sa = base + cfg.scales_at + 4 * row
        gs = struct.unpack("<f", got[sa:sa + 4])[0]
        ws = struct.unpack("<f", want[sa:sa + 4])[0]
        if got[sa:sa + 4] != want[sa:sa + 4]:
            lines.append(f"  scale: got {gs!r} ({got[sa:sa + 4].hex()}) want "
                         f"{ws!r} ({want[sa:sa + 4].hex()})")
    diff = np.flatnonzero(gk.view(np.uint8 if cfg.fp8 else
                                  BITS[cfg.t][0]) !=
                          wk.view(np.uint8 if cfg.fp8 else BITS[cfg.t][0]))
    if len(diff):
        y = None
        if x is not None:
            y = np.array(x, dtype=np.float32)
            if cfg.rotate == "hadamard":
                c = np.float32(1.0 / np.sqrt(float(cfg.d)))
                y = to_f32(from_f32(reference.hadamard(y) * c, cfg.t), cfg.t)
        parts = []
        for ch in diff[:8]:
            if cfg.fp8:
                q = "" if y is None else \
                    f" y/s(want s)={np.float32(y[ch] / np.float32(s))!r}"
                parts.append(
                    f"ch {ch}: got 0x{gk[ch]:02x}"
                    f"={reference.e4m3fn_decode(gk[ch])!r} want "
                    f"0x{wk[ch]:02x}={reference.e4m3fn_decode(wk[ch])!r}{q}")
            else:
                parts.append(f"ch {ch}: got {to_f32(gk[ch:ch+1], cfg.t)[0]!r}"
                             f" want {to_f32(wk[ch:ch+1], cfg.t)[0]!r}")
        lines.append(f"  {len(diff)} of {cfg.d} values differ: " +
                     "; ".join(parts))
    return lines


def compare_cache(cfg, name, got, want, owner, fails):
    if len(got) != len(want):
        fails.add("cache-size", f"{name}: {len(got)} bytes printed, "
                  f"{len(want)} expected")
        return
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    entries = {}
    for i in bad:
        page, row, what = locate(cfg, i)
        if row is None or what == "page padding":
            fails.add("cache-outside-entries",
                      f"{name}: byte {i} ({what}, page {page}): got "
                      f"0x{got[i]:02x} want 0x{want[i]:02x}")
            continue
        entries.setdefault((page, row), []).append((i, what))
    for (page, row), items in sorted(entries.items()):
        whose = (f"entry of {owner[(page, row)][0]}" if (page, row) in owner
                 else "no pool goes here: canary expected")
        head = (f"{name}: page {page} row {row} ({whose})"
                f": {len(items)} bytes differ, first "
                + ", ".join(f"{what} got 0x{got[i]:02x} want 0x{want[i]:02x}"
                            for i, what in items[:4]))
        fails.add("cache-entry", head)
        if fails.kinds["cache-entry"] <= fails.limit:
            for line in describe_entry(cfg, got, want, page, row, owner):
                print(line)


def check(seed, cfg, text):
    keys, gates, ape = inputs(seed, cfg)
    scheds = schedules(cfg)
    out, ended = parse(text)
    fails = Failures()
    if not ended:
        fails.add("output", "the program's output has no END line")
    ibits = BITS[cfg.t][0]
    dense = {}  # schedule -> {(request, pool): bits}
    for sname, calls in scheds.items():
        ref = simulate(cfg, keys, gates, ape, calls)
        entries, ref_entries, ref_rows = [], [], []
        dense[sname] = {}
        for i, (call, (ids, closed, pro, pooled, produced)) in enumerate(
                zip(calls, ref)):
            got = out.get(("CALL", sname, i))
            where = f"schedule {sname} call {i}"
            if got is None:
                fails.add("output", f"{where}: not printed")
                continue
            gids = [v[0] for v in got.get("IDS", [])]
            gpro = [v[0] & 0xFFFFFFFF for v in got.get("PRO", [])]
            if gids != ids.tolist():
                fails.add("closed_pool", f"{where}: got {gids} want "
                          f"{ids.tolist()}")
            if gpro != [int(v) for v in pro]:
                fails.add("pool_offsets", f"{where}: got {gpro} want "
                          f"{[int(v) for v in pro]}")
            rows = {"closed": got.get("CLOSED", []),
                    "pooled": got.get("POOLED", [])}
            table = call_operands(cfg, keys, gates, call)[5]
            for b, r, pool, (kind, index) in produced:
                if index >= len(rows[kind]) or len(rows[kind][index]) != cfg.d:
                    fails.add("output", f"{where}: {kind} row {index} missing")
                    continue
                bits = np.array(rows[kind][index], dtype=np.int64).astype(
                    ibits)
                value = bits.view(STORAGE[cfg.t]) if cfg.t != "bf16" else bits
                x = to_f32(value, cfg.t)
                if (r, pool) in dense[sname]:
                    fails.add("schedule", f"{where}: request {r} pool {pool} "
                              "produced twice")
                dense[sname][(r, pool)] = bits
                members = slice(pool * cfg.k, (pool + 1) * cfg.k)
                exact, mag, zmax = exact_pool(keys[r][members],
                                              gates[r][members], ape, cfg.t)
                tol = 1.0 if cfg.t != "f32" else 4.0 + 6.0 * zmax
                err = np.abs(x.astype(np.float64) - exact) / ulp(mag, cfg.t)
                if (err > tol).any():
                    ch = int(np.argmax(err - tol))
                    fails.add("dense", f"{where}: request {r} pool {pool} "
                              f"({kind} row {index}) channel {ch}: got "
                              f"{x[ch]!r}, exact {exact[ch]!r}, "
                              f"{err[ch]:.2f} ulps of S (bound {tol:.1f})")
                tag = (f"request {r} pool {pool}, {sname}{i} {kind} row "
                       f"{index}, batch row {b}")
                entries.append((table, b, pool, x, tag))
                ref_row = (closed if kind == "closed" else pooled)[index]
                ref_entries.append((table, b, pool, to_f32(ref_row, cfg.t),
                                    tag))
                dist = int(ulp_distance(value, ref_row, cfg.t).max())
                ref_rows.append((dist == 0, dist))
        for r in range(3):
            want = set(range(cfg.lengths[r] // cfg.k))
            have = {p for (rr, p) in dense[sname] if rr == r}
            if have != want:
                fails.add("schedule", f"schedule {sname}: request {r} "
                          f"produced pools {sorted(have)}, want "
                          f"{sorted(want)}")
        want_bytes, owner = expected_cache(cfg, entries)
        got_cache = out.get(("CACHE", sname), {}).get("BYTES", [])
        got_bytes = bytes(v & 0xFF for line in got_cache for v in line)
        compare_cache(cfg, f"cache {sname}", got_bytes, want_bytes, owner,
                      fails)
        written = len(owner)
        canary = cfg.total - written * (cfg.d * cfg.ebytes +
                                        (4 if cfg.fp8 else 0))
        print(f"schedule {sname}: {len(entries)} pools, {written} cache "
              f"entries written, {canary} canary bytes")
        # For information: the reference's own dense rows (numpy's exp, not
        # the kernels' polynomial: equal within a few ulps, not bit for bit)
        # and the cache they would give.
        same = sum(1 for e in ref_rows if e[0])
        worst = max((e[1] for e in ref_rows), default=0)
        ref_bytes, _ = expected_cache(cfg, ref_entries)
        ref_diff = {locate(cfg, i)[:2] for i in range(min(len(ref_bytes),
                                                          len(got_bytes)))
                    if ref_bytes[i] != got_bytes[i]}
        print(f"  note: {same} of {len(ref_rows)} dense pools bit-identical "
              f"to reference.compress/ring_close (max {worst} ulps); a cache "
              f"built from the reference's dense rows differs from the "
              f"kernels' in {len(ref_diff)} entries")
    # The same pool, bit for bit, however its tokens arrived.
    for other in [name for name in scheds if name != "A"]:
        for key in sorted(set(dense["A"]) & set(dense[other])):
            if not np.array_equal(dense["A"][key], dense[other][key]):
                fails.add("schedules-differ",
                          f"request {key[0]} pool {key[1]}: dense bits "
                          f"differ between schedules A and {other}")
        ca = bytes(v & 0xFF for line in out.get(("CACHE", "A"), {}).get(
            "BYTES", []) for v in line)
        cb = bytes(v & 0xFF for line in out.get(("CACHE", other), {}).get(
            "BYTES", []) for v in line)
        if ca != cb:
            n = sum(1 for a, b in zip(ca, cb) if a != b) + abs(len(ca) -
                                                                len(cb))
            fails.add("schedules-differ",
                      f"caches A and {other} differ in {n} bytes")
    if fails.count:
        print(f"FAIL {cfg.name} seed {seed}: {fails.count} mismatches "
              f"{fails.kinds}")
        return 1
    print(f"PASS {cfg.name} seed {seed}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--emit", action="store_true")
    mode.add_argument("--check", action="store_true")
    parser.add_argument("seed", type=int)
    parser.add_argument("config", choices=sorted(CONFIGS))
    parser.add_argument("--override", action="append", default=[],
                        metavar="FIELD=VALUE",
                        help="check against another format (e.g. "
                             "scale=pow2): the test must then fail")
    parser.add_argument("--corrupt", type=int, default=None, metavar="BYTE",
                        help="flip one printed cache byte of schedule A "
                             "before checking: the test must then fail")
    args = parser.parse_args()
    cfg = Config(args.config, args.override)
    if args.emit:
        emit(args.seed, cfg)
        return 0
    text = sys.stdin.read()
    if args.corrupt is not None:
        text = corrupt(text, args.corrupt)
    return check(args.seed, cfg, text)


def corrupt(text, offset):
    """Flips the low bit of byte `offset` of cache A in the runner output."""
    lines = text.splitlines()
    start = lines.index("CACHE A") + 1
    line, at = start + offset // 32, offset % 32
    values = [int(v) for v in re.findall(r"-?\d+", lines[line])]
    values[at] ^= 1
    lines[line] = "( " + ", ".join(str(v) for v in values) + " )"
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
