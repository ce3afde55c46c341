"""The one alternating loop (mkrk_dask.loop) against plain dense computations."""

from __future__ import annotations

import numpy as np
import pytest

from mkrk_dask.backends.exact import ExactBackend
from mkrk_dask.kernels import kernel_matrices, paper_kernels, resolve_kernels
from mkrk_dask.loop import (
    SELECTION_THRESHOLD,
    alternate,
    effective_lambda,
    selected_kernels,
    solve,
)
from mkrk_dask.weight_steps import WeightStep, WeightUpdate


@pytest.fixture(scope="module")
def backend():
    X = np.random.default_rng(2).normal(size=(60, 4))
    specs = resolve_kernels(paper_kernels()[:6], [5.0])
    return ExactBackend(kernel_matrices([X], specs))


class FixedStep(WeightStep):
    """Always the same weights; objective sum_p w_p^2 d_p."""

    name = "fixed"

    def __init__(self, weights):
        self.weights = np.asarray(weights, dtype=float)
        self.seen = []

    def update(self, residuals):
        self.seen.append(np.array(residuals))
        return WeightUpdate(self.weights, float(self.weights**2 @ residuals))


def test_alternate_runs_any_weight_step_against_dense_definitions(backend):
    K = backend.kernels
    w = np.array([0.5, 0.1, 0.1, 0.1, 0.1, 0.1])
    step = FixedStep(w)
    result = alternate(backend, 3, step, tol=1e-12, max_iter=5)
    # First H-step with equal weights, then the fixed ones: the residuals of the last H. The
    # weights are then those of the last H-step, a fixed point: the loop stops there.
    Kw = np.tensordot(w**2, K, axes=1)
    H = np.linalg.eigh(Kw)[1][:, -3:]
    d = np.trace(K, axis1=1, axis2=2) - np.einsum("ik,pij,jk->p", H, K, H)
    np.testing.assert_allclose(step.seen[-1], d, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(result.weights, w)
    assert result.representation is None and result.converged and result.n_iter == 2


def test_solve_is_mkkm_rk_with_certified_steps_and_monotone_objective(backend):
    result = solve(backend, 3, 2.0**-4, tol=1e-9, tol_mode="relative")
    Y = result.representation
    np.testing.assert_allclose(Y.sum(axis=0), 1.0, atol=1e-9)
    np.testing.assert_allclose(result.weights, Y.sum(axis=1) / Y.shape[0])
    assert result.qp_certified and np.all(result.qp_relative_gaps <= 1e-8)
    assert np.all(np.diff(result.objective_history) <= 1e-9 * result.objective_history[0])


def test_effective_lambda_and_selection():
    traces, C = np.array([2.0, 4.0]), np.array([[1.0, -3.0], [3.0, 1.0]])
    assert effective_lambda(0.5, "none", traces, C) == 0.5
    assert effective_lambda(0.5, "normalized", traces, C) == pytest.approx(0.5 * 3.0 / 2.0)
    with pytest.raises(ValueError, match="lam_scaling must be one of"):
        effective_lambda(0.5, "log", traces, C)
    w = np.array([0.5, SELECTION_THRESHOLD, SELECTION_THRESHOLD / 2, 0.0])
    assert selected_kernels(w).tolist() == [0, 1]


def test_solve_rejects_bad_settings_in_one_line(backend):
    for kwargs, message in [(dict(tol_mode="fast"), "tol_mode must be one of"),
                            (dict(lam_scaling="x"), "lam_scaling must be one of")]:
        with pytest.raises(ValueError, match=message):
            solve(backend, 3, 1.0, **kwargs)
    with pytest.raises(ValueError, match="lam must be a finite number >= 0"):
        solve(backend, 3, -1.0)


def test_an_indefinite_kernel_is_named():
    K = np.stack([np.eye(20), -np.eye(20)])
    with pytest.raises(ValueError, match="kernel 1 has a negative residual"):
        solve(ExactBackend(K), 2, 0.0)
