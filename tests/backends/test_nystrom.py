"""The Nystrom backend against the exact one, on real Zarr stores and a real LocalCluster."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from mkrk_dask import MKKMRK, NystromApproximationWarning
from mkrk_dask.auto import choose_solver
from mkrk_dask.backends.exact import ExactBackend
from mkrk_dask.backends.nystrom import (
    LOCAL_MAX_PER_ROW,
    MISSED_FRACTION_WARNING,
    NystromBackend,
)
from mkrk_dask.datasets import load_dataset
from mkrk_dask.kernels import KernelSpec, max_pairwise_distance
from mkrk_dask.loop import solve
from mkrk_dask.metrics import normalized_mutual_info
from mkrk_dask.store import StoreError
from mkrk_dask.synthetic import make_multiview_blobs

LAM = 2.0**-10

# Few landmarks on purpose: some kernels get no local part, which the library says with a
# NystromApproximationWarning; expected in the tests marked so, where it is not printed.
EXPECTS_NO_LOCAL_PART = pytest.mark.filterwarnings(
    "ignore:.*get no local part:mkrk_dask.exceptions.NystromApproximationWarning")


@pytest.fixture(scope="module")
def small():
    views, y, _ = make_multiview_blobs(160, 4, n_informative=1, n_noise=1, n_redundant=0,
                                       n_features=5, random_state=0)
    return views, y


def multiview_specs():
    return [KernelSpec("linear", view=0), KernelSpec("polynomial", a=1, b=2, view=0),
            KernelSpec("gaussian", c=0.1, view=0), KernelSpec("gaussian", c=1.0, view=0),
            KernelSpec("gaussian", c=1.0, view=1), KernelSpec("polynomial", a=1, b=2, view=1)]


@pytest.fixture(scope="module")
def full_rank(client, small, tmp_path_factory):
    """r = n landmarks: the Nystrom quantities are the exact ones."""
    views, _ = small
    specs = multiview_specs()
    exact = ExactBackend.from_views(views, specs)
    nys = NystromBackend.from_views(views, specs, n_landmarks=len(views[0]), scheduler=client,
                                    store=tmp_path_factory.mktemp("s") / "f.zarr",
                                    chunk_size=48, random_state=0, rel_floor=1e-14)
    yield exact, nys
    nys.close()


def test_full_rank_quantities_equal_exact(full_rank):
    exact, nys = full_rank
    n = exact.n_samples
    np.testing.assert_array_equal(nys.traces(), np.full(6, float(n)))
    for measure in ("fip", "sfn"):
        Ce, Cn = exact.dissimilarity(measure), nys.dissimilarity(measure)
        np.testing.assert_allclose(Cn, Ce, rtol=1e-8, atol=1e-8 * np.abs(Ce).max())
    w = np.random.default_rng(0).dirichlet(np.ones(6))
    te, tn = exact.top_k(w, 4), nys.top_k(w, 4)
    np.testing.assert_allclose(tn.eigenvalues, te.eigenvalues, rtol=1e-8)
    np.testing.assert_allclose(nys.quad_forms(tn), exact.quad_forms(te), rtol=1e-8)
    H = nys.embedding(tn)
    np.testing.assert_allclose(H.T @ H, np.eye(4), atol=1e-8)
    np.testing.assert_allclose(H @ H.T, te.basis @ te.basis.T, atol=1e-8)
    np.testing.assert_allclose(nys.residual_fractions(), 0.0, atol=1e-8)
    re_, rn = solve(exact, 4, LAM), solve(nys, 4, LAM)
    np.testing.assert_allclose(rn.objective_history, re_.objective_history, rtol=1e-8)
    np.testing.assert_allclose(rn.weights, re_.weights, atol=1e-6)


def test_gram_quad_forms_equal_explicit_factor_products(client, small, tmp_path):
    views, _ = small
    specs = multiview_specs()
    nys = NystromBackend.from_views(views, specs, n_landmarks=[30, 20, 25, 30, 15, 40],
                                    scheduler=client, store=tmp_path / "f.zarr",
                                    chunk_size=32, random_state=1, exact_dissimilarity_max_n=0,
                                    store_factors=True)
    try:
        F = np.asarray(nys.factors_array[...])
        o = nys.offsets
        assert F.shape == (160, o[-1]) and np.isfinite(F).all()
        np.testing.assert_allclose(nys.gram, F.T @ F, rtol=1e-10, atol=1e-10)
        w = np.array([0.3, 0.0, 0.2, 0.1, 0.25, 0.15])
        top = nys.top_k(w, 4)
        H = nys.embedding(top)
        np.testing.assert_allclose(H.T @ H, np.eye(4), atol=1e-8)
        explicit = [np.trace(H.T @ F[:, o[p]:o[p + 1]] @ F[:, o[p]:o[p + 1]].T @ H)
                    for p in range(6)]
        np.testing.assert_allclose(nys.quad_forms(top), explicit, rtol=1e-9)
        # The eigenvalues are those of K_w = sum w_p^2 F_p F_p^T.
        Kw = sum(w[p] ** 2 * F[:, o[p]:o[p + 1]] @ F[:, o[p]:o[p + 1]].T for p in range(6))
        np.testing.assert_allclose(top.eigenvalues, np.linalg.eigvalsh(Kw)[::-1][:4],
                                   rtol=1e-9)
        # fip with and without the exact-diagonal correction.
        G = nys.gram
        plain = np.array([[np.sum(G[o[p]:o[p + 1], o[q]:o[q + 1]] ** 2) for q in range(6)]
                          for p in range(6)])
        s = np.stack([np.sum(F[:, o[p]:o[p + 1]] ** 2, axis=1) for p in range(6)], axis=1)
        corrected = plain + len(F) - s.T @ s  # exact diagonal of every kernel is 1
        np.testing.assert_allclose(nys.dissimilarity("fip"), corrected, rtol=1e-10)
        nys.diagonal_correction, nys._kernel_gram = False, None
        np.testing.assert_allclose(nys.dissimilarity("fip"), plain, rtol=1e-10)
        # What the factors miss: of every kernel's trace (n), and of the trace of K_w.
        captured = np.array([np.sum(F[:, o[p]:o[p + 1]] ** 2) for p in range(6)])
        np.testing.assert_allclose(nys.residual_fractions(), 1 - captured / len(F), atol=1e-12)
        assert nys.info["residual_fraction"] == pytest.approx(1 - captured / len(F), abs=1e-12)
        missed = np.sum(w**2 * (len(F) - captured)) / np.sum(w**2 * len(F))
        assert nys.missed_fraction(w) == pytest.approx(missed, rel=1e-10)
    finally:
        nys.close()


def test_duplicated_landmarks_give_finite_factors(client):
    rng = np.random.default_rng(0)
    X = np.repeat(rng.normal(size=(40, 3)), 2, axis=0)  # every row twice
    specs = [KernelSpec("gaussian", c=0.5), KernelSpec("polynomial", a=1, b=2)]
    exact = ExactBackend.from_views([X], specs)
    nys = NystromBackend.from_views([X], specs, n_landmarks=80, landmarks="uniform",
                                    scheduler=client, random_state=0,
                                    exact_dissimilarity_max_n=0)
    try:
        assert np.isfinite(nys.gram).all()
        assert nys.model.ranks.max() <= 40  # the duplicates' directions were dropped
        np.testing.assert_allclose(nys.dissimilarity("fip"), exact.dissimilarity("fip"),
                                   rtol=1e-7)
        res = solve(nys, 3, LAM)
        assert np.isfinite(res.weights).all()
    finally:
        nys.close()


@EXPECTS_NO_LOCAL_PART
def test_exact_dissimilarity_up_to_the_threshold(client, small, tmp_path):
    """Few landmarks: C is nevertheless the exact backend's when n <= the threshold, for
    numpy and dask inputs, and survives the store's reuse; above the threshold it is the
    Nystrom estimate (a different matrix)."""
    views, _ = small
    specs = multiview_specs()
    exact = ExactBackend.from_views(views, specs)
    Ce = exact.dissimilarity("fip")
    path = tmp_path / "f.zarr"
    for inp in (views, [da.from_array(v, chunks=(37, 5)) for v in views]):
        nys = NystromBackend.from_views(inp, specs, n_landmarks=12, scheduler=client,
                                        random_state=0, store=path, overwrite=True)
        try:
            assert nys.info["dissimilarity_source"] == "exact"
            np.testing.assert_allclose(nys.dissimilarity("fip"), Ce, rtol=1e-12,
                                       atol=1e-12 * np.abs(Ce).max())
            np.testing.assert_allclose(nys.dissimilarity("sfn"), exact.dissimilarity("sfn"),
                                       rtol=1e-10, atol=1e-12)
        finally:
            nys.close()
    again = NystromBackend.from_views(views, specs, n_landmarks=12, scheduler=client,
                                      random_state=0, store=path)
    try:
        assert again.info["reused_store"] and again.info["dissimilarity_source"] == "exact"
        np.testing.assert_allclose(again.dissimilarity("fip"), Ce, rtol=1e-12,
                                   atol=1e-12 * np.abs(Ce).max())
    finally:
        again.close()
    estimate = NystromBackend.from_views(views, specs, n_landmarks=12, scheduler=client,
                                         random_state=0, exact_dissimilarity_max_n=159)
    try:
        assert estimate.info["dissimilarity_source"] == "nystrom"
        assert np.abs(estimate.dissimilarity("fip") - Ce).max() > 1e-6 * np.abs(Ce).max()
        # The local part comes from the same block-pair pass: none above the threshold.
        assert estimate.local is None and estimate.info["local_part"] is None
    finally:
        estimate.close()


def _dense_local_reference(kernels, F, offsets, threshold):
    """``S_p``: the entries of ``K_p - F_p F_p^T`` of magnitude >= threshold, densely."""
    out = []
    for p, K in enumerate(kernels):
        Fp = F[:, offsets[p]:offsets[p + 1]]
        residual = K - Fp @ Fp.T
        out.append(np.where(np.abs(residual) >= threshold, residual, 0.0))
    return out


@EXPECTS_NO_LOCAL_PART
# dense top-k below 500 rows, ARPACK (block Krylov for 40 pairs) above
@pytest.mark.parametrize("n", [160, 700])
def test_local_part_matches_a_dense_computation(client, tmp_path, n):
    views, _, _ = make_multiview_blobs(n, 4, n_informative=1, n_noise=1, n_redundant=0,
                                       n_features=5, random_state=0)
    specs = multiview_specs() + [KernelSpec("gaussian", c=0.03, view=1)]
    m = len(specs)
    exact = ExactBackend.from_views(views, specs)
    nys = NystromBackend.from_views(views, specs, n_landmarks=40, scheduler=client,
                                    random_state=0, store=tmp_path / "f.zarr", chunk_size=64)
    try:
        F = np.asarray(nys.factors_array[...])
        o = nys.offsets
        reference = _dense_local_reference(exact.kernels, F, o, 0.01)
        assert nys.info["local_part"]["threshold"] == 0.01
        # A kernel with more than LOCAL_MAX_PER_ROW entries per row gets no local part.
        for p, ref in enumerate(reference):
            left_out = np.count_nonzero(ref) > LOCAL_MAX_PER_ROW * n
            assert (specs[p].name in nys.info["local_part"]["left_out"]) == left_out
            if left_out:
                reference[p] = np.zeros_like(ref)
        assert sum(S.nnz for S in nys.local.kernels) > n  # more than the diagonal
        for S, ref in zip(nys.local.kernels, reference, strict=True):
            np.testing.assert_allclose(S.toarray(), ref, atol=1e-12)
        w = np.array([0.3, 0.0, 0.2, 0.1, 0.15, 0.1, 0.15])
        Kw = sum(w[p] ** 2 * (F[:, o[p]:o[p + 1]] @ F[:, o[p]:o[p + 1]].T + reference[p])
                 for p in range(m))
        top = nys.top_k(w, 4)
        np.testing.assert_allclose(top.eigenvalues, np.linalg.eigvalsh(Kw)[::-1][:4],
                                   rtol=1e-9)
        H = nys.embedding(top)
        np.testing.assert_allclose(H.T @ H, np.eye(4), atol=1e-8)
        np.testing.assert_allclose(Kw @ H, H * top.eigenvalues, atol=1e-8 * top.eigenvalues[0])
        # Many eigenpairs (the final step's ranks) take block Krylov products, not ARPACK.
        many = nys.top_k(w, 40)
        scale = many.eigenvalues[0]
        np.testing.assert_allclose(many.eigenvalues, np.linalg.eigvalsh(Kw)[::-1][:40],
                                   rtol=0, atol=1e-9 * scale)
        Hm = nys.embedding(many)
        np.testing.assert_allclose(Hm.T @ Hm, np.eye(40), atol=1e-8)
        np.testing.assert_allclose(Kw @ Hm, Hm * many.eigenvalues, atol=1e-8 * scale)
        explicit = [np.trace(H.T @ (F[:, o[p]:o[p + 1]] @ F[:, o[p]:o[p + 1]].T
                                    + reference[p]) @ H) for p in range(m)]
        np.testing.assert_allclose(nys.quad_forms(top), explicit, rtol=1e-9)
        captured = [np.sum(F[:, o[p]:o[p + 1]] ** 2) + np.trace(reference[p]) for p in range(m)]
        np.testing.assert_allclose(nys.residual_fractions(), 1 - np.array(captured) / n,
                                   atol=1e-12)
        # The loop on top of it: the objective never increases.
        res = solve(nys, 4, LAM)
        assert np.all(np.diff(res.objective_history) <= 1e-9 * res.objective_history[0])
    finally:
        nys.close()
    again = NystromBackend.from_views(views, specs, n_landmarks=40, scheduler=client,
                                      random_state=0, store=tmp_path / "f.zarr", chunk_size=64)
    try:
        assert again.info["reused_store"]
        for S, ref in zip(again.local.kernels, reference, strict=True):
            np.testing.assert_allclose(S.toarray(), ref, atol=1e-12)
    finally:
        again.close()
    with pytest.raises(StoreError, match="local_threshold"):
        NystromBackend.from_views(views, specs, n_landmarks=40, scheduler=client,
                                  random_state=0, store=tmp_path / "f.zarr", chunk_size=64,
                                  local_threshold=0.05)


def test_local_part_is_dropped_above_its_size_cap(client, small, monkeypatch):
    import mkrk_dask.backends.nystrom.local as nystrom

    views, _ = small
    specs = multiview_specs()
    monkeypatch.setattr(nystrom, "LOCAL_MAX_PER_ROW", 10**9)
    sizes = NystromBackend.from_views(views, specs, n_landmarks=12, scheduler=client,
                                      random_state=0)
    per_row = sizes.local.nonzeros_per_row()
    sizes.close()
    assert per_row.min() < per_row.max()
    # A cap between the kernels' sizes: the larger ones are left out, the others kept.
    cap = float(np.median(per_row))
    monkeypatch.setattr(nystrom, "LOCAL_MAX_PER_ROW", cap)
    with pytest.warns(NystromApproximationWarning, match="get no local part"):
        nys = NystromBackend.from_views(views, specs, n_landmarks=12, scheduler=client,
                                        random_state=0)
    try:
        left_out = [p for p in range(6) if per_row[p] > cap]
        assert nys.info["local_part"]["left_out"] == [specs[p].name for p in left_out]
        kept = nys.local.nonzeros_per_row()
        np.testing.assert_array_equal(kept[left_out], 0.0)
        others = [p for p in range(6) if p not in left_out]
        np.testing.assert_allclose(kept[others], per_row[others])
        assert nys.info["dissimilarity_source"] == "exact"  # C is still exact
    finally:
        nys.close()
    monkeypatch.setattr(nystrom, "LOCAL_MAX_PER_ROW", 0)
    with pytest.warns(NystromApproximationWarning, match="get no local part"):
        nys = NystromBackend.from_views(views, specs, n_landmarks=12, scheduler=client,
                                        random_state=0)
    try:
        assert nys.local is None and nys.info["local_part"] is None
    finally:
        nys.close()
    for bad in (-0.1, float("nan")):
        with pytest.raises(ValueError, match="local_threshold"):
            NystromBackend.from_views(views, multiview_specs(), local_threshold=bad,
                                      scheduler=client)


def test_inputs_numpy_dask_zarr_give_the_same_gram(client, small, tmp_path):
    views, _ = small
    specs = multiview_specs()
    z = []
    for i, v in enumerate(views):
        arr = zarr.create_array(str(tmp_path / f"v{i}.zarr"), shape=v.shape, chunks=(50, 5),
                                dtype="f8")
        arr[...] = v
        z.append(arr)
    grams = []
    for inp in (views, [da.from_array(v, chunks=(37, 5)) for v in views], z):
        nys = NystromBackend.from_views(inp, specs, n_landmarks=30, scheduler=client,
                                        random_state=5, chunk_size=40)
        grams.append(nys.gram)
        nys.close()
    np.testing.assert_allclose(grams[1], grams[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grams[2], grams[0], rtol=1e-12, atol=1e-12)


def test_store_is_reused_and_checked(client, small, tmp_path):
    views, _ = small
    specs = multiview_specs()
    path = tmp_path / "f.zarr"
    first = NystromBackend.from_views(views, specs, n_landmarks=30, scheduler=client,
                                      store=path, random_state=2)
    gram, info = first.gram.copy(), first.info
    first.close()
    assert path.exists() and not info["reused_store"]
    again = NystromBackend.from_views(views, specs, n_landmarks=30, scheduler=client,
                                      store=path, random_state=2)
    try:
        assert again.info["reused_store"]
        np.testing.assert_array_equal(again.gram, gram)
        top = again.top_k(np.full(6, 1 / 6), 4)
        assert again.embedding(top).shape == (160, 4)
    finally:
        again.close()
    with pytest.raises(StoreError, match="n_landmarks"):
        NystromBackend.from_views(views, specs, n_landmarks=31, scheduler=client, store=path,
                                  random_state=2)
    # A store built before the factor layout was recorded holds sums of other factors.
    group = zarr.open_group(str(path), mode="r+")
    assert group.attrs["factor_layout"] == "rotated"
    group.attrs.update({k: v for k, v in group.attrs.asdict().items() if k != "factor_layout"})
    del group.attrs["factor_layout"]
    with pytest.raises(StoreError, match="without metadata key 'factor_layout'"):
        NystromBackend.from_views(views, specs, n_landmarks=30, scheduler=client, store=path,
                                  random_state=2)


def test_estimated_largest_distance_is_recorded_and_bounded(client, small):
    views, _ = small
    M = max_pairwise_distance(views[0])
    nys = NystromBackend.from_views(views, [KernelSpec("gaussian", c=1.0)], n_landmarks=20,
                                    scheduler=client, exact_distance_max_n=100, random_state=0)
    scale = nys.info["scales"]["0"]
    nys.close()
    assert scale["method"] == "estimate"
    assert M / 2 <= scale["value"] <= M * (1 + 1e-12)
    assert scale["value"] >= 0.9 * M
    exact = NystromBackend.from_views(views, [KernelSpec("gaussian", c=1.0)], n_landmarks=20,
                                      scheduler=client, random_state=0)
    assert exact.info["scales"]["0"]["method"] == "exact"
    assert exact.info["scales"]["0"]["value"] == pytest.approx(M, rel=1e-12)
    exact.close()


def _compare_with_exact(client, X, y, k, n_landmarks, **kwargs):
    nys = MKKMRK.paper(k, lam=LAM, solver="nystrom", scheduler=client, random_state=0,
                       **kwargs, backend_options={"n_landmarks": n_landmarks}).fit(X)
    exact = MKKMRK.paper(k, lam=LAM, random_state=0).fit(X)
    dw = np.abs(nys.weights_ - exact.weights_).max()
    nmi_n, nmi_e = normalized_mutual_info(y, nys.labels_), normalized_mutual_info(y, exact.labels_)
    return nys, dw, nmi_n, nmi_e


def test_nystrom_matches_exact_on_synthetic_data(client):
    views, y, _ = make_multiview_blobs(300, 5, n_informative=1, n_noise=0, n_redundant=0,
                                       n_features=8, separation=4.0, random_state=3)
    nys, dw, nmi_n, nmi_e = _compare_with_exact(client, views[0], y, 5, 120)
    assert dw <= 0.02
    assert abs(nmi_n - nmi_e) <= 0.02
    assert nys.solver_ == "nystrom"


@pytest.mark.datasets
def test_nystrom_matches_exact_on_jaffe(client, require_dataset, data_dir):
    require_dataset("jaffe")
    data = load_dataset("jaffe", data_dir)
    _, dw, nmi_n, nmi_e = _compare_with_exact(client, data.X, data.y, 10, 200)
    assert dw <= 0.02
    assert abs(nmi_n - nmi_e) <= 0.02


def test_predict_and_transform_with_the_local_part(client):
    """The local part's row map gives the training rows their H back (so predict on the
    training data gives labels_), also after pickling, and maps new rows sensibly."""
    import pickle

    views, y, _ = make_multiview_blobs(700, 4, n_informative=1, n_noise=1, n_redundant=0,
                                       n_features=6, random_state=5)
    specs = ["gaussian(c=0.05)@0", "gaussian(c=0.5)@0", "gaussian(c=0.5)@1"]
    model = MKKMRK.paper(4, kernels=specs, solver="nystrom", scheduler=client,
                   random_state=0, backend_options={"n_landmarks": 40})
    train = [v[:600] for v in views]
    labels = model.fit_predict(train)
    assert model.nystrom_model_.local is not None
    assert model.nystrom_model_.local["views"][0].shape == (600, 6)
    np.testing.assert_allclose(model.transform(train), model.embedding_, atol=1e-8)
    np.testing.assert_array_equal(model.predict(train), labels)
    restored = pickle.loads(pickle.dumps(model.nystrom_model_))  # what `mkrk fit` saves
    assert restored._train_factors is None  # a cache, not pickled
    np.testing.assert_array_equal(restored.predict(train), labels)
    new = [v[600:] for v in views]
    assert normalized_mutual_info(y[600:], model.predict(new)) > 0.9


@pytest.mark.filterwarnings(
    "ignore:the Nystrom factors miss:mkrk_dask.exceptions.NystromApproximationWarning")
def test_transform_gives_the_training_rows_back_when_a_kernel_has_no_local_part(client):
    """A kernel whose residual is too dense gets no local part (S_p = 0 in the fit); the row
    map must not add one for it. Before the fix, transform(X) was 0.06 off embedding_ here."""
    from sklearn.datasets import load_digits

    X = load_digits().data[:400]
    kernels = ["cosine", "gaussian(m=0.5)", "gaussian(m=1)", "gaussian(m=2)"]
    with pytest.warns(NystromApproximationWarning, match="get no local part"):
        model = MKKMRK(10, kernels=kernels, solver="nystrom", n_components=40,
                       scheduler=client, random_state=0, backend_options={"n_landmarks": 60}).fit(X)
    assert model.nystrom_model_.local is not None
    np.testing.assert_allclose(model.transform(X), model.embedding_, atol=1e-10)
    np.testing.assert_array_equal(model.predict(X), model.labels_)


def test_predict_and_transform(client):
    views, y, _ = make_multiview_blobs(500, 4, n_informative=1, n_noise=1, n_redundant=0,
                                       n_features=6, random_state=1)
    specs = ["gaussian(c=0.5)@0", "polynomial(a=1,b=2)@0", "gaussian(c=0.5)@1"]
    model = MKKMRK.paper(4, kernels=specs, solver="nystrom", scheduler=client,
                   random_state=0, backend_options={"n_landmarks": 60})
    labels = model.fit_predict(views)
    np.testing.assert_array_equal(model.predict(views), labels)
    np.testing.assert_allclose(model.transform(views), model.embedding_, atol=1e-10)
    new, y_new, _ = make_multiview_blobs(700, 4, n_informative=1, n_noise=1, n_redundant=0,
                                         n_features=6, random_state=1, row_slice=(500, 700))
    assert model.transform(new).shape == (200, 4)
    predicted = model.predict(new)
    assert predicted.shape == (200,) and set(predicted) <= set(range(4))
    # New points of the same clusters land in the clusters learned for them.
    assert normalized_mutual_info(y_new, predicted) > 0.9
    with pytest.raises(ValueError, match="view"):
        model.predict(new[:1])
    # Every backend predicts now (issue 15): exact through the training rows.
    auto = MKKMRK.paper(4, kernels=specs, solver="auto", random_state=0).fit(views)
    assert auto.solver_ == "exact"
    np.testing.assert_array_equal(auto.predict(views), auto.labels_)
    assert normalized_mutual_info(y_new, auto.predict(new)) > 0.9


def test_warns_when_the_factors_miss_much_of_the_learned_kernel(client):
    views, _, _ = make_multiview_blobs(200, 4, n_informative=1, n_noise=0, n_redundant=0,
                                       n_features=6, random_state=2)
    # At a large lambda the weight piles onto the near-identity Gaussian (the cheapest
    # representative under fip), which 30 landmarks cannot represent.
    specs = ["gaussian(c=0.01)", "linear", "gaussian(c=1)"]
    params = dict(kernels=specs, lam=2.0**5, solver="nystrom", scheduler=client,
                  random_state=0)
    options = {"local_threshold": 0.0}
    with pytest.warns(NystromApproximationWarning, match=r"gaussian\(c=0\.01\)"):
        model = MKKMRK.paper(4, **params, backend_options={**options, "n_landmarks": 30}
                             ).fit(views[0])
    assert model.weights_[0] > 0.5
    assert model.nystrom_residual_[0] > 0.5
    assert model.nystrom_missed_fraction_ > MISSED_FRACTION_WARNING
    assert "Nystrom factors miss" in model.summary()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NystromApproximationWarning)
        # every row a landmark
        full = MKKMRK.paper(4, **params, backend_options={**options, "n_landmarks": 200}
                            ).fit(views[0])
    assert full.nystrom_missed_fraction_ < 1e-6
    exact = full.set_params(solver="exact", backend_options=None).fit(views[0])
    assert not hasattr(exact, "nystrom_residual_")
    assert not hasattr(exact, "nystrom_missed_fraction_")


@EXPECTS_NO_LOCAL_PART
def test_float32_factors_agree_with_float64(client):
    views, y, _ = make_multiview_blobs(400, 5, n_informative=1, n_noise=0, n_redundant=0,
                                       n_features=8, random_state=4)
    fits = {dt: MKKMRK.paper(5, lam=LAM, solver="nystrom", scheduler=client, random_state=0,
                             backend_options={"n_landmarks": 80, "dtype": dt}).fit(views[0])
            for dt in ("float64", "float32")}
    dw = np.abs(fits["float32"].weights_ - fits["float64"].weights_).max()
    assert dw < 1e-3
    assert normalized_mutual_info(fits["float32"].labels_, fits["float64"].labels_) > 0.99
    np.testing.assert_array_equal(fits["float32"].predict(views[0]), fits["float32"].labels_)
    # float32 storage keeps the embedding in float32 (half the memory of the largest array
    # at millions of rows), and transform gives the same dtype.
    for dt in ("float32", "float64"):
        assert fits[dt].embedding_.dtype == np.dtype(dt)
        assert fits[dt].transform(views[0][:50]).dtype == np.dtype(dt)


def test_factors_by_row_blocks_equal_one_block(client, monkeypatch):
    """The factors are evaluated a few rows at a time (bounded temporaries); blocks of 7 rows
    give what one block of all rows gives."""
    from mkrk_dask.backends.nystrom import model as nystrom_model

    views, _, _ = make_multiview_blobs(300, 3, n_informative=1, n_noise=1, n_redundant=0,
                                       n_features=5, random_state=3)
    fitted = MKKMRK.paper(3, kernels=["gaussian(c=0.5)@0", "polynomial(a=1,b=2)@1"],
                          solver="nystrom", scheduler=client,
                          random_state=0, backend_options={"n_landmarks": 40}).fit(views)
    row_map = fitted.nystrom_model_
    whole_sq = np.empty((300, 2))
    whole = row_map.factors(views, sq_norms=whole_sq)
    monkeypatch.setattr(nystrom_model, "FACTOR_BLOCK_ROWS", 7)
    blocks_sq = np.empty((300, 2))
    blocks = row_map.factors(views, sq_norms=blocks_sq)
    np.testing.assert_allclose(blocks, whole, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(blocks_sq, whole_sq, rtol=1e-12)
    F = np.asarray(whole, dtype=np.float64)
    np.testing.assert_allclose(nystrom_model.embed_rows(whole.astype(np.float32),
                                                        row_map.coefficients),
                               F.astype(np.float32).astype(np.float64) @ row_map.coefficients,
                               rtol=1e-12, atol=1e-12)


def test_rank_tol_cuts_smooth_kernels_and_keeps_the_fit_close(client):
    """``rank_tol`` keeps fewer components of the smooth kernels (wide Gaussian, low-degree
    polynomial) than of a narrow one; the fitted ranks are recorded and the fit stays close to
    the full-rank one."""
    views, y, _ = make_multiview_blobs(500, 4, n_informative=1, n_noise=0, n_redundant=0,
                                       n_features=6, random_state=6)
    kernels = ["gaussian(c=0.05)", "gaussian(c=2)", "polynomial(a=1,b=2)"]
    fits = {tol: MKKMRK.paper(4, kernels=kernels, lam=LAM, solver="nystrom",
                              backend_options={"n_landmarks": 120, "rank_tol": tol},
                              scheduler=client,
                              random_state=0).fit(views[0])
            for tol in (0.0, 1e-3)}
    full, cut = fits[0.0].nystrom_ranks_, fits[1e-3].nystrom_ranks_
    # every landmark for the narrow Gaussian; the quadratic kernel in 6 dims has rank 28
    assert full[0] == 120 and full[2] == 28
    assert cut[0] > cut[1] and cut[1] < full[1] // 2 and cut[2] <= 28
    assert f"Nystrom components: R = {sum(cut)}: gaussian(c=0.05) " in fits[1e-3].summary()
    assert np.abs(fits[1e-3].weights_ - fits[0.0].weights_).max() < 0.02
    assert normalized_mutual_info(fits[1e-3].labels_, fits[0.0].labels_) > 0.95
    with pytest.raises(ValueError, match="rank_tol must be < 1"):
        MKKMRK(4, solver="nystrom", backend_options={"rank_tol": 1.0}).fit(views[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_strong_columns_are_rotated_without_changing_the_approximation(dtype):
    """A kernel with more strong columns than TRAPEZOID_COLUMNS gets them rotated (T Q, Q
    orthogonal) so that T's head is a lower triangle with a non-negative diagonal: the factors
    are the product with that transform (also for new rows, through ``project``), and F F^T,
    the Nystrom approximation, is the unrotated one's."""
    from mkrk_dask.backends.nystrom.model import TRAPEZOID_COLUMNS, NystromModel
    from mkrk_dask.kernels import kernel_blocks
    from mkrk_dask.landmarks import landmark_transform

    rng = np.random.default_rng(1)
    X = rng.normal(size=(700, 8))
    spec = KernelSpec("gaussian", sigma=3.0, view=0)  # 176 strong columns of 300
    L = X[:300]
    T, values = landmark_transform(kernel_blocks([spec], L, L)[0])
    model = NystromModel(specs=[spec], normalize=True, landmarks={0: L},
                         kernel_landmarks=[300], transforms=[T], dtype=dtype)
    s = model.strong_columns[0]
    assert TRAPEZOID_COLUMNS < s < T.shape[1]  # rotated head and plain weak tail
    P = model.product_transforms()[0]
    assert P.shape == T.shape
    assert np.all(np.triu(P[:s, :s], 1) == 0) and np.all(np.diag(P[:s, :s]) >= 0)
    np.testing.assert_array_equal(P[:, s:], T[:, s:])
    Q = np.linalg.lstsq(T[:, :s], P[:, :s], rcond=None)[0]
    np.testing.assert_allclose(Q.T @ Q, np.eye(s), atol=1e-6)  # Q from an ill-posed solve
    C = kernel_blocks([spec], X, L)[0]
    F = model.factors([X])
    assert F.dtype == dtype
    exact = C @ P
    rows = np.linalg.norm(exact, axis=1, keepdims=True)
    eps = np.finfo(dtype).eps
    # float32: the strong columns' bound (FLOAT32_PRODUCT_MIN_EIGENVALUE: at most 100 eps)
    bound = (200 if dtype == np.float32 else 1e4) * eps * rows
    assert np.all(np.abs(F - exact) <= bound)
    plain = C @ T
    approximation = plain @ plain.T
    tol = 1e-3 if dtype == np.float32 else 1e-9
    np.testing.assert_allclose(F.astype(np.float64) @ F.astype(np.float64).T, approximation,
                               atol=tol * np.abs(approximation).max())
    B = rng.normal(size=(T.shape[1], 3))
    np.testing.assert_allclose(model.project([X], B), exact @ B,
                               atol=1e-9 * np.abs(exact @ B).max())
    # The "plain" layout (models saved before it was recorded): T as it is, no rotation.
    plain = NystromModel(specs=[spec], normalize=True, landmarks={0: L},
                         kernel_landmarks=[300], transforms=[T], dtype=dtype,
                         factor_layout="plain")
    np.testing.assert_array_equal(plain.product_transforms()[0], T)
    assert plain.single_views() == set()
    np.testing.assert_allclose(plain.factors([X]), C @ T, atol=bound.max())
    with pytest.raises(ValueError, match="factor_layout must be 'rotated' or 'plain'"):
        NystromModel(specs=[spec], normalize=True, landmarks={0: L}, kernel_landmarks=[300],
                     transforms=[T], factor_layout="turned")


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_kernels_of_few_features_take_the_product_of_their_features(normalize, dtype):
    """A linear kernel (cosine when normalised) with fewer features than landmarks:
    ``F_p = phi(X) (phi(L)^T T_p Q_p)``, the same factors as the kernel block's product (dense
    rows), also through ``project``; sparse rows and kernels with as many landmarks as
    features go through the kernel block."""
    from mkrk_dask.backends.nystrom.model import NystromModel
    from mkrk_dask.kernel_widths import median_scales
    from mkrk_dask.kernels import kernel_blocks, resolve_kernels
    from mkrk_dask.landmarks import landmark_transform

    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 5)) + 2.0
    # the last: the lifted cosine (degree 1, offset a): features [x, sqrt(a)]
    raw = [KernelSpec("linear"), KernelSpec("gaussian", m=1.0), KernelSpec("linear"),
           KernelSpec("polynomial", a=2.0, b=1)]
    specs = resolve_kernels(raw, [1.0], median_scales([X], raw))
    counts = [40, 60, 5, 30]  # the third: as many landmarks as features
    L = X[:60]
    transforms = [landmark_transform(kernel_blocks([spec], L[:c], L[:c],
                                                   normalize=normalize)[0])[0]
                  for spec, c in zip(specs, counts, strict=True)]
    model = NystromModel(specs=specs, normalize=normalize, landmarks={0: L},
                         kernel_landmarks=counts, transforms=transforms, dtype=dtype)
    assert list(model._feature_parts()) == [0, 3]
    P = model.product_transforms()
    blocks = kernel_blocks(specs, X, L, normalize=normalize)
    exact = np.hstack([blocks[p][:, :c] @ P[p] for p, c in enumerate(counts)])
    rows = np.linalg.norm(exact, axis=1, keepdims=True)
    eps = np.finfo(dtype).eps
    bound = (200 if dtype == np.float32 else 1e4) * eps * rows
    F = model.factors([X])
    assert np.all(np.abs(F - exact) <= bound)
    # the linear kernel's columns: its features' product, computed here independently
    phi = X / np.linalg.norm(X, axis=1, keepdims=True) if normalize else X
    phi_l = L[:40] / np.linalg.norm(L[:40], axis=1, keepdims=True) if normalize else L[:40]
    np.testing.assert_allclose(F[:, :P[0].shape[1]], phi @ (phi_l.T @ P[0]),
                               atol=bound.max())
    lift = np.c_[X, np.full(300, np.sqrt(2.0))]
    lift_l = lift[:30]
    if normalize:
        lift, lift_l = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in (lift, lift_l))
    start = model.offsets[3]
    np.testing.assert_allclose(F[:, start:], lift @ (lift_l.T @ P[3]), atol=bound.max())
    F_sparse = model.factors([sp.csr_matrix(X)])
    assert np.all(np.abs(F_sparse - exact) <= bound)
    B = rng.normal(size=(model.n_components, 2))
    np.testing.assert_allclose(model.project([X], B), exact @ B,
                               atol=1e-4 * np.abs(exact @ B).max())
    # An all-zero row: orthogonal to every landmark under the cosine kernel (its factors
    # there are zero), as its kernel block gives.
    zero = X[:4].copy()
    zero[2] = 0.0
    F_zero = model.factors([zero])
    blocks = kernel_blocks(specs, zero, L, normalize=normalize)
    np.testing.assert_allclose(F_zero, np.hstack([blocks[p][:, :c] @ P[p]
                                                  for p, c in enumerate(counts)]),
                               atol=bound.max())
    assert np.all(F_zero[2, :P[0].shape[1]] == 0)


def test_float32_factors_evaluate_the_views_of_strong_columns_in_single_precision():
    """With float32 factors, a view whose kernels keep only strong columns is evaluated in
    float32 (kernel_blocks(precision="single")): its factors stay within the strong columns'
    amplification (at most 100) of the kernel values' float32 error; a view with a weak
    column keeps float64 values; float64 factors never use float32."""
    from mkrk_dask.backends.nystrom.model import NystromModel
    from mkrk_dask.kernel_widths import median_scales
    from mkrk_dask.kernels import kernel_blocks, resolve_kernels
    from mkrk_dask.landmarks import landmark_transform

    rng = np.random.default_rng(2)
    views = [rng.normal(size=(500, 6)) + 50.0, rng.normal(size=(500, 3))]
    widths = [KernelSpec("gaussian", m=m, view=v) for v, m in ((0, 0.5), (1, 4.0))]
    specs = resolve_kernels(widths, [1.0, 1.0], median_scales(views, widths))
    landmarks = {0: views[0][:120], 1: views[1][:120]}
    transforms = [landmark_transform(kernel_blocks([spec], landmarks[spec.view],
                                                   landmarks[spec.view])[0])[0]
                  for spec in specs]
    models = {dt: NystromModel(specs=specs, normalize=True, landmarks=landmarks,
                               kernel_landmarks=[120] * 2, transforms=transforms, dtype=dt)
              for dt in (np.float32, np.float64)}
    strong = models[np.float32].strong_columns
    assert strong[0] == transforms[0].shape[1]  # view 0: all strong
    assert strong[1] < transforms[1].shape[1]  # the wide Gaussian of view 1 has weak ones
    assert models[np.float32].single_views() == {0}
    assert models[np.float64].single_views() == set()
    F = {dt: model.factors(views) for dt, model in models.items()}
    offsets = models[np.float32].offsets
    eps = np.finfo(np.float32).eps
    for p in range(2):
        block = slice(offsets[p], offsets[p + 1])
        rows = np.linalg.norm(F[np.float64][:, block], axis=1)
        error = np.abs(F[np.float32][:, block] - F[np.float64][:, block]).max(axis=1)
        assert np.all(error <= 100 * 64 * eps * rows), specs[p].name
    # project (the final pass's F B without F): within float32 round-off of the exact F B
    B = rng.normal(size=(models[np.float32].n_components, 3))
    exact = F[np.float64] @ B
    projected = models[np.float32].project(views, B)
    assert np.abs(projected - exact).max() <= 1e-4 * np.abs(exact).max()
    # The view evaluated in float64 instead gives other bits (so single precision was used)
    # and an error of the same order: the float32 products' round-off dominates both.
    models[np.float32]._single = set()
    assert not np.array_equal(models[np.float32].project(views, B), projected)
    double_values = models[np.float32].factors(views)
    view0 = slice(0, offsets[1])
    assert not np.array_equal(double_values[:, view0], F[np.float32][:, view0])
    single_error = np.abs(F[np.float32][:, view0] - F[np.float64][:, view0]).max()
    double_error = np.abs(double_values[:, view0] - F[np.float64][:, view0]).max()
    assert single_error <= 4 * double_error


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gram_sums_equal_the_plain_products(dtype):
    from mkrk_dask.backends.nystrom.tasks import add_gram, gram_order

    rng = np.random.default_rng(7)
    gram, plain = np.zeros((40, 40), order=gram_order(dtype)), np.zeros((40, 40))
    for rows in (25, 3, 60):
        F = rng.standard_normal((rows, 40)).astype(dtype)
        gram = add_gram(gram, F)
        plain += F.astype(np.float64).T @ F.astype(np.float64)
    # the sums are read from the upper triangle (dsyrk leaves the lower one alone)
    np.testing.assert_allclose(np.triu(gram), np.triu(plain),
                               rtol=1e-5 if dtype == np.float32 else 1e-13, atol=1e-4)
    if dtype == np.float64:
        assert not np.tril(gram, -1).any()


def test_auto_dtype_chooses_the_factors_precision(
        client, monkeypatch, tmp_path):
    """dtype="auto": float64 factors where they fit the disk budget, float32 where only those
    do (the reason says so), and an explicit float64 is refused there, not silently halved;
    float32 for the plain Nystrom backend (n above exact_dissimilarity_max_n)."""
    import shutil
    import tempfile

    import mkrk_dask.auto as auto
    from mkrk_dask.exceptions import ProblemTooLargeError

    n, landmarks = 13_000, 20  # n > EXACT_MAX_N: Nystrom; 2 kernels of 20 landmarks: R = 40
    views, y, _ = make_multiview_blobs(n, 3, n_informative=1, n_noise=0, n_redundant=0,
                                       n_features=4, random_state=0)
    X = views[0]
    free = shutil.disk_usage(tempfile.gettempdir()).free
    # Room for 6 n R bytes: float32 factors (4 n R) fit, float64 ones (8 n R) do not.
    monkeypatch.setattr(auto, "DISK_FRACTION", 6.0 * n * 2 * landmarks / free)
    params = dict(kernels=["gaussian(c=1)", "polynomial(a=1,b=2)"], scheduler=client,
                  random_state=0, lam=1.0, max_iter=5)
    count = {"n_landmarks": landmarks}
    model = MKKMRK(3, **params, backend_options=count).fit(X)
    assert model.solver_ == "nystrom" and model.dtype_ == "float32"
    assert "float32 factors" in model.solver_reason_ and "4 n R bytes" in model.solver_reason_
    assert model.embedding_.dtype == np.float32
    assert normalized_mutual_info(y, model.labels_) > 0.9
    with pytest.raises(ProblemTooLargeError, match="float64 factors") as caught:
        MKKMRK(3, **params, backend_options={**count, "dtype": "float64"}).fit(X)
    assert "\n" not in str(caught.value)
    # An explicit float32 is checked with its own size (it fits).
    assert MKKMRK(3, **params, backend_options={**count, "dtype": "float32"}
                  ).fit(X).dtype_ == "float32"
    # With room for float64 factors, "auto" keeps float64 below exact_dissimilarity_max_n ...
    monkeypatch.setattr(auto, "DISK_FRACTION", 0.8)
    assert MKKMRK(3, **params, backend_options=count).fit(X).dtype_ == "float64"
    # ... and stores float32 for the plain Nystrom backend above it.
    model = MKKMRK(3, backend_options={**count, "exact_dissimilarity_max_n": 10_000},
                   **params).fit(X)
    assert model.dtype_ == "float32" and "plain Nystrom: n > 10,000" in model.solver_reason_
    assert model.embedding_.dtype == np.float32
    assert normalized_mutual_info(y, model.labels_) > 0.9
    explicit = dict(params, solver="nystrom")
    assert MKKMRK(3, **explicit, backend_options=count).fit(X[:3000]).dtype_ == "float64"
    assert MKKMRK(3, backend_options={**count, "exact_dissimilarity_max_n": 2000},
                  **explicit).fit(X[:3000]).dtype_ == "float32"


def test_auto_choice():
    gib = 2**30
    choice, reason = choose_solver(500, 12, available_memory=8 * gib, free_disk=50 * gib)
    assert choice == "exact" and "n=500" in reason and "m=12" in reason
    # exact ruled out by memory or by n: Nystrom, whose factors go to disk
    assert choose_solver(500, 12, n_landmarks=50, available_memory=2 * 10**7,
                         free_disk=50 * gib)[0] == "nystrom"
    choice, reason = choose_solver(20_000, 12, available_memory=8 * gib, free_disk=500 * gib)
    assert choice == "nystrom" and "n > 12,000" in reason
    assert choose_solver(100_000, 12, available_memory=10**12, free_disk=10**15)[0] == "nystrom"
    # fits nowhere: a one-line error that says what would fit
    with pytest.raises(MemoryError, match=r"n_landmarks <= \d+ would fit") as caught:
        choose_solver(10**7, 12, available_memory=8 * gib, free_disk=100 * gib)
    assert "\n" not in str(caught.value)
    X = np.random.default_rng(0).normal(size=(60, 3))
    model = MKKMRK.paper(3, solver="auto", kernels=["gaussian(c=1)"], random_state=0).fit(X)
    assert model.solver_ == "exact" and "n=60" in model.solver_reason_


def test_auto_fits_exactly_where_nystrom_would_pass_over_all_pairs(client, monkeypatch):
    """solver="auto" fits exactly up to the Nystrom backend's exact-C limit for the fit's
    kernels (there Nystrom makes an O(n^2) pass anyway), never below the pass's floor nor
    above EXACT_MAX_N; the estimator reads the limit from its own Nystrom options."""
    import mkrk_dask.backends.options as options
    from mkrk_dask.auto import EXACT_MAX_N, smooth_exact_max_n

    floor = options.AUTO_EXACT_DISSIMILARITY_MIN_N
    assert smooth_exact_max_n(0) == floor and smooth_exact_max_n(floor + 1) == floor + 1
    assert smooth_exact_max_n(10**6) == EXACT_MAX_N
    gib = 2**30
    choice, reason = choose_solver(7000, 4, exact_max_n=6441, available_memory=64 * gib,
                                   free_disk=500 * gib)
    assert choice == "nystrom" and "n > 6,441" in reason
    assert choose_solver(6441, 4, exact_max_n=6441, available_memory=64 * gib,
                         free_disk=500 * gib)[0] == "exact"
    # Scaled down: a floor of 100 rows and a limit of 300 for two kernels.
    monkeypatch.setattr(options, "AUTO_EXACT_DISSIMILARITY_MIN_N", 100)
    kernels = ["gaussian(m=1)", "polynomial(a=1,b=2)"]
    per_pair = options.NystromOptions(n_landmarks=200).pass_products_per_pair(2)
    monkeypatch.setattr(options, "EXACT_DISSIMILARITY_BUDGET", 300**2 * per_pair)
    X = np.random.default_rng(0).normal(size=(360, 3))
    params = dict(kernels=kernels, backend_options={"n_landmarks": 200}, scheduler=client,
                  random_state=0, max_iter=3)
    below, above = MKKMRK(3, **params).fit(X[:300]), MKKMRK(3, **params).fit(X)
    assert below.solver_ == "exact" and "n <= 300" in below.solver_reason_
    assert above.solver_ == "nystrom" and "n > 300" in above.solver_reason_
    # its own options: without the local part the pass is cheaper (200 products per pair
    # instead of 600), its limit higher (517)
    plain = MKKMRK(3, **dict(params, backend_options={"n_landmarks": 200,
                                                      "local_threshold": 0})).fit(X)
    assert plain.solver_ == "exact"
    # Only for kernels no narrower than the default's: a width given by c (or sigma) has no
    # known relation to the median distance, and exact stays up to EXACT_MAX_N.
    narrow = MKKMRK(3, **dict(params, kernels=["gaussian(c=1)", "polynomial(a=1,b=2)"])).fit(X)
    assert narrow.solver_ == "exact" and f"n <= {EXACT_MAX_N:,}" in narrow.solver_reason_


def test_smooth_kernels():
    from mkrk_dask.kernels import paper_kernels, parse_kernel
    from mkrk_dask.plan import GEOMETRIES, auto_kernels, smooth_kernels

    assert all(smooth_kernels(auto_kernels([g] * 2)) for g in GEOMETRIES)
    assert smooth_kernels([parse_kernel("cosine"), parse_kernel("polynomial(a=0,b=4)")])
    assert not smooth_kernels(paper_kernels())
    assert not smooth_kernels([parse_kernel("gaussian(m=0.25)")])
    assert not smooth_kernels([parse_kernel("gaussian(sigma=3)")])
    assert not smooth_kernels(None)  # precomputed kernels


def test_auto_choice_for_precomputed_kernels(monkeypatch):
    """Precomputed kernels have no features for Nystrom: exact where their prepared copy fits
    (at any n), blockwise where only the disk holds them, else a one-line error."""
    from mkrk_dask import auto
    from mkrk_dask.auto import choose_precomputed_solver

    gib = 2**30
    # 20,000 rows, 2 kernels: 6.0 GiB, above EXACT_MAX_N but in memory already
    choice, reason = choose_precomputed_solver(20_000, 2, available_memory=16 * gib,
                                               free_disk=50 * gib)
    assert choice == "exact" and "prepared copy fits" in reason and "n=20000" in reason
    assert choose_precomputed_solver(20_000, 2, available_memory=4 * gib,
                                     free_disk=50 * gib)[0] == "blockwise"
    choice, reason = choose_precomputed_solver(20_000, 2, copy=False, available_memory=4 * gib,
                                               free_disk=1 * gib)
    assert choice == "exact" and "in place" in reason
    with pytest.raises(MemoryError, match="copy': False") as caught:
        choose_precomputed_solver(20_000, 2, available_memory=4 * gib, free_disk=1 * gib)
    assert "\n" not in str(caught.value)
    # Through the estimator, above EXACT_MAX_N: exact, not a refusal of Nystrom.
    monkeypatch.setattr(auto, "EXACT_MAX_N", 40)
    X = np.random.default_rng(0).normal(size=(60, 3))
    K = np.stack([X @ X.T + np.eye(60), np.exp(-np.sum((X[:, None] - X[None]) ** 2, -1))])
    model = MKKMRK(3, kernels="precomputed", random_state=0).fit(K)
    assert model.solver_ == "exact" and "precomputed kernels, n=60" in model.solver_reason_
    # Where the copy does not fit memory: a blockwise store, with the exact backend's answer.
    monkeypatch.setattr(auto, "MEMORY_FRACTION", 0.0)
    stored = MKKMRK(3, kernels="precomputed", random_state=0).fit(K)
    assert stored.solver_ == "blockwise" and "blockwise store" in stored.solver_reason_
    np.testing.assert_allclose(stored.weights_, model.weights_, atol=1e-8)
    np.testing.assert_array_equal(stored.labels_, model.labels_)
    # ... unless the caller lets the fit prepare its own array.
    in_place = MKKMRK(3, kernels="precomputed", random_state=0,
                      backend_options={"copy": False}).fit(K.copy())
    assert in_place.solver_ == "exact" and "in place" in in_place.solver_reason_


def test_float32_factors_take_only_the_well_conditioned_columns_in_float32():
    """With float32 factors the columns of T whose eigenvalue is at least
    FLOAT32_PRODUCT_MIN_EIGENVALUE of the largest are multiplied in float32, the others in
    float64: the error of every column stays within its bound (about eps_32 times
    sqrt(lambda_max / lambda_k) of a row's norm), which a float32 product of the weak columns
    would exceed by orders of magnitude."""
    from mkrk_dask.backends.nystrom.model import FLOAT32_PRODUCT_MIN_EIGENVALUE, NystromModel
    from mkrk_dask.kernels import kernel_blocks
    from mkrk_dask.landmarks import landmark_transform

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    spec = KernelSpec("gaussian", sigma=1.5, view=0)
    L = X[:150]
    T, values = landmark_transform(kernel_blocks([spec], L, L)[0])
    models = {dt: NystromModel(specs=[spec], normalize=True, landmarks={0: L},
                               kernel_landmarks=[150], transforms=[T], dtype=dt)
              for dt in (np.float32, np.float64)}
    split = models[np.float32].single_columns[0]
    assert models[np.float64].single_columns == [0]
    assert split == int(np.count_nonzero(values >= FLOAT32_PRODUCT_MIN_EIGENVALUE * values[0]))
    assert 0 < split < values.size  # both kinds of columns are exercised
    sq = {dt: np.empty((600, 1)) for dt in models}
    F = {dt: model.factors([X], sq_norms=sq[dt]) for dt, model in models.items()}
    assert F[np.float32].dtype == np.float32
    error = np.abs(F[np.float32].astype(np.float64) - F[np.float64])
    rows = np.linalg.norm(F[np.float64], axis=1, keepdims=True)
    eps = np.finfo(np.float32).eps
    bound = 20 * eps * np.sqrt(values[0] / values)[None, :] * rows
    assert np.all(error <= bound)
    # the weak columns are float64 products, rounded once to float32
    weak = slice(split, None)
    np.testing.assert_allclose(F[np.float32][:, weak], F[np.float64][:, weak],
                               rtol=2 * eps, atol=2 * eps * rows.max() * 1e-6)
    # the same columns by a float32 product would be far off: the bound is not vacuous
    naive = (kernel_blocks([spec], X, L)[0].astype(np.float32)
             @ T[:, weak].astype(np.float32)).astype(np.float64)
    assert np.abs(naive - F[np.float64][:, weak]).max() > 100 * error[:, weak].max()
    np.testing.assert_allclose(sq[np.float32], sq[np.float64], rtol=1e-5)
