#!/usr/bin/python3
"""Independent PyTorch reference for @attnlab/transformer's checkpoint import and export.

Written from the Hugging Face `transformers` modelling code's semantics (LlamaForCausalLM,
MistralForCausalLM, Qwen2ForCausalLM: RMSNorm, rotate-half RoPE, SwiGLU MLP, grouped-query
attention via repeat_kv, optional q/k/v(/o) biases, tied or separate lm_head), with the exact
Hugging Face parameter names, so `load_state_dict(strict=True)` checks that a directory holds
exactly the tensors `transformers` would load. Nothing here is shared with the TypeScript code:
safetensors files are read and written with plain json + numpy, the llama2.c tokenizer encode is
a literal port of run.c's loop.

Run by hand (Debian python3-torch, python3-numpy):

  /usr/bin/python3 tools/import/hf_reference.py fixtures
      Writes tiny random Hugging Face directories (llama with GQA, tied, F32; llama with
      attention_bias, untied, BF16; qwen2 with q/k/v biases, F16, sharded with an index;
      mistral with a sliding window, F32) and their reference logits to
      packages/transformer/src/__fixtures__/import/hf-tiny/.

  /usr/bin/python3 tools/import/hf_reference.py tokenizer [TOKENIZER_BIN]
      Encodes a fixed list of strings with run.c's algorithm; writes
      packages/transformer/src/__fixtures__/import/aidreams-tokenizer.json
      (default tokenizer: aidreams260K's tokenizer.bin, where the tests keep the models).

  /usr/bin/python3 tools/import/hf_reference.py logits DIR TOKEN_IDS
      Loads a Hugging Face directory strictly (e.g. one exported by attnlab) and prints the
      logits of TOKEN_IDS (comma-separated) as JSON, plus the greedy continuation.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
FIXTURES = os.path.join(ROOT, 'packages', 'transformer', 'src', '__fixtures__', 'import')

# ---------------------------------------------------------------------------- safetensors


def read_safetensors(path):
    with open(path, 'rb') as f:
        data = f.read()
    (n,) = struct.unpack('<Q', data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, entry in header.items():
        if name == '__metadata__':
            continue
        begin, end = entry['data_offsets']
        raw = data[base + begin:base + end]
        dtype = entry['dtype']
        if dtype == 'F32':
            arr = np.frombuffer(raw, dtype='<f4')
        elif dtype == 'F16':
            arr = np.frombuffer(raw, dtype='<f2').astype(np.float32)
        elif dtype == 'BF16':
            arr = (np.frombuffer(raw, dtype='<u2').astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f'{name}: dtype {dtype}')
        out[name] = torch.from_numpy(arr.reshape(entry['shape']).copy())
    return out


def to_bf16_bits(x):
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def write_safetensors(path, tensors, dtype):
    header = {'__metadata__': {'format': 'pt'}}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        x = t.detach().numpy().astype(np.float32)
        if dtype == 'F32':
            raw = x.astype('<f4').tobytes()
        elif dtype == 'F16':
            raw = x.astype('<f2').tobytes()
        elif dtype == 'BF16':
            raw = to_bf16_bits(x).astype('<u2').tobytes()
        header[name] = {'dtype': dtype, 'shape': list(x.shape), 'data_offsets': [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header, separators=(',', ':')).encode()
    text += b' ' * ((8 - len(text) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def stored_values(t, dtype):
    """What a tensor becomes after a round trip through `dtype`."""
    x = t.detach().numpy().astype(np.float32)
    if dtype == 'F16':
        return torch.from_numpy(x.astype(np.float16).astype(np.float32))
    if dtype == 'BF16':
        return torch.from_numpy((to_bf16_bits(x).astype(np.uint32) << 16).view(np.float32).copy())
    return torch.from_numpy(x.copy())

# ---------------------------------------------------------------------------- the model (HF semantics)


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, c, qkv_bias, o_bias):
        super().__init__()
        self.h, self.kv, self.dh = c['num_attention_heads'], c['num_key_value_heads'], c['head_dim']
        d = c['hidden_size']
        self.q_proj = nn.Linear(d, self.h * self.dh, bias=qkv_bias)
        self.k_proj = nn.Linear(d, self.kv * self.dh, bias=qkv_bias)
        self.v_proj = nn.Linear(d, self.kv * self.dh, bias=qkv_bias)
        self.o_proj = nn.Linear(self.h * self.dh, d, bias=o_bias)
        self.theta = c['rope_theta']

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.dh).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv, self.dh).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv, self.dh).transpose(1, 2)
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.dh, 2, dtype=torch.float64) / self.dh))
        freqs = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().float(), emb.sin().float()
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.h // self.kv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = q @ k.transpose(-1, -2) * self.dh ** -0.5
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float('-inf'))
        z = torch.softmax(scores, dim=-1) @ v
        return self.o_proj(z.transpose(1, 2).reshape(b, t, self.h * self.dh))


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, f = c['hidden_size'], c['intermediate_size']
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c, qkv_bias, o_bias):
        super().__init__()
        self.self_attn = Attention(c, qkv_bias, o_bias)
        self.mlp = Mlp(c)
        self.input_layernorm = RMSNorm(c['hidden_size'], c['rms_norm_eps'])
        self.post_attention_layernorm = RMSNorm(c['hidden_size'], c['rms_norm_eps'])

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, c, qkv_bias, o_bias):
        super().__init__()
        self.embed_tokens = nn.Embedding(c['vocab_size'], c['hidden_size'])
        self.layers = nn.ModuleList([Layer(c, qkv_bias, o_bias) for _ in range(c['num_hidden_layers'])])
        self.norm = RMSNorm(c['hidden_size'], c['rms_norm_eps'])


class CausalLM(nn.Module):
    """LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM (same names, biases differ)."""

    def __init__(self, c):
        super().__init__()
        c = dict(c)
        c.setdefault('num_key_value_heads', c['num_attention_heads'])
        c.setdefault('head_dim', c['hidden_size'] // c['num_attention_heads'])
        c.setdefault('rope_theta', 10000.0)
        c.setdefault('rms_norm_eps', 1e-6)
        kind = c['model_type']
        qkv_bias = kind == 'qwen2' or bool(c.get('attention_bias', False))
        o_bias = kind == 'llama' and bool(c.get('attention_bias', False))
        self.tied = bool(c.get('tie_word_embeddings', False))
        self.model = Body(c, qkv_bias, o_bias)
        if not self.tied:
            self.lm_head = nn.Linear(c['hidden_size'], c['vocab_size'], bias=False)

    def forward(self, ids):
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x)
        x = self.model.norm(x)
        w = self.model.embed_tokens.weight if self.tied else self.lm_head.weight
        return x @ w.T


def load_directory(path):
    with open(os.path.join(path, 'config.json')) as f:
        config = json.load(f)
    index = os.path.join(path, 'model.safetensors.index.json')
    tensors = {}
    if os.path.exists(index):
        with open(index) as f:
            shards = sorted(set(json.load(f)['weight_map'].values()))
        for s in shards:
            tensors.update(read_safetensors(os.path.join(path, s)))
    else:
        tensors = read_safetensors(os.path.join(path, 'model.safetensors'))
    model = CausalLM(config)
    model.load_state_dict(tensors, strict=True)  # exact Hugging Face names, nothing missing or extra
    model.eval()
    return config, model

# ---------------------------------------------------------------------------- fixtures


FIXTURE_MODELS = [
    dict(name='llama-gqa-tied', dtype='F32', shards=1, tokens=[1, 5, 9, 33, 2, 17, 8, 39, 0, 21, 21, 3],
         config=dict(architectures=['LlamaForCausalLM'], model_type='llama', hidden_size=16, intermediate_size=24,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=40,
                     max_position_embeddings=32, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
                     hidden_act='silu', bos_token_id=1, eos_token_id=2, torch_dtype='float32')),
    dict(name='llama-bias-untied-bf16', dtype='BF16', shards=1, tokens=[3, 1, 4, 1, 5, 9, 2, 6, 5, 3],
         config=dict(architectures=['LlamaForCausalLM'], model_type='llama', hidden_size=24, intermediate_size=40,
                     num_hidden_layers=2, num_attention_heads=3, num_key_value_heads=1, head_dim=8, vocab_size=48,
                     max_position_embeddings=16, rms_norm_eps=1e-6, rope_theta=500000.0, tie_word_embeddings=False,
                     attention_bias=True, mlp_bias=False, hidden_act='silu', torch_dtype='bfloat16')),
    dict(name='qwen2-f16-sharded', dtype='F16', shards=2, tokens=[7, 7, 0, 12, 30, 31, 2, 19, 4],
         config=dict(architectures=['Qwen2ForCausalLM'], model_type='qwen2', hidden_size=16, intermediate_size=32,
                     num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, vocab_size=32,
                     max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
                     use_sliding_window=False, sliding_window=32, max_window_layers=3, hidden_act='silu',
                     torch_dtype='float16')),
    dict(name='mistral-window', dtype='F32', shards=1, tokens=[1, 2, 3, 4, 5, 6, 7, 8],
         config=dict(architectures=['MistralForCausalLM'], model_type='mistral', hidden_size=16, intermediate_size=24,
                     num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, vocab_size=24,
                     max_position_embeddings=64, sliding_window=8, rms_norm_eps=1e-5, rope_theta=10000.0,
                     tie_word_embeddings=False, hidden_act='silu', torch_dtype='float32')),
]


def make_fixtures():
    out_root = os.path.join(FIXTURES, 'hf-tiny')
    os.makedirs(out_root, exist_ok=True)
    expected = {}
    for index, spec in enumerate(FIXTURE_MODELS):
        torch.manual_seed(1000 + index)
        model = CausalLM(spec['config'])
        state = {}
        for name, p in model.state_dict().items():
            # Random weights with a realistic scale; norms around 1.
            value = torch.randn(p.shape) * (0.3 if name.endswith('layernorm.weight') or name == 'model.norm.weight' else 0.2)
            if name.endswith('layernorm.weight') or name == 'model.norm.weight':
                value = value + 1.0
            state[name] = value
        directory = os.path.join(out_root, spec['name'])
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, 'config.json'), 'w') as f:
            json.dump(spec['config'], f, indent=2)
            f.write('\n')
        names = list(state.keys())
        if spec['shards'] == 1:
            write_safetensors(os.path.join(directory, 'model.safetensors'), state, spec['dtype'])
        else:
            per = math.ceil(len(names) / spec['shards'])
            weight_map = {}
            for s in range(spec['shards']):
                shard = f'model-{s + 1:05d}-of-{spec["shards"]:05d}.safetensors'
                part = {n: state[n] for n in names[s * per:(s + 1) * per]}
                write_safetensors(os.path.join(directory, shard), part, spec['dtype'])
                for n in part:
                    weight_map[n] = shard
            with open(os.path.join(directory, 'model.safetensors.index.json'), 'w') as f:
                json.dump({'metadata': {'total_size': 0}, 'weight_map': weight_map}, f, indent=2)
                f.write('\n')
        # Reference logits from the stored (dtype-rounded) values, loaded strictly.
        config, loaded = load_directory(directory)
        with torch.no_grad():
            logits = loaded(torch.tensor([spec['tokens']]))[0]
        expected[spec['name']] = {
            'tokens': spec['tokens'],
            'dtype': spec['dtype'],
            'logits': [[float(v) for v in row] for row in logits.numpy()],
        }
        print(f"{spec['name']}: {sum(t.numel() for t in state.values())} parameters, logits {tuple(logits.shape)}")
    with open(os.path.join(out_root, 'expected.json'), 'w') as f:
        json.dump(expected, f)
        f.write('\n')

# ---------------------------------------------------------------------------- tokenizer (run.c)


def read_tokenizer(path):
    with open(path, 'rb') as f:
        data = f.read()
    (max_len,) = struct.unpack('<i', data[:4])
    vocab, scores, o = [], [], 4
    while o < len(data):
        score, n = struct.unpack('<fi', data[o:o + 8])
        o += 8
        vocab.append(data[o:o + n])
        scores.append(score)
        o += n
    return vocab, scores


def encode_run_c(vocab, scores, text, bos=True, eos=False):
    """A literal port of llama2.c run.c encode() (dummy prefix, code points, byte fallback +3, greedy merges)."""
    lookup = {}
    for i, piece in enumerate(vocab):
        lookup.setdefault(piece, i)
    tokens = []
    if bos:
        tokens.append(1)
    raw = text.encode('utf-8')
    if raw:
        tokens.append(lookup[b' '])
    i = 0
    while i < len(raw):
        j = i + 1
        while j < len(raw) and (raw[j] & 0xC0) == 0x80 and j - i < 4:
            j += 1
        cp = raw[i:j]
        if cp in lookup:
            tokens.append(lookup[cp])
        else:
            for byte in cp:
                tokens.append(byte + 3)
        i = j
    while True:
        best_score, best_id, best_idx = -1e10, -1, -1
        for k in range(len(tokens) - 1):  # run.c scans BOS too
            merged = vocab[tokens[k]] + vocab[tokens[k + 1]]
            tid = lookup.get(merged, -1)
            if tid != -1 and scores[tid] > best_score:
                best_score, best_id, best_idx = scores[tid], tid, k
        if best_idx == -1:
            break
        tokens[best_idx] = best_id
        del tokens[best_idx + 1]
    if eos:
        tokens.append(2)
    return tokens


TOKENIZER_STRINGS = [
    'I dreamed',
    'Hello world',
    'a gentle hum of probability',
    '',
    ' ',
    '  leading and trailing spaces  ',
    'Line one\nLine two\ttab',
    'Café crème brûlée',
    '夢を見た',
    'emoji 🌙✨ end',
    'µ and μ differ',
    'I dreamed, as I sense the nodes, a gentle hum of probability. Contrast emerge, a flower, as I adjust.',
]


def make_tokenizer_fixture(path):
    vocab, scores = read_tokenizer(path)
    # run.c uses the + 3 byte offset; check this vocabulary agrees before trusting it.
    for b in range(256):
        assert vocab[b + 3] == f'<0x{b:02X}>'.encode(), f'piece {b + 3} is not <0x{b:02X}>'
    cases = [{'text': s, 'ids': encode_run_c(vocab, scores, s)} for s in TOKENIZER_STRINGS]
    out = os.path.join(FIXTURES, 'aidreams-tokenizer.json')
    with open(out, 'w') as f:
        f.write('{"source": "run.c encode() ported literally (tools/import/hf_reference.py)", "cases": [\n')
        f.write(',\n'.join(json.dumps(case, ensure_ascii=False) for case in cases))
        f.write('\n]}\n')
    print(f'{len(cases)} cases -> {out}')


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    mode = sys.argv[1]
    if mode == 'fixtures':
        make_fixtures()
    elif mode == 'tokenizer':
        path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, '..', 'shared', 'models', 'aidreams260K', 'tokenizer.bin')
        make_tokenizer_fixture(path)
    elif mode == 'logits':
        config, model = load_directory(sys.argv[2])
        ids = [int(t) for t in sys.argv[3].split(',')]
        with torch.no_grad():
            logits = model(torch.tensor([ids]))[0]
            seq = list(ids)
            limit = int(sys.argv[4]) if len(sys.argv) > 4 else 0
            while len(seq) < limit:
                seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
        print(json.dumps({'model_type': config['model_type'], 'logits': logits.numpy().tolist(), 'greedy': seq}))
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == '__main__':
    main()
