#!/usr/bin/python3
"""scikit-learn reference for @attnlab/knockout's Lasso (coordinate descent).

The compressed-sensing localization of Bair, Xu, Sun & Kolter (arXiv 2603.03335: its Lasso step,
scikit-learn's `Lasso(alpha=0.01, max_iter=5000)` in the authors' released code) fits

    min_{w, b}  1/(2n) ||y - X w - b||^2 + alpha ||w||_1

with scikit-learn's `Lasso` (cyclic coordinate descent, fit_intercept=True, duality-gap stopping
rule). Our TypeScript implementation must give the same coefficients, intercept and iteration
count on the same data. This script draws several datasets with numpy (well-conditioned,
binary knockout designs with standardized scores as the paper uses them, p > n, ill-conditioned,
a constant column, alpha above alpha_max, positive=True, a run stopped by max_iter) and one
`LassoCV` run (5 contiguous folds, precompute=False so every fit is plain coordinate descent),
and writes inputs and sklearn's outputs to JSON.

Run by hand (Debian python3-sklearn 1.2.1, numpy 1.24):
    /usr/bin/python3 tools/knockout/lasso_reference.py
Writes:
    packages/knockout/src/__fixtures__/lasso-sklearn.json
"""
import json
import os
import warnings

import numpy as np
import sklearn
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Lasso, LassoCV

OUT = os.path.join(os.path.dirname(__file__), '..', '..', 'packages', 'knockout', 'src', '__fixtures__', 'lasso-sklearn.json')


def short(a):
    """Rounds to 9 significant digits so the fixture stays small; the fit uses the rounded values."""
    return np.array([float('%.9g' % v) for v in np.ravel(a)]).reshape(np.shape(a))


def standardize(y):
    """StandardScaler on one column: population standard deviation (ddof=0)."""
    sd = y.std()
    return (y - y.mean()) / (sd if sd > 0 else 1.0)


def bernoulli_masks(rng, m, n, p):
    masks = (rng.random((m, n)) < p).astype(float)
    for row in masks:
        if row.sum() == 0:
            row[rng.integers(n)] = 1.0
    return masks


def balanced_masks(rng, m, n, k):
    """k heads per mask, the least-used heads first (ties broken at random)."""
    counts = np.zeros(n)
    masks = np.zeros((m, n))
    for j in range(m):
        order = np.lexsort((rng.random(n), counts))
        masks[j, order[:k]] = 1.0
        counts[order[:k]] += 1
    return masks


def dataset_cases():
    rng = np.random.default_rng(20260211)
    cases = []

    # 1. Well-conditioned Gaussian design, sparse truth, noise.
    X = rng.standard_normal((50, 10))
    w = np.zeros(10)
    w[[1, 4, 7]] = [2.0, -3.0, 1.5]
    y = X @ w + 0.5 + 0.3 * rng.standard_normal(50)
    cases.append(dict(name='gaussian', X=X, y=y, alpha=0.1))

    # 2. The paper's setting: Bernoulli(p) knockout masks over N heads, a few heads matter, scores
    #    standardized, alpha = 0.01, max_iter = 5000.
    X = bernoulli_masks(rng, 100, 48, 0.08)
    score = 0.8 - 0.3 * X[:, 5] - 0.2 * X[:, 17] - 0.25 * X[:, 40] + 0.02 * rng.standard_normal(100)
    cases.append(dict(name='bernoulli-masks', X=X, y=standardize(score), alpha=0.01, max_iter=5000))

    # 3. Balanced design (exactly k heads per mask, each head used about equally often).
    X = balanced_masks(rng, 60, 64, 3)
    score = 2.0 - 0.9 * X[:, 0] - 0.6 * X[:, 33] + 0.05 * rng.standard_normal(60)
    cases.append(dict(name='balanced-masks', X=X, y=standardize(score), alpha=0.01, max_iter=5000))

    # 4. More features than samples (p > n).
    X = rng.standard_normal((30, 80))
    w = np.zeros(80)
    w[[3, 50, 79]] = [1.0, -2.0, 0.7]
    y = X @ w + 0.1 * rng.standard_normal(30)
    cases.append(dict(name='p-greater-than-n', X=X, y=y, alpha=0.05))

    # 5. Ill-conditioned: nearly collinear columns (condition number ~1e5).
    Z = rng.standard_normal((60, 4))
    A = rng.standard_normal((4, 20))
    X = Z @ A + 1e-4 * rng.standard_normal((60, 20))
    y = X[:, 0] - 2 * X[:, 3] + 0.01 * rng.standard_normal(60)
    cases.append(dict(name='ill-conditioned', X=X, y=y, alpha=0.001, max_iter=20000))

    # 6. A constant column (zero after centering) and a duplicated column.
    X = rng.standard_normal((40, 6))
    X[:, 2] = 3.0
    X[:, 5] = X[:, 1]
    y = X[:, 1] - X[:, 4] + 0.2 * rng.standard_normal(40)
    cases.append(dict(name='constant-and-duplicate-columns', X=X, y=y, alpha=0.05))

    # 7. alpha above alpha_max: every coefficient is exactly zero.
    X = rng.standard_normal((25, 5))
    y = X[:, 0] + rng.standard_normal(25)
    cases.append(dict(name='alpha-above-max', X=X, y=y, alpha=10.0))

    # 8. positive=True.
    X = rng.standard_normal((40, 8))
    y = X[:, 0] - X[:, 1] + 0.1 * rng.standard_normal(40)
    cases.append(dict(name='positive', X=X, y=y, alpha=0.02, positive=True))

    # 9. Stopped by max_iter before converging (the result is still deterministic).
    cases.append(dict(name='max-iter-stop', X=cases[4]['X'], y=cases[4]['y'], alpha=0.0005, max_iter=7))

    # 10. No intercept.
    X = rng.standard_normal((35, 7))
    y = 1.0 + X[:, 2] + 0.1 * rng.standard_normal(35)
    cases.append(dict(name='no-intercept', X=X, y=y, alpha=0.03, fit_intercept=False))
    return cases


def run_case(case):
    case = dict(case, X=short(case['X']), y=short(case['y']))
    params = dict(alpha=case['alpha'], fit_intercept=case.get('fit_intercept', True), max_iter=case.get('max_iter', 1000),
                  tol=case.get('tol', 1e-4), positive=case.get('positive', False), precompute=False, selection='cyclic')
    model = Lasso(**params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always', ConvergenceWarning)
        model.fit(case['X'], case['y'])
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    X, y = case['X'], case['y']
    return dict(
        name=case['name'],
        rows=int(X.shape[0]),
        columns=int(X.shape[1]),
        X=X.ravel().tolist(),
        y=y.tolist(),
        params=dict(alpha=params['alpha'], fitIntercept=params['fit_intercept'], maxIter=params['max_iter'], tol=params['tol'], positive=params['positive']),
        expected=dict(
            coefficients=model.coef_.tolist(),
            intercept=float(model.intercept_),
            iterations=int(model.n_iter_),
            dualGap=float(model.dual_gap_),
            r2=float(model.score(X, y)),
            converged=converged,
        ),
    )


def cv_case():
    rng = np.random.default_rng(7)
    X = bernoulli_masks(rng, 80, 24, 0.1)
    score = 1.0 - 0.5 * X[:, 3] - 0.4 * X[:, 11] + 0.1 * rng.standard_normal(80)
    y = short(standardize(score))
    model = LassoCV(cv=5, n_alphas=30, eps=1e-3, max_iter=5000, tol=1e-4, precompute=False)
    model.fit(X, y)
    return dict(
        name='lasso-cv',
        rows=int(X.shape[0]),
        columns=int(X.shape[1]),
        X=X.ravel().tolist(),
        y=y.tolist(),
        params=dict(folds=5, nAlphas=30, eps=1e-3, maxIter=5000, tol=1e-4),
        expected=dict(
            alphas=model.alphas_.tolist(),
            msePath=model.mse_path_.tolist(),
            alpha=float(model.alpha_),
            coefficients=model.coef_.tolist(),
            intercept=float(model.intercept_),
        ),
    )


def main():
    out = dict(
        generator='tools/knockout/lasso_reference.py',
        sklearn=sklearn.__version__,
        numpy=np.__version__,
        objective='1/(2n) ||y - Xw - b||^2 + alpha ||w||_1 (sklearn.linear_model.Lasso, precompute=False, cyclic)',
        cases=[run_case(c) for c in dataset_cases()],
        cv=cv_case(),
    )
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, 'w') as f:
        json.dump(out, f, separators=(',', ':'))
        f.write('\n')
    print(f'wrote {os.path.relpath(OUT)} ({os.path.getsize(OUT)} bytes)')


if __name__ == '__main__':
    main()
