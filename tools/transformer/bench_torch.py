#!/usr/bin/env python3
"""PyTorch peer for packages/transformer/bench/train-throughput.ts.

Trains the same models with the same optimizer as attnlab and prints training tokens/s as JSON:
- `minimal`: Yuksel et al.'s minimal model (d = 50, spans [2,2,2]: 25 input positions, 3 heads,
  dModel 75), in two forms: `dense` (one-hot inputs, x W_Q (x)^T, as the paper's code) and `gather`
  (x W = W[token] + W[d + position], scores as lookups, as minimal-model-compute.md describes).
- `gpt`: 2 layers, 4 heads, dModel 64, dMlp 256, T 64, vocab 64, pre-LN, learned positions, tanh GELU,
  tied unembedding.
Optimizer: AdamW (lr as given, weight decay 0.01 on parameters of rank >= 2, as attnlab's
default), global grad-norm clip 1.0, masked mean cross-entropy.

Run with Debian's PyTorch and OpenBLAS (python3-torch + libopenblas0-openmp):
  /usr/bin/python3 tools/transformer/bench_torch.py --model minimal --threads 1 --steps 20
On CPUs Debian's OpenBLAS 0.3.21 does not recognise (it then picks its SSE3 'Prescott' kernels,
visible with OPENBLAS_VERBOSE=2), set OPENBLAS_CORETYPE (e.g. SKYLAKEX on AVX-512 machines); the
attnlab benchmark does this itself and says so.
Output: one JSON line; peakRssMiB is the process's peak resident memory.
"""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn.functional as F


class Minimal(torch.nn.Module):
    def __init__(self, d=50, n_ctx=25, heads=3, form='dense'):
        super().__init__()
        self.d, self.n_ctx, self.heads, self.form = d, n_ctx, heads, form
        D = d + n_ctx
        self.W_Q = torch.nn.Parameter(torch.empty(heads, D, D).uniform_(-1e-5, 1e-5))
        self.W_V = torch.nn.Parameter(torch.zeros(heads, D, D))

    def forward(self, tokens):
        b, t = tokens.shape
        d, D = self.d, self.d + self.n_ctx
        mask = torch.triu(torch.full((t, t), float('-inf')), diagonal=1)
        if self.form == 'dense':
            x = torch.cat([F.one_hot(tokens, d).float(), F.one_hot(torch.arange(t), self.n_ctx).float().expand(b, t, self.n_ctx)], -1)
            q = torch.einsum('btm,hmn->bhtn', x, self.W_Q)
            scores = q @ x.transpose(1, 2).unsqueeze(1) + mask
            v = torch.einsum('btm,hmn->bhtn', x, self.W_V[:, :, :d])
            return (torch.softmax(scores, -1) @ v).sum(1)
        # gather form: q = W_Q[token] + W_Q[d + pos]; scores = q[token_j] + q[d + j]
        pos = torch.arange(t)
        q = self.W_Q[:, tokens] + self.W_Q[:, d + pos].unsqueeze(1)  # [h, b, t, D]
        idx = tokens.unsqueeze(0).unsqueeze(2).expand(self.heads, b, t, t)
        scores = torch.gather(q, 3, idx) + q[..., d:d + t] + mask  # [h, b, i, j]
        p = torch.softmax(scores, -1)
        v = self.W_V[:, tokens, :d] + self.W_V[:, d + pos, :d].unsqueeze(1)  # [h, b, t, d]
        return (p @ v).sum(0)


class Gpt(torch.nn.Module):
    def __init__(self, vocab=64, n_ctx=64, d_model=64, layers=2, heads=4, d_mlp=256):
        super().__init__()
        self.heads = heads
        self.W_E = torch.nn.Parameter(torch.randn(vocab, d_model) * 0.02)
        self.W_pos = torch.nn.Parameter(torch.randn(n_ctx, d_model) * 0.02)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            block = torch.nn.Module()
            block.ln1 = torch.nn.LayerNorm(d_model)
            block.qkv = torch.nn.Linear(d_model, 3 * d_model)
            block.out = torch.nn.Linear(d_model, d_model)
            block.ln2 = torch.nn.LayerNorm(d_model)
            block.fc = torch.nn.Linear(d_model, d_mlp)
            block.proj = torch.nn.Linear(d_mlp, d_model)
            self.blocks.append(block)
        self.ln_f = torch.nn.LayerNorm(d_model)

    def forward(self, tokens):
        b, t = tokens.shape
        x = self.W_E[tokens] + self.W_pos[:t]
        mask = torch.triu(torch.full((t, t), float('-inf')), diagonal=1)
        for blk in self.blocks:
            h = blk.ln1(x)
            q, k, v = blk.qkv(h).split(x.shape[-1], -1)
            q, k, v = [z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v)]
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask, -1)
            x = x + blk.out((att @ v).transpose(1, 2).reshape(b, t, -1))
            x = x + blk.proj(F.gelu(blk.fc(blk.ln2(x)), approximate='tanh'))
        return self.ln_f(x) @ self.W_E.T


def run(model, tokens, targets, weights, steps, warmup, lr):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.01}, {'params': no_decay, 'weight_decay': 0.0}], lr=lr)
    times = []
    for step in range(warmup + steps):
        start = time.perf_counter()
        logits = model(tokens)
        loss = (F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction='none') * weights.reshape(-1)).sum() / weights.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        float(loss)
        if step >= warmup:
            times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2], float(loss)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--model', choices=['minimal', 'gpt'], required=True)
    parser.add_argument('--form', choices=['dense', 'gather'], default='dense')
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--batch', type=int, default=None)
    parser.add_argument('--steps', type=int, default=20)
    parser.add_argument('--warmup', type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.model == 'minimal':
        batch, t, vocab, lr = args.batch or 1024, 25, 50, 0.08
        model = Minimal(form=args.form)
    else:
        batch, t, vocab, lr = args.batch or 64, 64, 64, 1e-3
        model = Gpt()
    g = torch.Generator().manual_seed(1)
    seq = torch.randint(0, vocab, (batch, t + 1), generator=g)
    tokens, targets = seq[:, :-1], seq[:, 1:]
    weights = torch.ones(batch, t)
    if args.model == 'minimal':
        weights[:, :5] = 0  # the first C - 1 predictions are burn-in, as in sparse-markov
    median, loss = run(model, tokens, targets, weights, args.steps, args.warmup, lr)
    print(json.dumps({'implementation': f'pytorch {torch.__version__}', 'model': args.model, 'form': args.form if args.model == 'minimal' else None,
                      'threads': args.threads, 'batch': batch, 'positions': t, 'stepSeconds': median, 'tokensPerSecond': batch * t / median, 'loss': loss,
                      'peakRssMiB': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == '__main__':
    main()
