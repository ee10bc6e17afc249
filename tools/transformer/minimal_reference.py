#!/usr/bin/env python3
"""Diagnostic: train Yuksel et al.'s minimal model in PyTorch on a sparse-markov teacher exported
by attnlab (JSON: matrices A_i row-major d x d, weights c_i, span starts/lengths, tau), with the
same settings as packages/transformer/bench/minimal-acceptance.ts (online batches, AdamW lr 0.08,
wd 0.01, clip 1.0, W_Q ~ U(-eps, eps), W_V = 0). Prints validation loss and per-head span masses.

  /usr/bin/python3 tools/transformer/minimal_reference.py TEACHER.json [--eps 1e-3] [--batch 1024] [--steps 1500]
"""
import argparse
import json

import numpy as np
import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument('teacher')
parser.add_argument('--eps', type=float, default=1e-3)
parser.add_argument('--batch', type=int, default=1024)
parser.add_argument('--steps', type=int, default=1500)
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--threads', type=int, default=1)
args = parser.parse_args()
torch.set_num_threads(args.threads)
T = json.load(open(args.teacher))
d, tau, gen = T['d'], T['tau'], T['genLen']
A = [np.array(m).reshape(d, d) for m in T['matrices']]
C = sum(T['spans'])
rng = np.random.default_rng(args.seed)


def sample(n):
    seq = np.zeros((n, C + gen), dtype=np.int64)
    seq[:, :C] = rng.integers(0, d, size=(n, C))
    for p in range(C, C + gen):
        z = np.zeros((n, d))
        for i, (start, length) in enumerate(zip(T['starts'], T['spans'])):
            counts = np.zeros((n, d))
            for q in range(length):
                counts[np.arange(n), seq[:, p - C + start + q]] += T['positionWeights'][q] if q < len(T['positionWeights']) else 1
            z += T['weights'][i] * counts @ A[i].T
        logits = z / tau
        logits -= logits.max(1, keepdims=True)
        prob = np.exp(logits)
        prob /= prob.sum(1, keepdims=True)
        u = rng.random((n, 1))
        seq[:, p] = (prob.cumsum(1) < u).sum(1).clip(max=d - 1)
    return torch.tensor(seq)


heads, L = 3, C + gen - 1
D = d + L
torch.manual_seed(args.seed)
W_Q = torch.nn.Parameter(torch.empty(heads, D, D).uniform_(-args.eps, args.eps))
W_V = torch.nn.Parameter(torch.zeros(heads, D, D))
opt = torch.optim.AdamW([W_Q, W_V], lr=0.08, weight_decay=0.01)
mask = torch.triu(torch.full((L, L), float('-inf')), diagonal=1)
pos = torch.arange(L)


def forward(tokens):
    q = W_Q[:, tokens] + W_Q[:, d + pos].unsqueeze(1)  # [h, b, t, D]
    idx = tokens.unsqueeze(0).unsqueeze(2).expand(heads, tokens.shape[0], L, L)
    p = torch.softmax(torch.gather(q, 3, idx) + q[..., d:d + L] + mask, -1)
    v = W_V[:, tokens, :d] + W_V[:, d + pos, :d].unsqueeze(1)
    return (p @ v).sum(0), p


def loss_of(seq):
    logits, p = forward(seq[:, :-1])
    return F.cross_entropy(logits[:, C - 1:].reshape(-1, d), seq[:, C:].reshape(-1)), p


val = sample(2000)
for step in range(1, args.steps + 1):
    loss, _ = loss_of(sample(args.batch))
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_([W_Q, W_V], 1.0)
    opt.step()
    if step % 100 == 0:
        with torch.no_grad():
            vloss, p = loss_of(val)
            rows = p[:, :, C - 1:, :]  # scored queries
            masses = []
            for h in range(heads):
                spans = []
                for start, length in zip(T['starts'], T['spans']):
                    offsets = [C - 1 - (start + q) for q in range(length)]  # offset from the query
                    m = 0.0
                    for o in offsets:
                        i = torch.arange(C - 1, L)
                        m += p[h][:, i, i - o].mean().item()
                    spans.append(m)
                masses.append('/'.join(f'{x:.2f}' for x in reversed(spans)))
        print(f'step {step} train {loss.item():.3f} val {vloss.item():.3f} mass(newest/middle/oldest) {"  ".join(masses)}', flush=True)
