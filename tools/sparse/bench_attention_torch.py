"""Dense causal attention on PyTorch CPU, the peer of attnlab's dense attention in
packages/sparse-attention/bench/methods.bench.ts: softmax(q k^T / sqrt(d) + causal mask) v over
[heads, T, d] float32 (one head at a time, so the T x T scores of 16K positions fit), and
torch.nn.functional.scaled_dot_product_attention(is_causal=True) on the same tensors.

Run by the bench with /usr/bin/python3 (Debian's python3-torch) and OPENBLAS_CORETYPE set (Debian's
OpenBLAS may pick generic kernels otherwise). Prints one JSON line per T:
{"T": ..., "explicit": seconds, "sdpa": seconds} (best of --repeats, after one warm-up).
"""

import argparse
import json
import math
import time

import torch


def explicit(q, k, v):
    """softmax(q k^T / sqrt(d)) v with the causal mask, head by head."""
    heads, length, d = q.shape
    mask = torch.ones(length, length, dtype=torch.bool).triu(1)
    out = torch.empty(heads, length, v.shape[2])
    for h in range(heads):
        scores = (q[h] @ k[h].transpose(0, 1)) / math.sqrt(d)
        scores.masked_fill_(mask, float("-inf"))
        out[h] = torch.softmax(scores, dim=-1) @ v[h]
    return out


def sdpa(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def best(fn, q, k, v, repeats):
    fn(q, k, v)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(q, k, v)
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="1024,2048,4096,8192,16384")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    with torch.no_grad():
        for length in [int(x) for x in args.lengths.split(",")]:
            q, k, v = (torch.randn(args.heads, length, args.d) for _ in range(3))
            repeats = args.repeats if length <= 4096 else 1
            row = {
                "T": length,
                "explicit": best(explicit, q, k, v, repeats),
                "sdpa": best(sdpa, q, k, v, repeats),
            }
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
