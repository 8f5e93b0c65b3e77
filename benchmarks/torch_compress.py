#!/usr/bin/env python3
"""A straightforward PyTorch implementation of kpool.compress, timed on the GPU.

The baseline kpool-bench-gpu is compared with: the same prefill geometry
(tokens in equal requests, no cached prefix, bf16 keys and gates, head_dim
128, kpool 4), the same byte count (k + gate read, pooled written), and a
device-to-device copy of that byte count timed the same way. Times are
CUDA-event medians of interleaved rounds (kernels only: PyTorch launches
asynchronously, so there is no per-call synchronization in them, unlike the
kpool calls, which synchronize).

    python3 benchmarks/torch_compress.py [--tokens N] [--requests R] [--compile]

Prints a line saying so and exits 0 when PyTorch or a CUDA device is missing.
"""

import argparse
import statistics
import sys

try:
    import torch
except ImportError:
    print("torch_compress.py: PyTorch is not installed here; no PyTorch figures")
    sys.exit(0)


def compress(k, gate, ape, kpool):
    """pooled[p] = sum_m softmax_m(gate + ape)[m] * k[m], per channel.

    Every request's token count is a multiple of kpool and nothing is
    cached, so the pools are consecutive groups of kpool rows.
    """
    tokens, dim = k.shape
    z = gate.view(-1, kpool, dim).float() + ape  # [P, K, D]
    weights = torch.softmax(z, dim=1)
    return (weights * k.view(-1, kpool, dim).float()).sum(dim=1).to(k.dtype)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1 << 20)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--kpool", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--compile", action="store_true",
                        help="also time torch.compile of the same function")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("torch_compress.py: PyTorch sees no CUDA device; no PyTorch figures")
        return 0

    K, D = args.kpool, args.head_dim
    per_request = args.tokens // args.requests // K * K
    tokens = per_request * args.requests
    pools = tokens // K
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(7)
    k = torch.randn(tokens, D, device=dev, generator=gen).to(torch.bfloat16)
    gate = (4 * torch.randn(tokens, D, device=dev, generator=gen)).to(torch.bfloat16)
    ape = 2 * torch.randn(K, D, device=dev, generator=gen)
    nbytes = (2 * tokens + pools) * D * k.element_size()
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)

    candidates = [("device-to-device copy", lambda: dst.copy_(src)),
                  ("PyTorch eager compress", lambda: compress(k, gate, ape, K))]
    if args.compile:
        compiled = torch.compile(compress)
        candidates.append(("torch.compile compress",
                           lambda: compiled(k, gate, ape, K)))

    for _, fn in candidates:  # warm up (and compile)
        fn()
    torch.cuda.synchronize()
    samples = [[] for _ in candidates]
    for _ in range(args.rounds):
        for i, (_, fn) in enumerate(candidates):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.reps):
                fn()
            end.record()
            end.synchronize()
            samples[i].append(start.elapsed_time(end) / 1e3 / args.reps)
    times = [statistics.median(s) for s in samples]

    print(f"torch_compress.py: PyTorch {torch.__version__} on "
          f"{torch.cuda.get_device_name()}: {tokens} tokens in {args.requests} "
          f"requests, {pools} pools, bf16, head_dim {D}, kpool {K}: "
          f"{nbytes / 2**20:.1f} MiB moved (k + gate read, pooled written); "
          f"CUDA-event medians, no per-call synchronization")
    copy_rate = 2 * nbytes / times[0]
    print(f"  device-to-device copy of the same bytes  {times[0] * 1e3:8.3f} ms"
          f"  {copy_rate / 1e9:7.1f} GB/s read+written")
    for (name, _), t in zip(candidates[1:], times[1:]):
        print(f"  {name:<32} {t * 1e3:8.3f} ms  {nbytes / t / 1e9:7.1f} GB/s"
              f"  {(nbytes / t) / copy_rate:.2f} of the copy's rate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
