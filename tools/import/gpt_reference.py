#!/usr/bin/python3
"""Independent PyTorch reference for @attnlab/transformer's GPT-2 and GPT-NeoX (Pythia) import and export.

Written from the Hugging Face `transformers` modelling semantics of GPT2LMHeadModel and GPTNeoXForCausalLM, with
their exact parameter names, so `load_state_dict(strict=True)` checks that a directory holds exactly the tensors
`transformers` would load:

- GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners", sec. 2.3): learned positions
  (`wpe`), pre-LN blocks with biased LayerNorms, Conv1D weights stored `[in, out]`, the fused `attn.c_attn`
  (q | k | v blocks of n_embd columns), scores scaled by 1/sqrt(dHead) (`scale_attn_weights`), GELU with the tanh
  approximation (`gelu_new`), final `ln_f`, the unembedding tied to `wte` (no `lm_head.weight` stored).
- GPT-NeoX (Black et al., arXiv 2204.06745, sec. 2.1; Pythia, Biderman et al., arXiv 2304.01373): the fused
  `attention.query_key_value` whose output is laid out per head as [nHeads, 3, dHead], partial rotate-half RoPE
  on the first int(dHead * rotary_pct) dimensions (frequencies of that width, base rotary_emb_base), parallel
  attention and MLP (`use_parallel_residual`) or sequential blocks, exact-erf GELU, `final_layer_norm`, separate
  `embed_out`.

Nothing here is shared with the TypeScript code; safetensors files are read and written with json + numpy
(`hf_reference.py` beside this file).

Run by hand (Debian python3-torch, python3-numpy):

  /usr/bin/python3 tools/import/gpt_reference.py fixtures
      Writes tiny random Hugging Face directories (gpt2 tied with the `transformer.` prefix, F32; gpt_neox with
      parallel residual and rotary_pct 0.25, F32; gpt_neox sequential with rotary_pct 0.5, F16) and their
      reference logits and greedy continuations to packages/transformer/src/__fixtures__/import/hf-gpt/.

  /usr/bin/python3 tools/import/gpt_reference.py logits DIR TOKEN_IDS [LENGTH]
      Loads a gpt2 or gpt_neox directory strictly (e.g. one exported by attnlab) and prints the logits of
      TOKEN_IDS (comma-separated) as JSON, plus the greedy continuation up to LENGTH ids (full recomputation).
"""
import json
import math
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reference import read_safetensors, write_safetensors  # noqa: E402

torch.set_num_threads(1)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
FIXTURES = os.path.join(ROOT, 'packages', 'transformer', 'src', '__fixtures__', 'import', 'hf-gpt')


def activation(name):
    if name in ('gelu_new', 'gelu_pytorch_tanh'):
        return lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    if name == 'gelu':
        return lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if name == 'relu':
        return torch.relu
    if name in ('silu', 'swish'):
        return nn.functional.silu
    raise ValueError(f'activation {name}')


def causal_attention(q, k, v, scale):
    """q, k, v: [b, h, t, dh] -> z [b, t, h * dh]."""
    b, h, t, dh = q.shape
    scores = (q @ k.transpose(-1, -2)) * scale
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float('-inf'))
    z = torch.softmax(scores, dim=-1) @ v
    return z.transpose(1, 2).reshape(b, t, h * dh)

# ---------------------------------------------------------------------------- GPT-2


class Conv1D(nn.Module):
    """GPT-2's linear layer: weight [in, out], y = x @ W + b."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


class Gpt2Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c['n_embd']
        self.h = c['n_head']
        self.c_attn = Conv1D(d, 3 * d)
        self.c_proj = Conv1D(d, d)
        self.scale = (d // self.h) ** -0.5 if c.get('scale_attn_weights', True) else 1.0

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)  # q | k | v blocks
        heads = lambda y: y.view(b, t, self.h, d // self.h).transpose(1, 2)  # noqa: E731
        return self.c_proj(causal_attention(heads(q), heads(k), heads(v), self.scale))


class Gpt2Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c['n_embd']
        inner = c.get('n_inner') or 4 * d
        self.c_fc = Conv1D(d, inner)
        self.c_proj = Conv1D(inner, d)
        self.act = activation(c.get('activation_function', 'gelu_new'))

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class Gpt2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, eps = c['n_embd'], c.get('layer_norm_epsilon', 1e-5)
        self.ln_1 = nn.LayerNorm(d, eps=eps)
        self.attn = Gpt2Attention(c)
        self.ln_2 = nn.LayerNorm(d, eps=eps)
        self.mlp = Gpt2Mlp(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2Body(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c['n_embd']
        self.wte = nn.Embedding(c['vocab_size'], d)
        self.wpe = nn.Embedding(c['n_positions'], d)
        self.h = nn.ModuleList([Gpt2Block(c) for _ in range(c['n_layer'])])
        self.ln_f = nn.LayerNorm(d, eps=c.get('layer_norm_epsilon', 1e-5))


class Gpt2LMHeadModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        for key in ('scale_attn_by_inverse_layer_idx', 'add_cross_attention'):
            assert not c.get(key, False), f'{key} is not part of this reference'
        self.transformer = Gpt2Body(c)
        self.tied = bool(c.get('tie_word_embeddings', True))
        if not self.tied:
            self.lm_head = nn.Linear(c['n_embd'], c['vocab_size'], bias=False)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1])
        x = self.transformer.wte(ids) + self.transformer.wpe(positions)[None]
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        w = self.transformer.wte.weight if self.tied else self.lm_head.weight
        return x @ w.T

    @staticmethod
    def state_names(tensors):
        """Hugging Face accepts GPT-2 weights with or without the `transformer.` prefix; buffers are not weights."""
        out = {}
        for name, value in tensors.items():
            if name.endswith('.attn.bias') or name.endswith('.attn.masked_bias'):
                continue
            out[name if name.startswith('transformer.') or name == 'lm_head.weight' else f'transformer.{name}'] = value
        return out

# ---------------------------------------------------------------------------- GPT-NeoX


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class NeoxAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c['hidden_size']
        self.h = c['num_attention_heads']
        self.dh = d // self.h
        self.rotary = int(self.dh * c.get('rotary_pct', 0.25))
        self.base = c.get('rotary_emb_base', 10000)
        self.query_key_value = nn.Linear(d, 3 * d)
        self.dense = nn.Linear(d, d)

    def forward(self, x):
        b, t, _ = x.shape
        qkv = self.query_key_value(x).view(b, t, self.h, 3 * self.dh)  # per head: q, k, v of dHead each
        q = qkv[..., :self.dh].permute(0, 2, 1, 3)
        k = qkv[..., self.dh:2 * self.dh].permute(0, 2, 1, 3)
        v = qkv[..., 2 * self.dh:].permute(0, 2, 1, 3)
        r = self.rotary
        inv_freq = 1.0 / (self.base ** (torch.arange(0, r, 2, dtype=torch.float64) / r))
        freqs = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().float(), emb.sin().float()
        rot = lambda y: torch.cat((y[..., :r] * cos + rotate_half(y[..., :r]) * sin, y[..., r:]), dim=-1)  # noqa: E731
        return self.dense(causal_attention(rot(q), rot(k), v, self.dh ** -0.5))


class NeoxMlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, f = c['hidden_size'], c['intermediate_size']
        self.dense_h_to_4h = nn.Linear(d, f)
        self.dense_4h_to_h = nn.Linear(f, d)
        self.act = activation(c.get('hidden_act', 'gelu'))

    def forward(self, x):
        return self.dense_4h_to_h(self.act(self.dense_h_to_4h(x)))


class NeoxLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, eps = c['hidden_size'], c.get('layer_norm_eps', 1e-5)
        self.parallel = c['use_parallel_residual']
        self.input_layernorm = nn.LayerNorm(d, eps=eps)
        self.post_attention_layernorm = nn.LayerNorm(d, eps=eps)
        self.attention = NeoxAttention(c)
        self.mlp = NeoxMlp(c)

    def forward(self, x):
        attn = self.attention(self.input_layernorm(x))
        if self.parallel:
            return x + attn + self.mlp(self.post_attention_layernorm(x))
        x = x + attn
        return x + self.mlp(self.post_attention_layernorm(x))


class NeoxBody(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_in = nn.Embedding(c['vocab_size'], c['hidden_size'])
        self.layers = nn.ModuleList([NeoxLayer(c) for _ in range(c['num_hidden_layers'])])
        self.final_layer_norm = nn.LayerNorm(c['hidden_size'], eps=c.get('layer_norm_eps', 1e-5))


class GptNeoxForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        assert not c.get('tie_word_embeddings', False), 'tied GPT-NeoX is not part of this reference'
        self.gpt_neox = NeoxBody(c)
        self.embed_out = nn.Linear(c['hidden_size'], c['vocab_size'], bias=False)

    def forward(self, ids):
        x = self.gpt_neox.embed_in(ids)
        for layer in self.gpt_neox.layers:
            x = layer(x)
        return self.embed_out(self.gpt_neox.final_layer_norm(x))

    @staticmethod
    def state_names(tensors):
        skip = ('.attention.bias', '.attention.masked_bias', '.attention.rotary_emb.inv_freq')
        return {name: value for name, value in tensors.items() if not name.endswith(skip)}


MODELS = {'gpt2': Gpt2LMHeadModel, 'gpt_neox': GptNeoxForCausalLM}


def load_directory(path):
    with open(os.path.join(path, 'config.json')) as f:
        config = json.load(f)
    cls = MODELS[config['model_type']]
    model = cls(config)
    model.load_state_dict(cls.state_names(read_safetensors(os.path.join(path, 'model.safetensors'))), strict=True)
    model.eval()
    return config, model


def greedy(model, ids, length):
    seq = list(ids)
    with torch.no_grad():
        while len(seq) < length:
            seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
    return seq

# ---------------------------------------------------------------------------- fixtures


FIXTURE_MODELS = [
    dict(name='gpt2-tied', dtype='F32', tokens=[50, 3, 17, 17, 42, 0, 9, 63, 28, 5, 11, 36], greedy=24,
         config=dict(architectures=['GPT2LMHeadModel'], model_type='gpt2', n_embd=32, n_head=4, n_layer=2,
                     n_positions=32, n_inner=64, vocab_size=64, layer_norm_epsilon=1e-5,
                     activation_function='gelu_new', scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
                     reorder_and_upcast_attn=False, tie_word_embeddings=True, bos_token_id=50, eos_token_id=50,
                     torch_dtype='float32')),
    dict(name='neox-parallel', dtype='F32', tokens=[1, 8, 2, 33, 33, 60, 4, 19, 7, 12], greedy=24,
         config=dict(architectures=['GPTNeoXForCausalLM'], model_type='gpt_neox', hidden_size=32,
                     num_attention_heads=2, num_hidden_layers=2, intermediate_size=64, vocab_size=64,
                     max_position_embeddings=64, rotary_pct=0.25, rotary_emb_base=10000, layer_norm_eps=1e-5,
                     use_parallel_residual=True, hidden_act='gelu', tie_word_embeddings=False, bos_token_id=0,
                     eos_token_id=0, torch_dtype='float32')),
    dict(name='neox-sequential-f16', dtype='F16', tokens=[5, 5, 30, 2, 47, 13, 9, 0, 21], greedy=20,
         config=dict(architectures=['GPTNeoXForCausalLM'], model_type='gpt_neox', hidden_size=32,
                     num_attention_heads=4, num_hidden_layers=2, intermediate_size=48, vocab_size=48,
                     max_position_embeddings=32, rotary_pct=0.5, rotary_emb_base=500, layer_norm_eps=1e-5,
                     use_parallel_residual=False, hidden_act='gelu', tie_word_embeddings=False,
                     torch_dtype='float16')),
]


def make_fixtures():
    os.makedirs(FIXTURES, exist_ok=True)
    expected = {}
    for index, spec in enumerate(FIXTURE_MODELS):
        torch.manual_seed(2000 + index)
        model = MODELS[spec['config']['model_type']](spec['config'])
        state = {}
        for name, p in model.state_dict().items():
            norm = 'ln_' in name or 'layernorm' in name or 'layer_norm' in name
            value = torch.randn(p.shape) * (0.2 if norm else 0.25)
            if norm and name.endswith('.weight'):
                value = value + 1.0
            state[name] = value
        directory = os.path.join(FIXTURES, spec['name'])
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, 'config.json'), 'w') as f:
            json.dump(spec['config'], f, indent=2)
            f.write('\n')
        write_safetensors(os.path.join(directory, 'model.safetensors'), state, spec['dtype'])
        # Reference outputs from the stored (dtype-rounded) values, loaded strictly.
        _, loaded = load_directory(directory)
        with torch.no_grad():
            logits = loaded(torch.tensor([spec['tokens']]))[0]
        expected[spec['name']] = {
            'tokens': spec['tokens'],
            'dtype': spec['dtype'],
            'logits': [[float(v) for v in row] for row in logits.numpy()],
            'greedy': greedy(loaded, spec['tokens'], spec['greedy']),
        }
        print(f"{spec['name']}: {sum(t.numel() for t in state.values())} parameters, logits {tuple(logits.shape)}")
    with open(os.path.join(FIXTURES, 'expected.json'), 'w') as f:
        json.dump(expected, f)
        f.write('\n')


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    mode = sys.argv[1]
    if mode == 'fixtures':
        make_fixtures()
    elif mode == 'logits' and len(sys.argv) >= 4:
        config, model = load_directory(sys.argv[2])
        ids = [int(t) for t in sys.argv[3].split(',')]
        with torch.no_grad():
            logits = model(torch.tensor([ids]))[0]
        length = int(sys.argv[4]) if len(sys.argv) > 4 else 0
        out = {'model_type': config['model_type'], 'logits': logits.numpy().tolist(), 'greedy': greedy(model, ids, length)}
        print(json.dumps(out))
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == '__main__':
    main()
