#!/usr/bin/env python3
"""Golden logits for @attnlab/transformer, from an independent PyTorch implementation.

Run by hand with Debian's PyTorch:  /usr/bin/python3 tools/transformer/golden.py
Writes packages/transformer/src/__fixtures__/golden.json: for each case the configuration (attnlab
field names), the weights in attnlab/TransformerLens layout and names, a batch of tokens, and the
logits this script computes. The TypeScript test loads the weights with setWeights and compares.

The reference is written from the architectures' definitions, not from the TypeScript code:
- gpt: GPT-2 pre-LN decoder (learned positions, LayerNorm with bias, tanh-GELU MLP, tied unembedding).
- llama: Llama 2 (RMSNorm, rotary embeddings in the rotate-half layout of Hugging Face's
  LlamaRotaryEmbedding, SwiGLU, grouped-query attention by repeating key/value heads, no biases,
  untied classifier).
- minimal: Yuksel et al.'s minimal model computed densely: x = [onehot(token); onehot(position)],
  per head softmax((x W_Q^h) x^T + causal mask) (x W_V^h), heads summed, logits = first d coords.
"""
import json
import math
import os

import numpy as np
import torch

torch.set_default_dtype(torch.float64)  # reference in float64; the TS model runs in float32
OUT = os.path.join(os.path.dirname(__file__), '..', '..', 'packages', 'transformer', 'src', '__fixtures__', 'golden.json')


def causal_mask(t):
    return torch.triu(torch.full((t, t), float('-inf')), diagonal=1)


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rope(x, theta):
    # x: [batch, heads, pos, d_head]
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2) / d))
    t = torch.arange(x.shape[2])
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def attention(q, k, v, scale):
    # q: [b, h, t, d]; k, v: [b, h, t, d] (already repeated for GQA)
    scores = torch.einsum('bhid,bhjd->bhij', q, k) * scale + causal_mask(q.shape[2])
    return torch.einsum('bhij,bhjd->bhid', torch.softmax(scores, dim=-1), v)


def gpt_forward(cfg, W, tokens):
    b, t = tokens.shape
    x = W['embed.W_E'][tokens] + W['pos_embed.W_pos'][:t]
    for l in range(cfg['nLayers']):
        p = f'blocks.{l}.'
        h = layer_norm(x, W[p + 'ln1.w'], W[p + 'ln1.b'], cfg['normEps'])
        q = torch.einsum('bpm,hmd->bhpd', h, W[p + 'attn.W_Q']) + W[p + 'attn.b_Q'][None, :, None, :]
        k = torch.einsum('bpm,hmd->bhpd', h, W[p + 'attn.W_K']) + W[p + 'attn.b_K'][None, :, None, :]
        v = torch.einsum('bpm,hmd->bhpd', h, W[p + 'attn.W_V']) + W[p + 'attn.b_V'][None, :, None, :]
        z = attention(q, k, v, 1.0 / math.sqrt(cfg['dHead']))
        x = x + torch.einsum('bhpd,hdm->bpm', z, W[p + 'attn.W_O']) + W[p + 'attn.b_O']
        h = layer_norm(x, W[p + 'ln2.w'], W[p + 'ln2.b'], cfg['normEps'])
        x = x + gelu_new(h @ W[p + 'mlp.W_in'] + W[p + 'mlp.b_in']) @ W[p + 'mlp.W_out'] + W[p + 'mlp.b_out']
    x = layer_norm(x, W['ln_final.w'], W['ln_final.b'], cfg['normEps'])
    return x @ W['embed.W_E'].T


def llama_forward(cfg, W, tokens):
    b, t = tokens.shape
    group = cfg['nHeads'] // cfg['nKvHeads']
    x = W['embed.W_E'][tokens]
    for l in range(cfg['nLayers']):
        p = f'blocks.{l}.'
        h = rms_norm(x, W[p + 'ln1.w'], cfg['normEps'])
        q = rope(torch.einsum('bpm,hmd->bhpd', h, W[p + 'attn.W_Q']), cfg['ropeTheta'])
        k = rope(torch.einsum('bpm,hmd->bhpd', h, W[p + 'attn.W_K']), cfg['ropeTheta'])
        v = torch.einsum('bpm,hmd->bhpd', h, W[p + 'attn.W_V'])
        k = k.repeat_interleave(group, dim=1)  # query head h uses kv head h // group
        v = v.repeat_interleave(group, dim=1)
        z = attention(q, k, v, 1.0 / math.sqrt(cfg['dHead']))
        x = x + torch.einsum('bhpd,hdm->bpm', z, W[p + 'attn.W_O'])
        h = rms_norm(x, W[p + 'ln2.w'], cfg['normEps'])
        gate = h @ W[p + 'mlp.W_gate']
        x = x + (torch.nn.functional.silu(gate) * (h @ W[p + 'mlp.W_in'])) @ W[p + 'mlp.W_out']
    x = rms_norm(x, W['ln_final.w'], cfg['normEps'])
    return x @ W['unembed.W_U']


def minimal_forward(cfg, W, tokens):
    d, n_ctx = cfg['dVocab'], cfg['nCtx']
    b, t = tokens.shape
    x = torch.zeros(b, t, d + n_ctx)
    for i in range(b):
        for j in range(t):
            x[i, j, tokens[i, j]] = 1.0
            x[i, j, d + j] = 1.0
    out = torch.zeros(b, t, d + n_ctx)
    for h in range(cfg['nHeads']):
        q = x @ W['blocks.0.attn.W_Q'][h]
        v = x @ W['blocks.0.attn.W_V'][h]
        scores = q @ x.transpose(1, 2) + causal_mask(t)  # key = input, no 1/sqrt(d)
        out = out + torch.softmax(scores, dim=-1) @ v
    return out[..., :d]


def weights_for(shapes, rng, scale=0.3):
    W = {}
    for name, shape in shapes.items():
        if name.endswith('.w'):
            W[name] = 1.0 + 0.1 * rng.standard_normal(shape)
        elif '.b' in name.split('.')[-1] or name.endswith('.b'):
            W[name] = 0.1 * rng.standard_normal(shape)
        else:
            W[name] = scale * rng.standard_normal(shape)
    return W


def gpt_case(rng):
    cfg = dict(architecture='gpt', dVocab=11, nCtx=8, dModel=12, nLayers=2, nHeads=3, nKvHeads=3, dHead=4, dMlp=20,
               attnOnly=False, normalization='layernorm', normEps=1e-5, positional='learned', actFn='gelu_new',
               gatedMlp=False, bias=True, tiedEmbeddings=True)
    m, h, d, f, v = cfg['dModel'], cfg['nHeads'], cfg['dHead'], cfg['dMlp'], cfg['dVocab']
    shapes = {'embed.W_E': (v, m), 'pos_embed.W_pos': (cfg['nCtx'], m), 'ln_final.w': (m,), 'ln_final.b': (m,)}
    for l in range(cfg['nLayers']):
        p = f'blocks.{l}.'
        shapes.update({p + 'ln1.w': (m,), p + 'ln1.b': (m,), p + 'attn.W_Q': (h, m, d), p + 'attn.W_K': (h, m, d),
                       p + 'attn.W_V': (h, m, d), p + 'attn.W_O': (h, d, m), p + 'attn.b_Q': (h, d), p + 'attn.b_K': (h, d),
                       p + 'attn.b_V': (h, d), p + 'attn.b_O': (m,), p + 'ln2.w': (m,), p + 'ln2.b': (m,),
                       p + 'mlp.W_in': (m, f), p + 'mlp.b_in': (f,), p + 'mlp.W_out': (f, m), p + 'mlp.b_out': (m,)})
    tokens = rng.integers(0, v, size=(2, 7))
    return cfg, weights_for(shapes, rng), tokens, gpt_forward


def llama_case(rng):
    cfg = dict(architecture='llama', dVocab=13, nCtx=16, dModel=12, nLayers=2, nHeads=4, nKvHeads=2, dHead=6, dMlp=18,
               attnOnly=False, normalization='rmsnorm', normEps=1e-5, positional='rotary', ropeTheta=100.0, actFn='silu',
               gatedMlp=True, bias=False, tiedEmbeddings=False)
    m, h, kv, d, f, v = cfg['dModel'], cfg['nHeads'], cfg['nKvHeads'], cfg['dHead'], cfg['dMlp'], cfg['dVocab']
    shapes = {'embed.W_E': (v, m), 'ln_final.w': (m,), 'unembed.W_U': (m, v)}
    for l in range(cfg['nLayers']):
        p = f'blocks.{l}.'
        shapes.update({p + 'ln1.w': (m,), p + 'attn.W_Q': (h, m, d), p + 'attn.W_K': (kv, m, d), p + 'attn.W_V': (kv, m, d),
                       p + 'attn.W_O': (h, d, m), p + 'ln2.w': (m,), p + 'mlp.W_in': (m, f), p + 'mlp.W_gate': (m, f),
                       p + 'mlp.W_out': (f, m)})
    tokens = rng.integers(0, v, size=(2, 11))
    return cfg, weights_for(shapes, rng), tokens, llama_forward


def minimal_case(rng):
    cfg = dict(architecture='minimal', dVocab=6, nCtx=5, nHeads=3, queryInit=0)
    dm = cfg['dVocab'] + cfg['nCtx']
    shapes = {'blocks.0.attn.W_Q': (3, dm, dm), 'blocks.0.attn.W_V': (3, dm, dm)}
    tokens = rng.integers(0, cfg['dVocab'], size=(3, 5))
    return cfg, weights_for(shapes, rng, scale=1.0), tokens, minimal_forward


def main():
    rng = np.random.default_rng(20261129)
    cases = []
    for name, build in [('gpt', gpt_case), ('llama', llama_case), ('minimal', minimal_case)]:
        cfg, W, tokens, forward = build(rng)
        Wt = {k: torch.tensor(v) for k, v in W.items()}
        logits = forward(cfg, Wt, torch.tensor(tokens))
        cases.append({
            'name': name,
            'config': cfg,
            'weights': {k: {'shape': list(v.shape), 'data': [float(x) for x in v.reshape(-1)]} for k, v in W.items()},
            'tokens': tokens.tolist(),
            'logits': {'shape': list(logits.shape), 'data': [float(x) for x in logits.reshape(-1)]},
        })
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, 'w') as f:
        json.dump({'generator': 'tools/transformer/golden.py', 'torch': torch.__version__, 'cases': cases}, f)
    print('wrote', os.path.abspath(OUT))


if __name__ == '__main__':
    main()
