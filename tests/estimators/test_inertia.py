"""``inertia_``: the kernel k-means objective of the final labels in the learned kernel, as
``KMeans.inertia_`` defines it, for every estimator and backend, checked against a plain
dense computation (exact backends) and against the exact value (Nystrom)."""

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from mkrk_dask import MKKM, MKKMMR, MKKMRK, AnchorGraphClustering, SimpleMKKM
from mkrk_dask.anchor_graph import graph_factor
from mkrk_dask.backends import ExactBackend, kernel_inertia
from mkrk_dask.model_io import load_model, save_model


def dense_inertia(K: np.ndarray, labels: np.ndarray) -> float:
    """sum_i K_ii - sum_c (1/|c|) sum_{i,j in c} K_ij, as written."""
    total = float(np.trace(K))
    for c in np.unique(labels):
        members = labels == c
        total -= K[np.ix_(members, members)].sum() / members.sum()
    return total


#: how many rows of scikit-learn's digits the shared ``digits`` fixture gives (conftest.py)
DIGITS_ROWS = 150


@pytest.mark.parametrize("cls", [MKKMRK, MKKM, MKKMMR, SimpleMKKM])
def test_inertia_of_precomputed_kernels_is_the_dense_objective(cls, digits):
    X, _ = digits
    kernels = np.stack([rbf_kernel(X, gamma=g) for g in (1e-4, 1e-3, 1e-2)])
    model = cls(5, kernels="precomputed", normalize=False, solver="exact",
                random_state=0).fit(kernels)
    K_w = np.einsum("p,pij->ij", model.weights_**2, kernels)
    assert model.inertia_ == pytest.approx(dense_inertia(K_w, model.labels_), rel=1e-10)


def test_inertia_of_features_is_the_objective_in_the_fitted_kernels(digits):
    X, _ = digits
    model = MKKMRK(6, lam=2**-10, random_state=0, solver="exact").fit(X)
    views = model.plan_.apply_scaling([X])
    K = ExactBackend.from_views(views, model.kernels_).combined_kernel(model.weights_)
    assert model.inertia_ == pytest.approx(dense_inertia(K, model.labels_), rel=1e-10)
    # it is KMeans' objective: a random partition scores worse
    other = np.random.default_rng(0).permutation(model.labels_)
    assert dense_inertia(K, other) > model.inertia_


def test_blockwise_against_exact(digits, client):
    X, _ = digits
    exact = MKKMRK(5, random_state=0, solver="exact").fit(X)
    blockwise, _ = MKKMRK(5, random_state=0, solver="blockwise",
                          scheduler=client).build_backend(X)
    with blockwise:
        assert kernel_inertia(blockwise, exact.weights_, exact.labels_, 5) == pytest.approx(
            exact.inertia_, rel=1e-9)
    # a blockwise fit's own attribute (the same kernels; its labels may differ at a border)
    fitted = MKKMRK(5, random_state=0, solver="blockwise", scheduler=client).fit(X)
    assert fitted.inertia_ == pytest.approx(exact.inertia_, rel=0.05)


@pytest.mark.parametrize("options", [
    {},  # with a sparse local part (n is small): the factors in memory
    {"local_threshold": 0, "store_factors": True},  # the factors alone, stored: a pass
    {"local_threshold": 0, "store_factors": False},  # computed again from the data
])
def test_nystrom_against_exact(digits, client, options):
    X, _ = digits
    exact = MKKMRK(5, random_state=0, solver="exact").fit(X)
    labels, weights = exact.labels_, exact.weights_
    settings = dict(random_state=0, solver="nystrom", scheduler=client,
                    backend_options={"n_landmarks": 60, **options})
    nystrom, _ = MKKMRK(5, **settings).build_backend(X)
    with nystrom:
        approximate = kernel_inertia(nystrom, weights, labels, 5)
        missed = nystrom.approximation(weights).missed_fraction
        total = float(weights**2 @ nystrom.traces())
    # the factors miss part of every kernel: above the exact value by at most what they miss
    assert exact.inertia_ - 1e-9 <= approximate <= exact.inertia_ + missed * total + 1e-9
    assert approximate == pytest.approx(exact.inertia_, rel=0.1)
    # and a Nystrom fit's own attribute, on its own labels, is close to the exact one's
    assert MKKMRK(5, **settings).fit(X).inertia_ == pytest.approx(exact.inertia_, rel=0.1)


def test_anchor_graph_inertia_is_the_objective_in_its_graph(digits):
    X, _ = digits
    A, B = X[:, :32], X[:, 32:]
    model = AnchorGraphClustering(5, n_anchors=30, random_state=0).fit([A, B])
    F = graph_factor([g.factor(v, i) for i, (g, v) in enumerate(zip(model.view_graphs_,
                                                                    (A, B), strict=True))])
    W = (F @ F.T).toarray()
    assert model.inertia_ == pytest.approx(dense_inertia(W, model.labels_), rel=1e-9)


@pytest.mark.parametrize("make", [lambda: MKKMRK(4, random_state=0, solver="exact"),
                                  lambda: AnchorGraphClustering(4, n_anchors=30,
                                                                random_state=0)])
def test_a_saved_model_keeps_its_inertia(make, digits, tmp_path):
    model = make().fit(digits[0])
    loaded = load_model(save_model(model, tmp_path / "m"))
    assert isinstance(loaded.inertia_, float) and loaded.inertia_ == model.inertia_


@pytest.mark.parametrize("dtype,data", [("float64", "float64"), ("float32", "float64"),
                                        ("float32", "float32")])
def test_nystrom_cluster_sums_without_the_factors(digits, client, dtype, data):
    """The pass of the inertia where no factors are stored sums the kernel blocks per cluster
    and maps the sums (NystromModel.cluster_sums): the column sums of the factors per
    cluster, to round-off (float32 factors round F first; float32 data also sums its float32
    kernel blocks in float32, 512 rows at a time)."""
    X, _ = digits
    X = np.asarray(X, dtype=data)
    # float32 data: kernels whose every column is strong (rank_tol 0.01), so that the view's
    # kernel blocks are float32 (NystromModel.single_views)
    single = {"rank_tol": 0.01} if data == "float32" else {}
    kernels = (["cosine", "gaussian(m=1)"] if single else
               ["cosine", "gaussian(m=1)", "polynomial(a=1,b=2)", "linear"])
    nystrom, _ = MKKMRK(5, kernels=kernels, random_state=0, solver="nystrom", scheduler=client,
                        backend_options={"n_landmarks": 60, "dtype": dtype,
                                         "local_threshold": 0, **single}).build_backend(X)
    labels = np.random.default_rng(0).integers(0, 5, X.shape[0])
    with nystrom:
        model = nystrom.model
        views = [np.asarray(X, dtype=np.float64)]
        F = model.factors(views).astype(np.float64)
        if data == "float32":  # the kernel blocks in float32, as a float32 view has them
            assert model.single_views() == {0}
            views = [X]
        expected = np.stack([F[labels == c].sum(axis=0) for c in range(5)])
        sums = model.cluster_sums(views, labels, 5)
    assert sums.shape == expected.shape
    scale = np.abs(expected).max()
    assert np.abs(sums - expected).max() <= (1e-10 if dtype == "float64" else 1e-5) * scale
