#!/usr/bin/python3
"""Independent brute-force reference for @attnlab/markov's exact sparse-Markov oracles.

For tiny configurations it enumerates every full sequence (C burn-in tokens + genLen generated
tokens), computes its exact probability from the definition (Yuksel et al., arXiv 2602.19143;
markov-dynamics.md section 1.1), and from the resulting joint distributions computes:

- pooled H_n = H(Y | last n tokens) with the (context, next token) joint averaged over the
  genLen generated positions, n = 0..C;
- the position-specific variant (mean over positions of the per-position conditional entropy);
- H(Y | tokens of the j most important spans), j = 0..K (pooled and position-specific);
- the cross-entropy of the truncated teachers (k most important spans, not refit), k = 0..K.

This is a different algorithm from the TypeScript one (which propagates the window
distribution); both must agree to rounding. The teacher matrices are drawn here with numpy and
written into the fixture, so the TypeScript test rebuilds the very same teacher through
`teacherMatrices`.

Run by hand:  /usr/bin/python3 tools/markov/exact_oracle.py
Writes:       packages/markov/src/__fixtures__/sparse-markov-exact.json
"""
import itertools
import json
import math
import os

import numpy as np

CONFIGS = [
    dict(vocabSize=3, spans=[1, 1], m=1.7, tau=0.5, genLen=3, reverse=False, positionWeights=None, stride=None),
    dict(vocabSize=2, spans=[1, 2], m=1.5, tau=0.3, genLen=4, reverse=False, positionWeights=None, stride=None),
    dict(vocabSize=3, spans=[2, 2], m=1.7, tau=0.4, genLen=3, reverse=False, positionWeights=[0.7, 0.3], stride=1),
    dict(vocabSize=4, spans=[1, 1, 1], m=2.0, tau=0.2, genLen=3, reverse=True, positionWeights=None, stride=None),
    dict(vocabSize=3, spans=[1, 2], m=1.3, tau=0.25, genLen=4, reverse=True, positionWeights=None, stride=None),
]


def random_orthogonal(d, rng):
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))[None, :]


def geometry(cfg):
    spans = cfg['spans']
    if cfg['stride'] is None:
        starts = list(np.cumsum([0] + spans[:-1]))
    else:
        starts = [i * cfg['stride'] for i in range(len(spans))]
    C = starts[-1] + spans[-1]
    return [int(s) for s in starts], int(C)


def teacher_probabilities(cfg, matrices, window, kept):
    """P(next | window) of the teacher restricted to the spans in `kept`, straight from the formula."""
    d, spans, m, tau = cfg['vocabSize'], cfg['spans'], cfg['m'], cfg['tau']
    K = len(spans)
    starts, _ = geometry(cfg)
    weights = cfg['positionWeights'] or [1.0] * max(spans)
    z = np.zeros(d)
    for i in range(K):
        if i not in kept:
            continue
        c = m ** (K - 1 - i if cfg['reverse'] else i)
        a = np.zeros(d)
        for j in range(spans[i]):
            a[window[starts[i] + j]] += weights[j]
        z += c * matrices[i] @ a
    z = z / tau
    z -= z.max()
    p = np.exp(z)
    return p / p.sum()


def importance_order(cfg):
    K = len(cfg['spans'])
    w = [cfg['m'] ** (K - 1 - i if cfg['reverse'] else i) for i in range(K)]
    return sorted(range(K), key=lambda i: (-w[i], -i))


def cond_entropy(joint):
    """H(Y | X) from a dict {(x, y): prob}."""
    rows = {}
    for (x, _), p in joint.items():
        rows[x] = rows.get(x, 0.0) + p
    return -sum(p * math.log(p / rows[x]) for (x, _), p in joint.items() if p > 0)


def brute_force(cfg, matrices):
    d, spans, G = cfg['vocabSize'], cfg['spans'], cfg['genLen']
    K = len(spans)
    starts, C = geometry(cfg)
    order = importance_order(cfg)
    top_sets = []
    for j in range(K + 1):
        kept = order[:j]
        positions = sorted({starts[i] + r for i in kept for r in range(spans[i])})
        top_sets.append(positions)
    cache = {}

    def probs(window, kept):
        key = (window, kept)
        if key not in cache:
            cache[key] = teacher_probabilities(cfg, matrices, list(window), set(kept))
        return cache[key]

    full = tuple(range(K))
    ctx_joint = [[{} for _ in range(C + 1)] for _ in range(G)]
    top_joint = [[{} for _ in range(K + 1)] for _ in range(G)]
    truncated_ce = [0.0] * (K + 1)
    for burn in itertools.product(range(d), repeat=C):
        for gen in itertools.product(range(d), repeat=G):
            seq = burn + gen
            prob = d ** (-C)
            for t in range(G):
                prob *= probs(seq[t:t + C], full)[seq[C + t]]
            if prob == 0:
                continue
            for t in range(G):
                window = seq[t:t + C]
                y = seq[C + t]
                for n in range(C + 1):
                    key = (window[C - n:], y)
                    ctx_joint[t][n][key] = ctx_joint[t][n].get(key, 0.0) + prob
                for j, positions in enumerate(top_sets):
                    key = (tuple(window[p] for p in positions), y)
                    top_joint[t][j][key] = top_joint[t][j].get(key, 0.0) + prob
                for k in range(K + 1):
                    truncated_ce[k] += prob * -math.log(probs(window, tuple(sorted(order[:k])))[y]) / G

    def pooled_of(joints_per_t, index):
        pooled = {}
        for t in range(G):
            for key, p in joints_per_t[t][index].items():
                pooled[key] = pooled.get(key, 0.0) + p / G
        return pooled

    per_position = [[cond_entropy(ctx_joint[t][n]) for n in range(C + 1)] for t in range(G)]
    return dict(
        pooled=[cond_entropy(pooled_of(ctx_joint, n)) for n in range(C + 1)],
        positionSpecific=[sum(per_position[t][n] for t in range(G)) / G for n in range(C + 1)],
        perPosition=per_position,
        topSpansPooled=[cond_entropy(pooled_of(top_joint, j)) for j in range(K + 1)],
        topSpansPositionSpecific=[sum(cond_entropy(top_joint[t][j]) for t in range(G)) / G for j in range(K + 1)],
        truncatedTeacherCrossEntropy=truncated_ce,
    )


def main():
    rng = np.random.default_rng(20261129)
    cases = []
    for cfg in CONFIGS:
        d = cfg['vocabSize']
        matrices = [random_orthogonal(d, rng) for _ in cfg['spans']]
        expected = brute_force(cfg, matrices)
        _, C = geometry(cfg)
        windows = [tuple(int(v) for v in rng.integers(0, d, size=C)) for _ in range(3)]
        probes = [
            dict(window=list(w), keepSpans=k, probabilities=list(teacher_probabilities(cfg, matrices, list(w), set(importance_order(cfg)[:k]))))
            for w in windows
            for k in range(len(cfg['spans']) + 1)
        ]
        config = dict(cfg, teacherSeed=0, teacherMatrices=[m.reshape(-1).tolist() for m in matrices])
        cases.append(dict(config=config, expected=expected, probes=probes))
        print(cfg['vocabSize'], cfg['spans'], 'pooled', ['%.4f' % v for v in expected['pooled']])
    out = os.path.join(os.path.dirname(__file__), '..', '..', 'packages', 'markov', 'src', '__fixtures__', 'sparse-markov-exact.json')
    with open(out, 'w') as f:
        json.dump(dict(generator='tools/markov/exact_oracle.py', numpy=np.__version__, cases=cases), f, indent=1)
        f.write('\n')
    print('wrote', os.path.normpath(out))


if __name__ == '__main__':
    main()
