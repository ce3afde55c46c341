"""The final partition fitted on a uniform sample of the embedding (Nystrom ``final_rows``):
one pass then makes every row's embedding, its label and the clusters' sums. On a real
LocalCluster, against the fit of every row, the backend's separate passes and the inertia
computed from the factors in memory."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from mkrk_dask import MKKMRK
from mkrk_dask.assignment import RowLabels, nearest_centre
from mkrk_dask.metrics import normalized_mutual_info
from mkrk_dask.passes import uniform_row_mask
from mkrk_dask.synthetic import make_multiview_blobs


@pytest.fixture(scope="module")
def data():
    views, y, _ = make_multiview_blobs(6000, 4, n_informative=1, n_noise=1, n_redundant=0,
                                       n_features=6, random_state=3)
    return views, y


def test_a_sample_smaller_than_the_clusters_is_refused(data):
    views, _ = data
    with pytest.raises(ValueError, match="final_rows=3 is below n_clusters=4"):
        MKKMRK(4, solver="nystrom", backend_options={"final_rows": 3}).plan(views)


def _nystrom(client, **options):
    return {"n_landmarks": 60, "exact_dissimilarity_max_n": 0, **options}


def _estimated_forms(F, labels, mask, offsets, k):
    """Per kernel, sum_c ||S_c||^2 / |c|, S_c the mean of the cluster's sampled factor rows
    times its rows."""
    counts = np.bincount(labels, minlength=k)
    sums = np.stack([F[mask & (labels == c)].mean(axis=0) * counts[c] for c in range(k)])
    scaled = sums / np.sqrt(counts)[:, None]
    return np.add.reduceat(np.einsum("ij,ij->j", scaled, scaled), offsets[:-1])


@pytest.mark.parametrize("store", [False, True])
def test_one_pass_gives_what_the_separate_passes_give(client, data, store):
    """labelled_embedding against embedding, the labels of its rows and
    cluster_quad_forms (each its own pass), on the same backend; sample_embedding against
    the rows of the whole embedding. Factors stored or computed again from the data."""
    views, _ = data
    est = MKKMRK(4, solver="nystrom", scheduler=client, random_state=0,
                 backend_options=_nystrom(client, store_factors=store))
    backend, n = est.build_backend([da.from_array(v, chunks=1000) for v in views])
    with backend:
        top = backend.top_k(np.full(backend.n_kernels, 1.0 / backend.n_kernels), 6)
        H = backend.embedding(top)
        centres = H[::1500][:4] / np.linalg.norm(H[::1500][:4], axis=1, keepdims=True)
        assign = RowLabels("spectral", None, centres=centres)
        mask = np.zeros(n, dtype=bool)
        mask[np.random.default_rng(0).choice(n, 700, replace=False)] = True
        given = (assign(H[mask]) + 1) % 4  # not the labels assign gives: kept as given
        H1, labels, forms = backend.labelled_embedding(top, assign, 4, mask, given)
        np.testing.assert_array_equal(H1, H)
        np.testing.assert_array_equal(labels[~mask], assign(H)[~mask])
        np.testing.assert_array_equal(labels[mask], given)
        assert np.unique(labels).size == 4
        # the forms from the sampled rows' factors: each cluster's sum estimated by their
        # mean times its rows (the factors of every row made here, in float64)
        F = backend.model.factors([np.asarray(v, dtype=np.float64) for v in views]
                                  ).astype(np.float64)
        expected = _estimated_forms(F, labels, mask, backend.model.offsets, 4)
        np.testing.assert_allclose(forms, np.minimum(expected, backend.traces()), rtol=1e-5)
        np.testing.assert_array_equal(backend.sample_embedding(top, mask), H[mask])


@pytest.mark.parametrize("clustering", ["graph", "kmeans"])
def test_a_partition_fitted_on_a_sample_labels_every_row(client, data, clustering):
    """The same fit with the partition fitted on every row and on a uniform quarter: the
    plan says which; the embeddings agree to the float32 round-off, the partitions to NMI
    0.98; predict gives labels_ back; inertia_ is the kernel k-means objective of labels_
    on the factors (computed here from the factors of every row in memory)."""
    views, y = data
    lazy = [da.from_array(v.astype(np.float32), chunks=1000) for v in views]
    fits = {}
    for rows in (None, 1500):
        fits[rows] = MKKMRK(4, solver="nystrom", scheduler=client, random_state=0,
                            final_clustering=clustering,
                            backend_options=_nystrom(client, final_rows=rows)).fit(lazy)
    every, sampled = fits[None], fits[1500]
    assert every.plan_.decision("final rows").value == "every row"
    assert sampled.plan_.decision("final rows").value == "a uniform sample of 1,500"
    assert sampled.final_clustering_ == every.final_clustering_ == clustering
    # the fit of every row runs its k-means in place on its embedding (copy_x=False):
    # a few float32 units of round-off
    np.testing.assert_allclose(sampled.embedding_, every.embedding_, rtol=0, atol=1e-6)
    assert normalized_mutual_info(every.labels_, sampled.labels_) > 0.98
    assert normalized_mutual_info(y, sampled.labels_) > 0.9
    np.testing.assert_array_equal(sampled.predict(lazy), sampled.labels_)
    if clustering == "kmeans":
        np.testing.assert_array_equal(
            nearest_centre(sampled.embedding_, sampled.cluster_centers_,
                           step=sampled.final_step_), sampled.labels_)
    # inertia_: the objective of labels_ with the clusters' sums estimated from the
    # sample the partition was fitted on (the plan's uniform sample of the fit's seed)
    model = sampled.nystrom_model_
    F = model.factors([np.asarray(v, dtype=np.float64) for v in views]).astype(np.float64)
    mask = uniform_row_mask(F.shape[0], 1500, 0)
    forms = _estimated_forms(F, sampled.labels_, mask, model.offsets, 4)
    expected = float(sampled.weights_**2 @ (sampled.traces_ - np.minimum(forms,
                                                                          sampled.traces_)))
    assert sampled.inertia_ == pytest.approx(expected, rel=1e-5)
    # ... within a few percent of the objective of every row's sums
    every_forms = _estimated_forms(F, sampled.labels_, np.ones_like(mask), model.offsets, 4)
    exact = float(sampled.weights_**2 @ (sampled.traces_ - np.minimum(every_forms,
                                                                       sampled.traces_)))
    assert sampled.inertia_ == pytest.approx(exact, rel=0.05)
