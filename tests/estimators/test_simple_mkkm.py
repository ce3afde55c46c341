"""SimpleMKKM against an independent dense reference: full eigendecompositions and a plain
projected gradient with a small fixed step, written here from the definition
``min_{w in simplex} J(w)``, ``J(w) = sum of the k largest eigenvalues of sum_p w_p^2 K_p``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits

from mkrk_dask import SimpleMKKM
from mkrk_dask.datasets import load_dataset
from mkrk_dask.weight_steps import ReducedGradientStep, optimality_gap

rng = np.random.default_rng(5)
K_CLUSTERS = 3


def _kernels() -> np.ndarray:
    """Five PSD kernels of unit diagonal on 3 noisy clusters in 4 dimensions."""
    X = np.vstack([rng.normal(c, 0.9, size=(22, 4)) for c in (0.0, 1.5, 3.0)])
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    med = np.median(sq[sq > 0])
    kernels = [np.exp(-sq / (s * med)) for s in (0.25, 1.0, 4.0)]
    lin = X @ X.T + 1.0
    kernels += [lin, (lin / lin.max()) ** 2]
    K = np.stack(kernels)
    d = np.sqrt(np.einsum("pii->pi", K))
    return K / d[:, :, None] / d[:, None, :]


KERNELS = _kernels()


def _value(K: np.ndarray, w: np.ndarray, k: int) -> tuple[float, np.ndarray]:
    """J(w) and tr(H^T K_p H) from a full eigendecomposition."""
    values, vectors = np.linalg.eigh(np.tensordot(w**2, K, axes=1))
    H = vectors[:, -k:]
    return float(values[-k:].sum()), np.einsum("ik,pij,jk->p", H, K, H)


def _project(v: np.ndarray) -> np.ndarray:
    """Euclidean projection onto the simplex (sort-based)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    rho = np.flatnonzero(u - css / np.arange(1, len(v) + 1) > 0)[-1]
    return np.maximum(v - css[rho] / (rho + 1.0), 0.0)


def _reference(K: np.ndarray, k: int) -> tuple[float, np.ndarray]:
    m = K.shape[0]
    w = np.full(m, 1.0 / m)
    _, q = _value(K, w, k)
    step = 0.2 / (2.0 * q.max())
    for _ in range(200_000):
        _, q = _value(K, w, k)
        new = _project(w - step * 2.0 * w * q)
        if np.abs(new - w).max() < 1e-14:
            break
        w = new
    return _value(K, w, k)[0], w


@pytest.fixture(scope="module")
def reference():
    return _reference(KERNELS, K_CLUSTERS)


def _fit(**params) -> SimpleMKKM:
    settings = dict(kernels="precomputed", normalize=False, solver="exact", gap_tol=1e-8,
                    tol=1e-15, max_iter=2000, final_clustering="kmeans", random_state=0)
    settings.update(params)
    return SimpleMKKM(K_CLUSTERS, **settings).fit(KERNELS)


@pytest.mark.parametrize("direction", ["scaled", "reduced"])
def test_exact_matches_the_dense_reference(reference, direction):
    J_ref, w_ref = reference
    model = _fit(direction=direction)
    assert model.objective_history_[-1] == pytest.approx(J_ref, rel=1e-6)
    np.testing.assert_allclose(model.weights_, w_ref, atol=1e-4)
    assert model.converged_


@pytest.mark.parametrize("direction", ["scaled", "reduced"])
def test_every_step_is_certified_and_the_objective_never_rises(reference, direction):
    J_ref, _ = reference
    model = _fit(direction=direction, gap_tol=1e-6)
    history, gaps = model.objective_history_, model.relative_gaps_
    assert len(gaps) == len(history) == model.n_iter_
    assert np.all(np.diff(history) <= 0)
    # each step's gap is a true bound: J after the step is at most that share above J*
    assert np.all(history - J_ref <= gaps * history + 1e-12 * J_ref)
    assert np.all(gaps >= 0)
    assert model.optimality_gap_ == gaps[-1] <= 1e-6


def test_the_returned_weights_satisfy_the_optimality_conditions():
    # J is flat to second order at its minimum: a gap of 1e-7 is a change of J in its 16th
    # digit, about what float64 can still see
    model = _fit(gap_tol=1e-7)
    assert model.converged_ and model.optimality_gap_ <= 1e-7
    w = model.weights_
    J, q = _value(KERNELS, w, K_CLUSTERS)
    g = 2.0 * w * q
    # stationarity on the simplex: every weighted kernel has the same partial derivative
    # (the multiplier g.w = 2J), none below it
    assert np.abs(g - g @ w).max() <= 1e-6 * J
    assert model.optimality_gap_ == pytest.approx(optimality_gap(w, q), abs=1e-9)
    assert model.objective_history_[-1] == pytest.approx(J, rel=1e-12)


def test_the_certificate_is_large_away_from_the_optimum(reference):
    # a check that can fail: at equal weights the step is not optimal, and the gap says so
    m = KERNELS.shape[0]
    w = np.full(m, 1.0 / m)
    J, q = _value(KERNELS, w, K_CLUSTERS)
    J_ref, _ = reference
    assert optimality_gap(w, q) * J >= J - J_ref > 1e-3 * J


def test_one_step_never_rises_and_reuses_its_h_step():
    """The weight step alone, on a dense evaluator: the returned H is at the returned weights."""
    calls = []

    def evaluate(w, warm):
        calls.append(np.array(w))
        return ("H", w.copy()), _value(KERNELS, w, K_CLUSTERS)[1]

    traces = np.einsum("pii->p", KERNELS)
    for direction in ("scaled", "reduced"):
        step = ReducedGradientStep(evaluate, traces, direction=direction)
        w = step.initial_weights(KERNELS.shape[0])
        J0, q0 = _value(KERNELS, w, K_CLUSTERS)
        update = step.advance(traces - q0, None)
        assert update.objective < J0
        assert update.top[1] is not None and np.array_equal(update.top[1], update.weights)
        assert update.objective == pytest.approx(_value(KERNELS, update.weights,
                                                        K_CLUSTERS)[0], rel=1e-12)
        assert step.evaluations == len(calls)
        calls.clear()


def test_the_loop_reuses_the_line_search_h_step():
    model = _fit(gap_tol=1e-6)
    # the loop's first H-step, then only the line searches' (none made twice)
    assert model.n_h_steps_ >= model.n_iter_ + 1
    scaled_steps = model.n_h_steps_
    reduced = _fit(gap_tol=1e-6, direction="reduced")
    assert reduced.n_h_steps_ > scaled_steps


def _digits() -> np.ndarray:
    X, _ = load_digits(return_X_y=True)
    return X[:600]


def _jaffe(require_dataset, data_dir) -> np.ndarray:
    require_dataset("jaffe")
    return load_dataset("jaffe", data_dir).X


@pytest.mark.parametrize("name", ["digits", "jaffe"])
def test_nystrom_agrees_with_exact_on_paper_sized_sets(client, name, request):
    if name == "digits":
        X, k = _digits(), 10
    else:
        X, k = _jaffe(request.getfixturevalue("require_dataset"),
                      request.getfixturevalue("data_dir")), 10
    common = dict(kernels="paper", random_state=0, final_clustering="kmeans", gap_tol=1e-6)
    exact = SimpleMKKM(k, solver="exact", **common).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the missed-trace warning of the wide kernels
        nystrom = SimpleMKKM(k, solver="nystrom", scheduler=client, **common).fit(X)
    assert np.abs(nystrom.weights_ - exact.weights_).max() <= 0.02
    # float32 factors know J to about 1e-7: the line search stops finding lower points near a
    # gap of 1e-4 (J is flat to second order there), and the certificate says so honestly
    assert nystrom.optimality_gap_ <= 1e-3 and np.all(np.diff(nystrom.objective_history_) <= 0)


def test_blockwise_matches_exact(client, tmp_path):
    X = _digits()[:200]
    common = dict(kernels="paper", random_state=0, final_clustering="kmeans", gap_tol=1e-6)
    exact = SimpleMKKM(10, solver="exact", **common).fit(X)
    blockwise = SimpleMKKM(10, solver="blockwise", scheduler=client, store=tmp_path / "s.zarr",
                           **common, backend_options={"chunk_size": 100}).fit(X)
    np.testing.assert_allclose(blockwise.weights_, exact.weights_, atol=1e-7)
    assert blockwise.objective_history_[-1] == pytest.approx(exact.objective_history_[-1],
                                                             rel=1e-8)
    np.testing.assert_array_equal(blockwise.labels_, exact.labels_)


def test_predict_summary_and_paper_settings():
    X = _digits()[:120]
    # the authors' unit-length steps take many iterations: 15 of them show the settings
    model = SimpleMKKM.paper(10, random_state=0, max_iter=15).fit(X)
    assert model.get_params()["direction"] == "reduced"
    assert model.solver_ == "exact" and model.final_step_ == "spectral"
    assert np.all(np.diff(model.objective_history_) <= 0)
    np.testing.assert_array_equal(model.predict(X[:50]), model.labels_[:50])
    text = model.summary()
    # the certificate is a diagnostic: summary(detail=True) (the command line's -v) shows it
    assert "SimpleMKKM: 12 kernels" in text and "optimality gap" not in text
    assert "certified relative optimality gap" in model.summary(detail=True)


@pytest.mark.parametrize("bad, message", [
    ({"direction": "newton"}, "direction"),
    ({"gap_tol": 0.0}, "gap_tol"),
    ({"line_search_tol": 1.5}, "line_search_tol"),
    ({"max_step": -0.1}, "max_step")])
def test_bad_parameters_are_named(bad, message):
    with pytest.raises(ValueError, match=message):
        SimpleMKKM(3, **bad).fit(_digits()[:30])
