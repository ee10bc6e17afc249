#!/usr/bin/python3
"""numpy reference sampler of the sparse high-order Markov chain, for the @attnlab/markov benchmark.

Same process as packages/markov (Yuksel et al., arXiv 2602.19143): d tokens, K spans (oldest
first), teacher matrices A_i (Haar orthogonal via QR with sign correction), weights c_i = m^i,
P(next | window) = softmax(sum_i c_i A_i a_i / tau). Sequences: C uniform burn-in tokens, then
genLen teacher samples.

The implementation is vectorised over the batch, as one would write it in numpy: per window
position and token the exponentiated, max-shifted logit column is precomputed (softmax is
invariant to per-column shifts), so a generation step is C gathers of [batch, d], their product,
a cumulative sum and an inverse-CDF draw; a variant tabulates the products for pairs of positions
(the same trick as the TypeScript sampler: C/2 gathers), and a straightforward logits-then-softmax
version is also timed. The best of the three is reported as tokensPerSecond.

Usage: sample_bench.py [--vocab 50] [--spans 2,2,2] [--sequences 20000] [--seconds 3] [--json]
Prints generated tokens per second (the burn-in tokens are not counted).
"""
import argparse
import json
import sys
import time

import numpy as np


def random_orthogonal(d, rng):
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))[None, :]


def build_tables(d, spans, m, tau, rng):
    K = len(spans)
    C = sum(spans)
    logits = np.zeros((C, d, d))  # [window position, token, y]
    pos = 0
    for i, span in enumerate(spans):
        a = random_orthogonal(d, rng)
        c = m ** i
        for _ in range(span):
            logits[pos] += (c / tau) * a.T  # row `token` = column `token` of A_i
            pos += 1
    logits -= logits.max(axis=2, keepdims=True)
    return logits, np.exp(logits)


def sample_product(exp_table, d, C, gen_len, batch, rng):
    tokens = np.empty((batch, C + gen_len), dtype=np.int32)
    tokens[:, :C] = rng.integers(0, d, size=(batch, C))
    for t in range(gen_len):
        acc = exp_table[0, tokens[:, t]]
        for pos in range(1, C):
            acc = acc * exp_table[pos, tokens[:, t + pos]]
        cdf = np.cumsum(acc, axis=1)
        target = rng.random(batch) * cdf[:, -1]
        nxt = (cdf < target[:, None]).sum(axis=1)
        tokens[:, C + t] = np.minimum(nxt, d - 1)
    return tokens


def pair_tables(exp_table):
    """Products of the exp columns of consecutive window positions, for every token pair: [C/2, d*d, d]."""
    C, d, _ = exp_table.shape
    return np.stack([(exp_table[p][:, None, :] * exp_table[p + 1][None, :, :]).reshape(d * d, d) for p in range(0, C - 1, 2)])


def sample_pairs(pairs, exp_table, d, C, gen_len, batch, rng):
    tokens = np.empty((batch, C + gen_len), dtype=np.int64)
    tokens[:, :C] = rng.integers(0, d, size=(batch, C))
    for t in range(gen_len):
        acc = pairs[0, tokens[:, t] * d + tokens[:, t + 1]]
        for k in range(1, len(pairs)):
            acc = acc * pairs[k, tokens[:, t + 2 * k] * d + tokens[:, t + 2 * k + 1]]
        if C % 2 == 1:
            acc = acc * exp_table[C - 1, tokens[:, t + C - 1]]
        cdf = np.cumsum(acc, axis=1)
        target = rng.random(batch) * cdf[:, -1]
        tokens[:, C + t] = np.minimum((cdf < target[:, None]).sum(axis=1), d - 1)
    return tokens


def sample_softmax(log_table, d, C, gen_len, batch, rng):
    tokens = np.empty((batch, C + gen_len), dtype=np.int32)
    tokens[:, :C] = rng.integers(0, d, size=(batch, C))
    for t in range(gen_len):
        z = log_table[0, tokens[:, t]].copy()
        for pos in range(1, C):
            z += log_table[pos, tokens[:, t + pos]]
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        cdf = np.cumsum(p, axis=1)
        target = rng.random(batch) * cdf[:, -1]
        tokens[:, C + t] = np.minimum((cdf < target[:, None]).sum(axis=1), d - 1)
    return tokens


def rate(fn, seconds, gen_len, batch):
    fn()  # warm-up
    done = 0
    start = time.perf_counter()
    while True:
        fn()
        done += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done * batch * gen_len / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--vocab', type=int, default=50)
    parser.add_argument('--spans', default='2,2,2')
    parser.add_argument('--m', type=float, default=1.7)
    parser.add_argument('--tau', type=float, default=0.1)
    parser.add_argument('--gen-len', type=int, default=20)
    parser.add_argument('--sequences', type=int, default=4096, help='sequences per batch')
    parser.add_argument('--seconds', type=float, default=3.0)
    parser.add_argument('--json', action='store_true')
    args = parser.parse_args()
    spans = [int(s) for s in args.spans.split(',')]
    d, C = args.vocab, sum(spans)
    rng = np.random.default_rng(0)
    log_table, exp_table = build_tables(d, spans, args.m, args.tau, rng)
    product = rate(lambda: sample_product(exp_table, d, C, args.gen_len, args.sequences, rng), args.seconds, args.gen_len, args.sequences)
    pairs = pair_tables(exp_table) if C >= 2 else None
    paired = rate(lambda: sample_pairs(pairs, exp_table, d, C, args.gen_len, args.sequences, rng), args.seconds, args.gen_len, args.sequences) if pairs is not None else 0.0
    softmax = rate(lambda: sample_softmax(log_table, d, C, args.gen_len, args.sequences, rng), args.seconds, args.gen_len, args.sequences)
    result = {
        'numpy': np.__version__,
        'python': sys.version.split()[0],
        'tokensPerSecond': max(product, paired, softmax),
        'productTokensPerSecond': product,
        'pairTableTokensPerSecond': paired,
        'softmaxTokensPerSecond': softmax,
        'batch': args.sequences,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"numpy {result['numpy']}: {product:,.0f} tokens/s (product of exp columns), {paired:,.0f} (pair tables), {softmax:,.0f} (logits + softmax)")


if __name__ == '__main__':
    main()
