"""Small data the tests share, as plain functions (for use at import time, in a test or in a
fixture of ``conftest.py``): the first rows of scikit-learn's digits, and Gaussian blobs drawn
from NumPy's generator."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits


def first_digits(n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n_rows`` rows of scikit-learn's digits (8 x 8 pixels, 10 classes): X, y."""
    X, y = load_digits(return_X_y=True)
    return X[:n_rows], y[:n_rows]


def gaussian_blobs(n: int, *, d: int, k: int, seed: int,
                   spread: float) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows in ``d`` columns around ``k`` centres drawn from N(0, spread^2), each row its
    centre plus N(0, 1) noise: X, y (the centre of each row). The draws, in order: the centres,
    the labels, the noise, from ``np.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=spread, size=(k, d))
    y = rng.integers(k, size=n)
    return centres[y] + rng.normal(size=(n, d)), y
