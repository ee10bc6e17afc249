"""PyTorch CPU peer of packages/transformer/bench/attention-kernels.ts: causal softmax attention
softmax(q k^T / sqrt(d) + mask) v forward and backward (autograd) on [B, H, T, d] float32, timed
as the best of --repeats runs. Prints one JSON line. Run with /usr/bin/python3 (Debian's
python3-torch) and OPENBLAS_CORETYPE=SKYLAKEX on CPUs its OpenBLAS does not recognise."""
import argparse
import json
import math
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--pos", type=int, default=127)
parser.add_argument("--heads", type=int, default=8)
parser.add_argument("--d", type=int, default=8)
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--repeats", type=int, default=5)
args = parser.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(0)
B, T, H, d = args.batch, args.pos, args.heads, args.d
q, k, v = (torch.randn(B, H, T, d, requires_grad=True) for _ in range(3))
g = torch.randn(B, H, T, d)
mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
scale = 1 / math.sqrt(d)


def forward():
    s = (q @ k.transpose(-1, -2)) * scale
    return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v


best_f = best_b = math.inf
for _ in range(args.repeats):
    start = time.perf_counter()
    out = forward()
    mid = time.perf_counter()
    out.backward(g)
    end = time.perf_counter()
    best_f = min(best_f, mid - start)
    best_b = min(best_b, end - mid)
    for t in (q, k, v):
        t.grad = None
print(json.dumps({"torch": torch.__version__, "forward": best_f, "backward": best_b}))
