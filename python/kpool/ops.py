"""The ops as Python presents them: the kernel ABI table plus a little data.

Every op's Python signature -- the module function, the KernelSet method
and the kpool.torch schema -- is derived here from its kernels in the
table (kpool._capi.kernels(): the plain kernel and, when the table has one,
its ``*_cache`` kernel), with keyword names that are the operand names:

* positional: the operands a caller must give, in the table's order (the
  op's inputs, and outputs without an allocation rule, which it updates in
  place, e.g. the ring ``tail``); an operand with a fill rule may be None
  (and defaults to None when it is last, as ``num_requests``);
* keyword-only: the outputs with an allocation rule (allocated when left
  out, in the caller's kind of array), then the pool-cache group of the
  ``*_cache`` kernel (``block_table`` and the cache outputs: given
  together, they select that kernel), then the call's options.

What the data below adds are the conveniences no table can say: how to
allocate an output from the call's other operands (ALLOCATE), how to fill
in an input left as None (FILL), and what a result is. An operand without
a rule must be passed; a new operand in the table appears in every
signature by itself.

The op's result: the outputs it may allocate (one, or a tuple in the
table's order), or, when it has none, the outputs it updates in place.
"""

import collections
import inspect

from . import _capi

#: Batch size B (cache_lengths' entries), tokens T (rows of k), head_dim D
#: and kpool K of a call, plus its operands by name (`values`) and its
#: kernel set (`kernels`), for the rules below.
Context = collections.namedtuple("Context", "B T D K values kernels")

#: How to allocate an output a call leaves out: its shape from the call's
#: context, whether that shape reads metadata values (only host metadata
#: allows that; PyTorch's meta implementations cannot), and what it is (for
#: the message when a caller must give it: on a CUDA set).
Rule = collections.namedtuple("Rule", "shape reads_values what")

ALLOCATE = {
    # compress writes pooled[pool_row_offsets[b] + j]: exactly the rows
    # the metadata claims.
    ("compress", "pooled"): Rule(
        lambda c: (int(c.values["pool_row_offsets"][-1]) if c.B else 0, c.D),
        True, "[rows, head_dim], rows at least pool_row_offsets[B]"),
    ("pool_offsets", "pool_row_offsets"): Rule(
        lambda c: (c.B + 1,), False, "[B+1] uint32 or int32"),
    ("ring_close", "pooled"): Rule(lambda c: (c.B, c.D), False,
                                   "[B, head_dim]"),
    ("ring_close", "closed_pool"): Rule(lambda c: (c.B,), False,
                                        "[B] int32"),
    ("step", "closed"): Rule(lambda c: (c.B, c.D), False, "[B, head_dim]"),
    ("step", "closed_pool"): Rule(lambda c: (c.B,), False, "[B] int32"),
    ("step", "pool_row_offsets"): Rule(lambda c: (c.B + 1,), False,
                                       "[B+1] uint32 or int32"),
    # A capacity: a call of T tokens completes at most floor(T / K) + B
    # pools.
    ("step", "pooled"): Rule(
        lambda c: (c.T // c.K + c.B, c.D), False,
        "[capacity, head_dim], capacity floor(T / kpool) + B"),
}


def _pool_row_offsets(c):
    # Unvalidated: the op's own checks report bad rows under its name.
    return c.kernels.pool_offsets(c.values["input_row_offsets"],
                                  c.values["cache_lengths"], validate=False)


#: How to fill in an input a call leaves as None: (op, operand), or an
#: operand of every op.
FILL = {
    "num_requests": lambda c: c.B,
    ("compress", "pool_row_offsets"): _pool_row_offsets,
}
#: What a filled-in input is, for the message when a caller must give it
#: (on a CUDA set, where the Python layer reads no metadata).
FILL_WHAT = {
    ("compress", "pool_row_offsets"):
        "[B+1], e.g. from pool_offsets(..., pool_row_offsets=...)",
}

#: Readable descriptions of the operands, for the docstrings.
DESCRIBE = {
    "k": "keys [T, head_dim]",
    "gate": "gates [T, head_dim]",
    "ape": "position embedding [kpool, head_dim] float32",
    "input_row_offsets": "rows of k of each request [B+1]",
    "pool_row_offsets": "rows of the pooled output of each request [B+1]",
    "cache_lengths": "tokens each request had before this call [B]",
    "slot_idx": "each request's ring slot [B]",
    "num_requests": "the live requests (default B)",
    "tail": "the ring [max_slots, 2, R, head_dim], R >= kpool",
    "pooled": "pooled keys [rows, head_dim]",
    "closed": "the pools ring_close closes [B, head_dim]",
    "closed_pool": "the id of each closed pool, -1 for none [B] int32",
    "block_table": "each request's cache pages [B, W] (-1 padding)",
    "cache_keys": "cache entries [N, page_size, head_dim]",
    "cache_scales": "FP8 entries' scales [N, page_size] float32",
}


class Op:
    """One op: its kernels and its Python parameters (see module doc)."""

    def __init__(self, kernel, cache_kernel):
        self.name = kernel.name
        self.kernel = kernel
        self.cache_kernel = cache_kernel
        operands = [o for o in kernel.operands if o.role != "context"]
        self.operands = {o.name: o for o in operands}
        self.allocate = {o.name: ALLOCATE[(self.name, o.name)]
                         for o in operands
                         if (self.name, o.name) in ALLOCATE}
        self.positional = [o.name for o in operands
                           if o.name not in self.allocate]
        self.outputs = [o.name for o in operands if o.role == "output"]
        base = set(self.operands)
        self.cache = ([o.name for o in cache_kernel.operands
                       if o.role != "context" and o.name not in base]
                      if cache_kernel else [])
        self.returns = list(self.allocate) or self.outputs
        #: The operand ``out=`` names (numpy's and PyTorch's keyword for
        #: an op's output): the op's only output with an allocation rule.
        self.out = next(iter(self.allocate)) if len(self.allocate) == 1 \
            else None

    def fill(self, name):
        """The fill rule of operand `name`, or None."""
        return FILL.get((self.name, name), FILL.get(name))

    def kernel_for(self, cache):
        """The kernel of a call with (`cache`) or without the cache group."""
        return self.cache_kernel if cache else self.kernel

    def parameters(self, leading=(), options=()):
        """The inspect.Parameters of the op's Python functions:
        `leading` (e.g. self), the operands, then keyword-only `options`
        (name, default) pairs."""
        P = inspect.Parameter
        params = [P(n, P.POSITIONAL_OR_KEYWORD) for n in leading]
        for i, name in enumerate(self.positional):
            trailing = all(self.fill(n) for n in self.positional[i:])
            params.append(P(name, P.POSITIONAL_OR_KEYWORD,
                            **({"default": None} if trailing else {})))
        for name in list(self.allocate) + self.cache:
            params.append(P(name, P.KEYWORD_ONLY, default=None))
        if self.out:
            params.append(P("out", P.KEYWORD_ONLY, default=None))
        for name, default in options:
            params.append(P(name, P.KEYWORD_ONLY, default=default))
        return params

    def doc(self, what):
        """A docstring: `what`, then the operands and the result."""
        lines = [what, "", "Operands (keyword names are the kernel ABI's):"]
        for name in self.positional + list(self.allocate) + self.cache:
            rule = ("allocated when left out" if name in self.allocate
                    else "may be None" if self.fill(name)
                    else "pool-cache group" if name in self.cache
                    else "updated in place" if name in self.outputs
                    else "")
            o = self.operands.get(name)
            desc = DESCRIBE.get(name, f"{o.kind} [{o.shape}]" if o else name)
            lines.append(f"  {name}: {desc}" + (f" ({rule})" if rule else ""))
        if self.out:
            lines.append(f"  out: the same as {self.out}")
        lines += ["", "Returns " + (", ".join(self.returns)) + "."]
        return "\n".join(lines)


def ops():
    """The ops of the kernel ABI table by name (loads the library)."""
    table = _capi.kernels()
    result = {}
    for kernel in table.values():
        if kernel.base != kernel.name:
            continue
        cache = next((k for k in table.values()
                      if k.base == kernel.name and k.name != kernel.name),
                     None)
        result[kernel.name] = Op(kernel, cache)
    return result
