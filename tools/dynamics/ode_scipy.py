#!/usr/bin/python3
"""Independent numpy/scipy implementation of the reduced gradient flow of @attnlab/dynamics.

Yuksel et al., arXiv 2602.19143; research notes markov-dynamics.md section 4.2:
    L(V, S) = 1/2 ||G - sum_k V_k s_k^T||_F^2,  R = G - sum_k V_k s_k^T,  J(s) = diag(s) - s s^T
    dV_k/dt = R s_k - lambda V_k
    replicator: ds_k/dt = J(s_k) (R^T V_k - lambda s_k)
    logit:      du_k/dt = J(s_k) R^T V_k - lambda u_k,  s_k = softmax(u_k)

Used two ways (both read one JSON problem from --input, written by the TypeScript side, which
carries the config, the initial logits and the sample times, so both sides start from the same
state):
  * golden data (run by hand via tools/dynamics/golden.ts): --coords s integrates the replicator
    flow directly in attention coordinates (the paper notebook's form), DOP853 at tight
    tolerances, an independent check of the TypeScript logit-coordinate formulation;
  * benchmark (packages/dynamics/bench): --coords u integrates exactly the TypeScript state
    (V, u) with the same tolerances, timing only the solve_ivp call.

Prints one JSON object: loss at the sample times, transition times (first crossing of the
midpoints between plateaus, linearly interpolated), wall time (best of --repeat), nfev.
Run with Debian's /usr/bin/python3 (python3-numpy, python3-scipy).
"""
import argparse
import json
import sys
import time

import numpy as np
from scipy.integrate import solve_ivp


def build(problem):
    config = problem["config"]
    spans = config["spans"]
    weights = config["spanWeights"]
    K, T, h = len(spans), config["nCtx"], config["nHeads"]
    G = np.zeros((K, T))
    p = 0
    for j, length in enumerate(spans):
        G[j, p:p + length] = weights[j]
        p += length
    return G, K, T, h, config["variant"], config["weightDecay"]


def softmax(u):
    e = np.exp(u - u.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def make_rhs(G, K, T, h, variant, lam, coords):
    def unpack(y):
        V = y[: h * K].reshape(h, K)
        a = y[h * K:].reshape(h, T)
        S = a if coords == "s" else softmax(a)
        return V, a, S

    def rhs(_t, y):
        V, a, S = unpack(y)
        R = G - V.T @ S                       # [K, T]
        dV = S @ R.T - lam * V                # rows: R s_k - lambda V_k
        drive = V @ R                         # rows: R^T V_k
        if variant == "logit":
            mean = np.sum(S * drive, axis=1, keepdims=True)
            da = S * (drive - mean) - lam * a
        else:
            w = drive - lam * S
            mean = np.sum(S * w, axis=1, keepdims=True)
            da = (S * (w - mean)) if coords == "s" else (w - mean)
        return np.concatenate([dV.ravel(), da.ravel()])

    def loss(y):
        V, _a, S = unpack(y)
        R = G - V.T @ S
        return 0.5 * float(np.sum(R * R))

    return rhs, loss


def transitions(times, losses, plateaus):
    out = []
    start = 0
    for j in range(1, len(plateaus)):
        level = 0.5 * (plateaus[j - 1] + plateaus[j])
        found = None
        for i in range(start, len(losses)):
            if losses[i] <= level:
                found = i
                break
        if found is None:
            out.append(None)
            continue
        t = times[found]
        if found > 0 and losses[found - 1] > level:
            t0, l0, l1 = times[found - 1], losses[found - 1], losses[found]
            t = t0 + (t - t0) * (l0 - level) / (l0 - l1)
        out.append(t)
        start = found
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input", required=True, help="problem JSON: config, y0 (V then logits u), times, plateaus")
    parser.add_argument("--coords", choices=["u", "s"], default="u", help="integrate logits (u) or attention (s)")
    parser.add_argument("--method", default="RK45")
    parser.add_argument("--rtol", type=float, default=1e-8)
    parser.add_argument("--atol", type=float, default=1e-8)
    parser.add_argument("--repeat", type=int, default=1, help="time this many runs, report the best")
    args = parser.parse_args()
    with open(args.input) as f:
        problem = json.load(f)
    G, K, T, h, variant, lam = build(problem)
    if args.coords == "s" and variant != "replicator":
        sys.exit("--coords s is only defined for the replicator variant")
    y0 = np.array(problem["y0"], dtype=float)
    if args.coords == "s":
        u = y0[h * K:].reshape(h, T)
        y0 = np.concatenate([y0[: h * K], softmax(u).ravel()])
    times = np.array(problem["times"], dtype=float)
    rhs, loss = make_rhs(G, K, T, h, variant, lam, args.coords)
    best = float("inf")
    solution = None
    for _ in range(max(1, args.repeat)):
        start = time.perf_counter()
        solution = solve_ivp(rhs, (0.0, float(times[-1])), y0, method=args.method, t_eval=times, rtol=args.rtol, atol=args.atol)
        best = min(best, time.perf_counter() - start)
    if not solution.success:
        sys.exit("solve_ivp failed: " + solution.message)
    losses = [loss(solution.y[:, i]) for i in range(solution.y.shape[1])]
    json.dump(
        {
            "method": args.method,
            "coords": args.coords,
            "rtol": args.rtol,
            "atol": args.atol,
            "wallTimeMs": best * 1000.0,
            "nfev": int(solution.nfev),
            "times": solution.t.tolist(),
            "loss": losses,
            "transitions": transitions(solution.t.tolist(), losses, problem["plateaus"]),
        },
        sys.stdout,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
