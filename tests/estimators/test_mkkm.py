"""MKKM and MKKM-MR: their weight steps, the simplex QP, and each method against a plain dense
reference written here (full eigendecomposition, explicit traces, the QP by enumerating every
support), then the scaled backends against the exact one."""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from mkrk_dask import MKKM, MKKMMR, MKKMRK, lambda_search
from mkrk_dask.qp import SimplexQP, simplex_gap
from mkrk_dask.weight_steps import AverageResidualStep, MatrixRegularizedStep, mkkm_weights

# --------------------------------------------------------------------------- plain reference


def _random_kernels(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    """m PSD kernels with unit diagonal from random features of different ranks."""
    out = []
    for p in range(m):
        Z = rng.standard_normal((n, 5 + 3 * p))
        K = Z @ Z.T
        s = np.sqrt(np.diag(K))
        out.append(K / np.outer(s, s))
    return np.array(out)


def _simplex_qp_by_supports(Q: np.ndarray) -> np.ndarray:
    """min w^T Q w on the simplex by trying every support: solve its bordered KKT system and
    keep the feasible points whose gradient is lowest on the support (exact for small m)."""
    m = Q.shape[0]
    best, best_f = None, np.inf
    for size in range(1, m + 1):
        for S in itertools.combinations(range(m), size):
            S = list(S)
            A = np.zeros((size + 1, size + 1))
            A[:size, :size] = 2 * Q[np.ix_(S, S)]
            A[:size, size] = 1
            A[size, :size] = 1
            try:
                sol = np.linalg.solve(A, np.r_[np.zeros(size), 1.0])
            except np.linalg.LinAlgError:
                continue
            w = np.zeros(m)
            w[S] = sol[:size]
            if w.min() < -1e-12:
                continue
            f = w @ Q @ w
            if f < best_f:
                best, best_f = np.maximum(w, 0) / np.maximum(w, 0).sum(), f
    return best


def _reference(kernels: np.ndarray, k: int, lam: float | None, tol: float = 1e-5,
               max_iter: int = 100) -> tuple[np.ndarray, list[float]]:
    """MKKM (lam None) or MKKM-MR written out: Python loops, full eigh, explicit traces."""
    m, n, _ = kernels.shape
    M = np.array([[np.trace(kernels[p] @ kernels[q]) for q in range(m)] for p in range(m)])
    w = np.full(m, 1.0 / m)
    history: list[float] = []
    for _ in range(max_iter):
        Kw = sum(w[p] ** 2 * kernels[p] for p in range(m))
        vals, vecs = np.linalg.eigh(Kw)
        H = vecs[:, -k:]
        P = np.eye(n) - H @ H.T
        d = np.array([np.trace(kernels[p] @ P) for p in range(m)])
        if lam is None:
            w = (1 / d) / np.sum(1 / d)
            f = float(np.sum(w**2 * d))
        else:
            Q = np.diag(d) + lam / 2 * M
            w = _simplex_qp_by_supports(Q)
            f = float(w @ Q @ w)
        history.append(f)
        if len(history) > 1 and abs(history[-1] - history[-2]) < tol:
            break
    return w, history


@pytest.mark.parametrize("lam", [None, 2.0**-10, 2.0**-4, 1.0])
def test_exact_fit_matches_the_plain_reference(lam):
    kernels = _random_kernels(np.random.default_rng(3), 4, 60)
    if lam is None:
        model = MKKM(3, kernels="precomputed", solver="exact", random_state=0)
    else:
        model = MKKMMR(3, kernels="precomputed", solver="exact", lam=lam, lam_scaling="none",
                       random_state=0)
    model.fit(kernels)
    w_ref, history = _reference(kernels, 3, lam)
    assert model.n_iter_ == len(history)
    np.testing.assert_allclose(model.objective_history_, history, rtol=1e-8)
    np.testing.assert_allclose(model.weights_, w_ref, atol=1e-6)
    # the objective never increases
    assert np.all(np.diff(model.objective_history_) <= 1e-10 * abs(history[0]))


def test_mkkm_weights_closed_form_and_zero_residuals():
    d = np.array([1.0, 2.0, 4.0])
    w = mkkm_weights(d)
    np.testing.assert_allclose(w, np.array([4, 2, 1]) / 7)
    # optimality: the gradient 2 w_p d_p is the same on every kernel
    np.testing.assert_allclose(w * d, (w * d)[0])
    np.testing.assert_allclose(mkkm_weights(np.array([0.0, 3.0, 0.0])), [0.5, 0, 0.5])
    update = AverageResidualStep().update(d)
    assert update.objective == pytest.approx(np.sum(w**2 * d)) and update.relative_gap == 0


# --------------------------------------------------------------------------- the simplex QP


def test_simplex_qp_matches_support_enumeration_and_its_certificate():
    rng = np.random.default_rng(0)
    for trial in range(60):
        m = int(rng.integers(2, 7))
        A = rng.standard_normal((m, int(rng.integers(1, m + 2))))
        Q = A @ A.T + np.diag(rng.uniform(0.01, 2, m))
        if trial % 3 == 0:
            Q += 1e6  # a huge constant, as M = tr(K_p K_q) of alike kernels gives
        sol = SimplexQP().solve(Q)
        ref = _simplex_qp_by_supports(Q)
        assert sol.certified
        assert sol.objective == pytest.approx(ref @ Q @ ref, rel=1e-9)
        # optimality conditions: feasible, gradient equal on the support and not lower off it
        w = sol.w
        assert w.min() >= 0 and w.sum() == pytest.approx(1, abs=1e-12)
        g = 2 * Q @ w
        level = g[w > 1e-9].mean()
        assert np.all(np.abs(g[w > 1e-9] - level) <= 1e-7 * np.abs(Q).max())
        assert np.all(g >= level - 1e-7 * np.abs(Q).max())
        f, gap = simplex_gap(w, Q)
        assert gap <= 1e-8 * f + 1e-9 * np.abs(Q).max()


def test_simplex_qp_with_a_zero_optimum_and_bad_input():
    # the origin is inside the convex hull of the rows of a rank-1 factor: f* = 0
    a = np.array([[1.0], [-1.0], [2.0]])
    sol = SimplexQP().solve(a @ a.T)
    assert sol.certified and sol.objective == pytest.approx(0, abs=1e-12)
    with pytest.raises(ValueError, match="square"):
        SimplexQP().solve(np.ones((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        SimplexQP().solve(np.array([[1.0, np.nan], [np.nan, 1.0]]))


def test_matrix_regularized_step_reports_the_objective_it_minimised():
    rng = np.random.default_rng(1)
    M = _random_kernels(rng, 3, 20).reshape(3, -1)
    M = M @ M.T
    d = np.array([3.0, 1.0, 2.0])
    update = MatrixRegularizedStep(M, 0.5).update(d)
    w = update.weights
    assert update.objective == pytest.approx(np.sum(w**2 * d) + 0.25 * w @ M @ w, rel=1e-12)
    assert update.certified and update.relative_gap <= 1e-8


# --------------------------------------------------------------------------- the estimators


#: how many rows of scikit-learn's digits the shared ``digits`` fixture gives (conftest.py)
DIGITS_ROWS = 300


@pytest.mark.parametrize("solver", ["blockwise", "nystrom"])
@pytest.mark.parametrize("cls", [MKKM, MKKMMR])
def test_scaled_backends_agree_with_exact(client, digits, solver, cls):
    X, _ = digits
    exact = cls.paper(10, random_state=0).fit(X)
    scaled = cls.paper(10, random_state=0, solver=solver, scheduler=client,
                       backend_options={"n_landmarks": 300} if solver == "nystrom" else None
                       ).fit(X)
    np.testing.assert_allclose(scaled.weights_, exact.weights_, atol=1e-6)
    assert adjusted_rand_score(exact.labels_, scaled.labels_) > 0.99
    # and predict maps the training rows to their labels on every backend
    np.testing.assert_array_equal(scaled.predict(X), scaled.labels_)


def test_mkkm_mr_lambda_search_reuses_m_and_rejects_mkkm(digits):
    X, y = digits
    lams = [2.0**-15, 1.0, 2.0**15]
    results = lambda_search(MKKMMR.paper(10), X, lams, y, n_repeats=2)
    for item in results:
        single = MKKMMR.paper(10, lam=item.lam, random_state=0).fit(X)
        np.testing.assert_allclose(item.weights, single.weights_, atol=1e-9)
        assert item.representation is None and item.max_qp_relative_gap <= 1e-8
    # a large lambda spreads weight over the least alike kernels only: fewer kernels selected
    assert results[-1].n_selected < results[0].n_selected
    with pytest.raises(ValueError, match="MKKM has no lambda"):
        lambda_search(MKKM.paper(10), X, [1.0])


def test_defaults_run_without_warnings_and_predict(digits):
    X, y = digits
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for cls in (MKKM, MKKMMR):
            model = cls(10, random_state=0).fit(X)
            assert model.weights_.sum() == pytest.approx(1)
            np.testing.assert_array_equal(model.predict(X), model.labels_)
            assert model.summary().startswith(model.method)


@pytest.mark.parametrize("params, message", [
    ({"lam": -1.0}, "lam"),
    ({"lam_scaling": "bad"}, "lam_scaling"),
    ({"qp_gap_tol": 0.0}, "qp_gap_tol"),
])
def test_bad_mkkm_mr_options_are_refused_before_any_kernel(digits, params, message):
    X, _ = digits
    with pytest.raises(ValueError, match=message) as info:
        MKKMMR(10, **params).fit(X)
    assert "\n" not in str(info.value)


def test_paper_settings_differ_by_method():
    assert MKKMMR.paper(5).get_params()["lam_scaling"] == "none"
    assert MKKM.paper(5).get_params()["kernels"] == "paper"
    assert MKKMRK.paper(5).get_params()["dissimilarity"] == "fip"


# --------------------------------------------------------------------------- the CLI


def test_cli_fit_and_search_take_the_method(digits_npz, tmp_path, capsys):
    from mkrk_dask.cli import main

    out = tmp_path / "mr"
    assert main(["fit", str(digits_npz), "--method", "MKKM-MR", "--paper", "--lam", "2^-5",
                 "--out", str(out), "--n-init", "3", "-q"]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["method"] == "MKKM-MR" and result["lam"] == 2.0**-5
    assert result["Y"] is None and not (out / "Y.npy").exists()
    assert max(result["qp_relative_gaps"]) <= 1e-8
    assert main(["fit", str(digits_npz), "--method", "MKKM", "--n-init", "3", "-q"]) == 0
    assert "ACC" in capsys.readouterr().out
    # options of another method are refused in one line, before any work
    assert main(["fit", str(digits_npz), "--method", "MKKM", "--lam", "1", "-q"]) == 2
    assert "--lam does not apply to --method MKKM" in capsys.readouterr().err
    assert main(["fit", str(digits_npz), "--method", "MKKM-MR", "--dissimilarity", "sfn",
                 "-q"]) == 2
    results = tmp_path / "search.json"
    assert main(["search", str(digits_npz), "--method", "MKKM-MR", "--paper", "--lams",
                 "2^-15,2^0", "--repeats", "2", "--n-init", "2", "--out", str(results),
                 "-q"]) == 0
    entry = json.loads(results.read_text())["datasets"][0]
    assert entry["method"] == "MKKM-MR" and len(entry["MKKM-MR"]["per_lambda"]) == 2
    assert main(["search", str(digits_npz), "--method", "MKKM", "--out",
                 str(tmp_path / "x.json"), "-q"]) == 2
    assert "--method MKKM" in capsys.readouterr().err.splitlines()[-1]
