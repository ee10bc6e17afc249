#!/usr/bin/python3
"""Independent numpy reference for greedy generation on real llama checkpoints.

Builds the Llama forward pass from the weights alone (nothing is shared with the TypeScript code):
RMSNorm, RoPE (llama2.c: interleaved pairs (2i, 2i+1); Hugging Face: rotate-half pairs
(i, i + dHead/2)), grouped-query attention (query head h reads kv head h // (nHeads / nKvHeads)),
SwiGLU MLP, tied or separate classifier; computed in float64, the whole sequence recomputed at
every step (no KV cache), argmax at each step (ties: the lowest id).

Reads llama2.c version-0 `.bin` files (header of 7 int32, then float32 arrays) and Hugging Face
directories (`config.json` + `model.safetensors`, F32, with `lm_head.weight` standing in for a
missing `model.embed_tokens.weight`), with plain struct + json + numpy.

Run by hand (Debian python3-numpy):

  /usr/bin/python3 tools/import/greedy_reference.py MODEL PROMPT_IDS NEW_TOKENS
      Prints {"prompt": [...], "ids": [...]} for one prompt (comma-separated ids).

  /usr/bin/python3 tools/import/greedy_reference.py fixture
      Writes packages/transformer/src/__fixtures__/import/greedy-reference.json: greedy ids for
      the stories260K and tinystories656K models (kept outside the repository), the prompts below.
"""
import json
import os
import struct
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SHARED = os.path.join(ROOT, '..', 'shared', 'models')
FIXTURE = os.path.join(ROOT, 'packages', 'transformer', 'src', '__fixtures__', 'import', 'greedy-reference.json')


def read_llama2c(path):
    with open(path, 'rb') as f:
        data = f.read()
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack('<7i', data[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    values = np.frombuffer(data, dtype='<f4', offset=28).astype(np.float64)
    head = dim // n_heads
    offset = 0

    def take(*shape):
        nonlocal offset
        n = int(np.prod(shape))
        out = values[offset:offset + n].reshape(shape)
        offset += n
        return out

    emb = take(vocab, dim)
    w = {
        'rms_att': take(n_layers, dim),
        'wq': take(n_layers, dim, dim),
        'wk': take(n_layers, n_kv * head, dim),
        'wv': take(n_layers, n_kv * head, dim),
        'wo': take(n_layers, dim, dim),
        'rms_ffn': take(n_layers, dim),
        'w1': take(n_layers, hidden, dim),
        'w2': take(n_layers, dim, hidden),
        'w3': take(n_layers, hidden, dim),
        'rms_final': take(dim),
    }
    take(seq_len, head // 2)  # freq_cis_real (unused)
    take(seq_len, head // 2)  # freq_cis_imag (unused)
    w['emb'] = emb
    w['cls'] = emb if shared else take(vocab, dim)
    config = dict(dim=dim, n_layers=n_layers, n_heads=n_heads, n_kv=n_kv, eps=1e-5, theta=10000.0,
                  rope='interleaved', seq_len=seq_len)
    return config, w


def read_safetensors(path):
    with open(path, 'rb') as f:
        data = f.read()
    (n,) = struct.unpack('<Q', data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, entry in header.items():
        if name == '__metadata__':
            continue
        if entry['dtype'] != 'F32':
            raise ValueError(f'{name}: only F32 is read here, got {entry["dtype"]}')
        begin, end = entry['data_offsets']
        out[name] = np.frombuffer(data[8 + n + begin:8 + n + end], dtype='<f4').astype(np.float64).reshape(entry['shape'])
    return out


def read_hf(path):
    with open(os.path.join(path, 'config.json')) as f:
        c = json.load(f)
    t = read_safetensors(os.path.join(path, 'model.safetensors'))
    n_layers = c['num_hidden_layers']
    emb = t.get('model.embed_tokens.weight', t.get('lm_head.weight'))
    layer = lambda i, name: t[f'model.layers.{i}.{name}.weight']  # noqa: E731
    w = {
        'emb': emb,
        'cls': t.get('lm_head.weight', emb) if not c.get('tie_word_embeddings', False) else emb,
        'rms_att': np.stack([layer(i, 'input_layernorm') for i in range(n_layers)]),
        'wq': np.stack([layer(i, 'self_attn.q_proj') for i in range(n_layers)]),
        'wk': np.stack([layer(i, 'self_attn.k_proj') for i in range(n_layers)]),
        'wv': np.stack([layer(i, 'self_attn.v_proj') for i in range(n_layers)]),
        'wo': np.stack([layer(i, 'self_attn.o_proj') for i in range(n_layers)]),
        'rms_ffn': np.stack([layer(i, 'post_attention_layernorm') for i in range(n_layers)]),
        'w1': np.stack([layer(i, 'mlp.gate_proj') for i in range(n_layers)]),
        'w2': np.stack([layer(i, 'mlp.down_proj') for i in range(n_layers)]),
        'w3': np.stack([layer(i, 'mlp.up_proj') for i in range(n_layers)]),
        'rms_final': t['model.norm.weight'],
    }
    config = dict(dim=c['hidden_size'], n_layers=n_layers, n_heads=c['num_attention_heads'],
                  n_kv=c.get('num_key_value_heads', c['num_attention_heads']), eps=c['rms_norm_eps'],
                  theta=float(c.get('rope_theta', 10000.0)), rope='rotate-half', seq_len=c['max_position_embeddings'])
    return config, w


def rmsnorm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rope(x, theta, layout):
    """x: [pos, heads, head_dim]."""
    pos, _, d = x.shape
    inv = theta ** (-np.arange(0, d, 2) / d)  # [d/2]
    angle = np.arange(pos)[:, None] * inv[None, :]  # [pos, d/2]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    if layout == 'interleaved':
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out
    a, b = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def forward(config, w, ids):
    """Logits of the last position, [vocab]."""
    c = config
    head = c['dim'] // c['n_heads']
    group = c['n_heads'] // c['n_kv']
    x = w['emb'][ids]  # [pos, dim]
    pos = len(ids)
    mask = np.triu(np.full((pos, pos), -np.inf), 1)
    for layer in range(c['n_layers']):
        h = rmsnorm(x, w['rms_att'][layer], c['eps'])
        q = (h @ w['wq'][layer].T).reshape(pos, c['n_heads'], head)
        k = (h @ w['wk'][layer].T).reshape(pos, c['n_kv'], head)
        v = (h @ w['wv'][layer].T).reshape(pos, c['n_kv'], head)
        q, k = rope(q, c['theta'], c['rope']), rope(k, c['theta'], c['rope'])
        out = np.empty((pos, c['n_heads'], head))
        for hq in range(c['n_heads']):
            kv = hq // group
            scores = q[:, hq, :] @ k[:, kv, :].T / np.sqrt(head) + mask
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            out[:, hq, :] = (scores / scores.sum(axis=-1, keepdims=True)) @ v[:, kv, :]
        x = x + out.reshape(pos, c['dim']) @ w['wo'][layer].T
        h = rmsnorm(x, w['rms_ffn'][layer], c['eps'])
        gate = h @ w['w1'][layer].T
        x = x + ((gate / (1 + np.exp(-gate))) * (h @ w['w3'][layer].T)) @ w['w2'][layer].T
    return rmsnorm(x[-1], w['rms_final'], c['eps']) @ w['cls'].T


def load(path):
    return read_hf(path) if os.path.isdir(path) else read_llama2c(path)


def greedy(config, w, prompt, new_tokens):
    ids = list(prompt)
    for _ in range(new_tokens):
        if len(ids) >= config['seq_len']:
            break
        ids.append(int(np.argmax(forward(config, w, ids))))
    return ids[len(prompt):]


# Prompts: stories260K's are tok512 ids (llama2.c run.c encoding, BOS first; `encode_run_c` of hf_reference.py
# gives the same) of BOS alone, "Once upon a time, there was a little girl named Lily." and "Tom and Sue went to the
# park. Tom"; tinystories656K's are its tokenizer.json
# ids without the leading '▁' of the same first sentence, and BOS alone.
CASES = [
    ('stories260K', 'stories260K/stories260K.bin', [1], 60),
    ('stories260K', 'stories260K/stories260K.bin',
     [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426], 40),
    ('stories260K', 'stories260K/stories260K.bin',
     [1, 274, 287, 269, 301, 425, 411, 263, 377, 267, 265, 282, 295, 433, 426, 274, 287], 40),
    ('tinystories656K', 'tinystories656K', [1], 60),
    ('tinystories656K', 'tinystories656K', [1, 147, 201, 282, 215, 286, 598, 629, 10], 40),
]


def main():
    if len(sys.argv) == 4:
        config, w = load(sys.argv[1])
        prompt = [int(t) for t in sys.argv[2].split(',')]
        print(json.dumps({'prompt': prompt, 'ids': greedy(config, w, prompt, int(sys.argv[3]))}))
        return
    if sys.argv[1:] != ['fixture']:
        print(__doc__)
        sys.exit(2)
    cases = []
    for name, rel, prompt, n in CASES:
        config, w = load(os.path.join(SHARED, rel))
        cases.append({'model': name, 'path': rel, 'prompt': prompt, 'ids': greedy(config, w, prompt, n)})
    with open(FIXTURE, 'w') as f:
        f.write('{"source": "tools/import/greedy_reference.py (numpy, float64, no KV cache)", "cases": [\n')
        f.write(',\n'.join(json.dumps(c) for c in cases))
        f.write('\n]}\n')
    print(f'wrote {FIXTURE}')


if __name__ == '__main__':
    main()
