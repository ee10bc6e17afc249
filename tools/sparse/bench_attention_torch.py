"""Dense causal attention on PyTorch CPU, the peer of attnlab's dense attention in
packages/sparse-attention/bench/methods.bench.ts: softmax(q k^T / sqrt(d) + causal mask) v over
[heads, T, d] float32 (one head at a time, so the T x T scores of 16K positions fit), and
torch.nn.functional.scaled_dot_product_attention(is_causal=True) on the same tensors.

Run by the bench with /usr/bin/python3 (Debian's python3-torch) and OPENBLAS_CORETYPE set (Debian's
OpenBLAS may pick generic kernels otherwise). Prints one JSON line per T:
{"T": ..., "explicit": seconds, "sdpa": seconds or null, "torch": version} (best of --repeats after one
warm-up; one run without warm-up above 4096 positions).
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


def best(fn, q, k, v, repeats, warm_up):
    if warm_up:
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
            # long T: one run, no warm-up (the shorter T warmed the code; 16K takes minutes)
            short = length <= 4096
            repeats = args.repeats if short else 1
            row = {"T": length, "explicit": best(explicit, q, k, v, repeats, short), "torch": torch.__version__}
            # scaled_dot_product_attention exists from PyTorch 2.0 (Debian 12 ships 1.13)
            has_sdpa = hasattr(torch.nn.functional, "scaled_dot_product_attention")
            row["sdpa"] = best(sdpa, q, k, v, repeats, short) if has_sdpa else None
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
