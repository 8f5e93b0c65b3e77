#!/usr/bin/env python3
"""The accuracy check of kpool-map-to-gpu's fast-math against the contract.

    fast-math-accuracy.py gen  > program.mlir     # inputs and a main
    fast-math-accuracy.py check program.out       # what main printed

`gen` writes a program that runs kpool.compress (kpool 4, head_dim 32) on
bf16 and on f16 inputs with a non-zero ape and gates up to +-60 (so that the
softmax discriminates and |z| is large), and prints the pooled rows.
`check` recomputes every pool in double precision from the same inputs and
checks the contract's tolerance (docs/semantics.md): within 1 ulp of T of
the magnitude S = sum(e_m |k_m|) / sum(e_m), less a margin for what the
emulation cannot model (the GPU's ex2.approx.f32 and div.approx.f32, at most
2 f32 ulps each, which move a weighted mean by at most 6 f32 ulps of S).
Prints the largest error found, in ulps of S, per type.
"""

import math
import random
import re
import struct
import sys

K, D, POOLS = 4, 32, 24
N = K * POOLS


def round_bits(x, mant):
    """x rounded to nearest even with `mant` explicit mantissa bits."""
    if x == 0 or not math.isfinite(x):
        return x
    m, e = math.frexp(x)  # x = m * 2^e, 0.5 <= |m| < 1
    scale = 2.0 ** (mant + 1)
    r = round(m * scale) / scale  # round() is half-to-even
    return math.ldexp(r, e)


def to_f32(x):
    return struct.unpack('f', struct.pack('f', x))[0]


TYPES = {'bf16': 7, 'f16': 10}


def inputs(seed):
    rnd = random.Random(seed)
    k = [[rnd.uniform(-4, 4) for _ in range(D)] for _ in range(N)]
    g = [[rnd.choice([rnd.uniform(-1, 1), rnd.uniform(-60, 60)])
          for _ in range(D)] for _ in range(N)]
    ape = [[to_f32(rnd.uniform(-3, 3)) for _ in range(D)] for _ in range(K)]
    return k, g, ape


def typed(rows, mant):
    return [[round_bits(v, mant) for v in r] for r in rows]


def dense(rows):
    return '[' + ', '.join('[' + ', '.join(repr(v) for v in r) + ']'
                           for r in rows) + ']'


def gen():
    k, g, ape = inputs(12)
    out = []
    out.append('memref.global "private" constant @ape : memref<%dx%dxf32> = '
               'dense<%s>' % (K, D, dense(ape)))
    out.append('memref.global "private" constant @iro : memref<2xi32> = '
               'dense<[0, %d]>' % N)
    out.append('memref.global "private" constant @zero : memref<1xi32> = '
               'dense<[0]>')
    out.append('memref.global "private" constant @pro : memref<2xi32> = '
               'dense<[0, %d]>' % POOLS)
    for t, mant in TYPES.items():
        out.append('memref.global "private" constant @k_%s : memref<%dx%dx%s> '
                   '= dense<%s>' % (t, N, D, t, dense(typed(k, mant))))
        out.append('memref.global "private" constant @g_%s : memref<%dx%dx%s> '
                   '= dense<%s>' % (t, N, D, t, dense(typed(g, mant))))
    out.append('func.func private @printMemrefF32(memref<*xf32>)')
    for t in TYPES:
        out.append('''
func.func @pools_%(t)s(%%k: memref<?x%(D)dx%(t)s>, %%g: memref<?x%(D)dx%(t)s>,
    %%ape: memref<%(K)dx%(D)dxf32>, %%iro: memref<?xi32>, %%pro: memref<?xi32>,
    %%cache: memref<?xi32>, %%out: memref<?x%(D)dx%(t)s>) {
  kpool.compress kpool(%(K)d) head_dim(%(D)d)
      ins(%%k, %%g, %%ape, %%iro, %%pro, %%cache
          : memref<?x%(D)dx%(t)s>, memref<?x%(D)dx%(t)s>, memref<%(K)dx%(D)dxf32>,
            memref<?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%%out : memref<?x%(D)dx%(t)s>)
  return
}''' % {'t': t, 'K': K, 'D': D})
    out.append('func.func @main() {')
    out.append('  %c0 = arith.constant 0 : index')
    out.append('  %%ape = memref.get_global @ape : memref<%dx%dxf32>' % (K, D))
    for name in ['iro', 'pro']:
        out.append('  %%%s0 = memref.get_global @%s : memref<2xi32>' % (name, name))
        out.append('  %%%s = memref.cast %%%s0 : memref<2xi32> to memref<?xi32>'
                   % (name, name))
    out.append('  %cache0 = memref.get_global @zero : memref<1xi32>')
    out.append('  %cache = memref.cast %cache0 : memref<1xi32> to memref<?xi32>')
    for t in TYPES:
        s = {'t': t, 'N': N, 'D': D, 'P': POOLS}
        out.append('''  %%k_%(t)s0 = memref.get_global @k_%(t)s : memref<%(N)dx%(D)dx%(t)s>
  %%k_%(t)s = memref.cast %%k_%(t)s0 : memref<%(N)dx%(D)dx%(t)s> to memref<?x%(D)dx%(t)s>
  %%g_%(t)s0 = memref.get_global @g_%(t)s : memref<%(N)dx%(D)dx%(t)s>
  %%g_%(t)s = memref.cast %%g_%(t)s0 : memref<%(N)dx%(D)dx%(t)s> to memref<?x%(D)dx%(t)s>
  %%o_%(t)s0 = memref.alloc() {alignment = 64 : i64} : memref<%(P)dx%(D)dx%(t)s>
  %%o_%(t)s = memref.cast %%o_%(t)s0 : memref<%(P)dx%(D)dx%(t)s> to memref<?x%(D)dx%(t)s>
  func.call @pools_%(t)s(%%k_%(t)s, %%g_%(t)s, %%ape, %%iro, %%pro, %%cache, %%o_%(t)s)
      : (memref<?x%(D)dx%(t)s>, memref<?x%(D)dx%(t)s>, memref<4x%(D)dxf32>, memref<?xi32>,
         memref<?xi32>, memref<?xi32>, memref<?x%(D)dx%(t)s>) -> ()
  %%f_%(t)s = memref.alloc() : memref<%(P)dx%(D)dxf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%%o_%(t)s0 : memref<%(P)dx%(D)dx%(t)s>) outs(%%f_%(t)s : memref<%(P)dx%(D)dxf32>) {
  ^bb0(%%x: %(t)s, %%y: f32):
    %%e = arith.extf %%x : %(t)s to f32
    linalg.yield %%e : f32
  }
  %%u_%(t)s = memref.cast %%f_%(t)s : memref<%(P)dx%(D)dxf32> to memref<*xf32>
  func.call @printMemrefF32(%%u_%(t)s) : (memref<*xf32>) -> ()''' % s)
    out.append('  return')
    out.append('}')
    print('\n'.join(out))


def ulp(x, mant):
    """The unit in the last place of |x| in a format with `mant` bits."""
    if x == 0:
        return 0.0
    return 2.0 ** (math.frexp(abs(x))[1] - 1 - mant)


def check(path):
    text = open(path).read()
    blocks = text.split('Unranked Memref')[1:]
    if len(blocks) != len(TYPES):
        sys.exit('fast-math-accuracy.py: expected %d printed memrefs, got %d'
                 % (len(TYPES), len(blocks)))
    k, g, ape = inputs(12)
    failed = False
    for (t, mant), block in zip(TYPES.items(), blocks):
        data = block[block.find('data ='):]
        values = [float(v) for v in re.findall(
            r'[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan)', data.split('=', 1)[1])]
        if len(values) != POOLS * D:
            sys.exit('fast-math-accuracy.py: %s: %d values, expected %d'
                     % (t, len(values), POOLS * D))
        kt, gt = typed(k, mant), typed(g, mant)
        worst = 0.0
        for p in range(POOLS):
            for d in range(D):
                z = [gt[p * K + m][d] + ape[m][d] for m in range(K)]
                mz = max(z)
                e = [math.exp(v - mz) for v in z]
                zs = sum(e)
                exact = sum(e[m] * kt[p * K + m][d] for m in range(K)) / zs
                mag = sum(e[m] * abs(kt[p * K + m][d]) for m in range(K)) / zs
                # printMemrefF32 prints 6 digits: snap back to T.
                got = round_bits(values[p * D + d], mant)
                unit = ulp(mag, mant)
                margin = 6 * ulp(mag, 23)
                err = abs(got - exact)
                if unit == 0:
                    bad = err > 1e-30
                else:
                    worst = max(worst, err / unit)
                    bad = err > unit - margin
                if bad:
                    print('%s: pool %d channel %d: %r, exact %r, S %r: '
                          'error %.3g ulp of S' % (t, p, d, got, exact, mag,
                                                   err / unit if unit else err))
                    failed = True
        print('%s: %d values, largest error %.3f ulp of S (tolerance 1)'
              % (t, POOLS * D, worst))
    if failed:
        sys.exit(1)
    print('fast-math accuracy: ok')


if __name__ == '__main__':
    if len(sys.argv) == 2 and sys.argv[1] == 'gen':
        gen()
    elif len(sys.argv) == 3 and sys.argv[1] == 'check':
        check(sys.argv[2])
    else:
        sys.exit(__doc__)
