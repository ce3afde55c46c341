"""The scikit-learn face: conventions, fitted attributes, repeatability, bad input."""

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import check_estimator

from mkrk_dask import MKKMRK, AnchorGraphClustering, lambda_search

#: how many rows of scikit-learn's digits the shared ``digits`` fixture gives (conftest.py)
DIGITS_ROWS = 200


@pytest.mark.parametrize("kernels", ["auto", "paper",
                                     ["polynomial(a=1,b=2)", "gaussian(c=0.1)", "gaussian(c=1)"]])
def test_scikit_learn_estimator_checks(kernels):
    # Every check passes, those whose data hold all-zero rows too: the kernels of directions
    # (the default's cosine and angular Gaussians, the paper's cosine and polynomial a=0)
    # give such rows a direction of their own.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(MKKMRK(n_clusters=3, random_state=0, max_iter=5, kernels=kernels))


def test_fitted_attributes(digits):
    X, _ = digits
    model = MKKMRK.paper(10, lam=2.0**-8, random_state=0).fit(X)
    n, m = X.shape[0], 12
    assert model.labels_.shape == (n,)
    assert model.weights_.shape == (m,) and model.weights_.sum() == pytest.approx(1.0)
    assert model.representation_.shape == (m, m)
    np.testing.assert_allclose(model.representation_.sum(axis=0), 1.0, atol=1e-12)
    np.testing.assert_allclose(model.embedding_.T @ model.embedding_, np.eye(10), atol=1e-8)
    assert model.dissimilarity_.shape == (m, m)
    assert model.objective_history_.shape == (model.n_iter_,)
    assert set(model.selected_kernels_) == set(np.flatnonzero(model.weights_ >= 1e-3))
    assert len(model.kernel_names_) == m and model.kernel_names_[0] == "cosine"
    assert model.n_features_in_ == X.shape[1]
    assert model.solver_ == "exact"
    assert "weights" in model.summary()
    t = model.timings_
    phases = t["build"] + t["total"] + t["embedding"] + t["kmeans"]
    assert min(t.values()) >= 0 and phases <= t["fit"] * (1 + 1e-9)


def test_random_state_makes_runs_repeatable(digits):
    X, _ = digits
    a = MKKMRK.paper(10, random_state=7).fit_predict(X)
    b = MKKMRK.paper(10, random_state=7).fit_predict(X)
    np.testing.assert_array_equal(a, b)


def test_sparse_and_multiview_input(digits):
    X, _ = digits
    dense = MKKMRK.paper(10, random_state=0).fit(X)
    sparse = MKKMRK.paper(10, random_state=0).fit(sp.csr_matrix(X))
    np.testing.assert_allclose(sparse.weights_, dense.weights_, atol=1e-9)
    multi = MKKMRK.paper(10, kernels=["cosine", "gaussian(c=0.1)@1", "gaussian(c=1)@1"],
                   random_state=0).fit([X, X[:, :32]])
    assert multi.weights_.shape == (3,)
    assert multi.kernel_names_[1] == "gaussian(c=0.1)@1"


@pytest.mark.parametrize("measure", ["vn", "ld"])
def test_divergence_measures_run(digits, measure):
    X, _ = digits
    model = MKKMRK.paper(10, dissimilarity=measure, max_iter=5, random_state=0).fit(X[:80])
    assert np.all(model.qp_relative_gaps_ <= 1e-8)


def test_lambda_search_reuses_kernels(digits):
    X, y = digits
    results = lambda_search(MKKMRK.paper(10, random_state=0), X, [2.0**-10, 2.0**0], y=y,
                            n_repeats=3)
    assert [r.lam for r in results] == [2.0**-10, 1.0]
    assert all(len(r.scores) == 3 and len(r.labels) == 3 for r in results)
    single = MKKMRK.paper(10, lam=2.0**-10, random_state=0).fit(X)
    np.testing.assert_allclose(results[0].weights, single.weights_, atol=1e-12)


def bad_inputs():
    X = np.random.default_rng(0).normal(size=(20, 4))
    nan = X.copy()
    nan[2, 1] = np.nan
    K = X @ X.T
    asym = np.stack([K, K + np.triu(np.ones_like(K), 1)])
    return [
        ({}, nan, "NaN"),
        ({}, X[:, 0], "2D array"),
        ({}, np.zeros((3, 4, 5)), "dim 3"),
        ({"kernels": "precomputed"}, asym, "not symmetric"),
        ({"kernels": "precomputed"}, np.zeros((2, 20, 19)), "square"),
        ({"kernels": "precomputed"}, np.stack([K, np.full_like(K, np.nan)]), "NaN"),
        ({"n_clusters": 21}, X, "n_clusters=21 is larger than n_samples=20"),
        ({"lam": -1.0}, X, "lam must be a finite number >= 0"),
        ({"lam": float("nan")}, X, "lam must be a finite"),
        ({"dissimilarity": "euclid"}, X, "dissimilarity"),
        ({"solver": "magic"}, X, "solver must be one of"),
        ({"kernels": ["cubic"]}, X, "cannot parse kernel"),
        ({"tol": 0}, X, "tol must be a positive"),
        ({}, [X, X[:10]], "same number of rows"),
    ]


@pytest.mark.parametrize("params, X, message", bad_inputs())
def test_bad_input_gets_a_clear_error(params, X, message):
    params = {"n_clusters": 3, **params}
    with pytest.raises(ValueError, match=message):
        MKKMRK.paper(**params).fit(X)


@pytest.mark.parametrize("cls", [MKKMRK, AnchorGraphClustering])
def test_views_by_name_and_errors_naming_them(digits, cls):
    X = digits[0][:60]
    params = ({"kernels": ["linear", "gaussian(m=1)@1"], "solver": "exact"}
              if cls is MKKMRK else {"n_anchors": 20})
    model = cls(3, random_state=0, **params).fit({"pixels": X, "half": X[:, :32]})
    assert model.view_names_ == ["pixels", "half"]
    # a dict is matched by name, whatever its order
    np.testing.assert_array_equal(model.predict({"half": X[:, :32], "pixels": X}),
                                  model.labels_)
    fitted = "the model was fitted on 2 views (pixels: 64 columns, half: 32 columns)"
    with pytest.raises(ValueError, match=re.escape(f"{fitted}; got 1 view of 96 columns")):
        model.predict(np.hstack([X, X[:, :32]]))
    with pytest.raises(ValueError, match=re.escape(f"{fitted}; view half has 30 columns")):
        model.predict([X, X[:, :30]])
    with pytest.raises(ValueError, match="no view half"):
        model.predict({"pixels": X, "other": X[:, :32]})
    # views given in a list are named by their place
    assert cls(3, random_state=0, **params).fit([X, X[:, :32]]).view_names_ == ["view0",
                                                                                "view1"]


def test_n_features_in_for_multiview_input(digits):
    # A list of views has no single count: n_features_in_ is the total, n_features_per_view_
    # the count of every view; predict still takes the views, not their concatenation.
    import dask.array as da

    X = digits[0][:60]
    kernels = ["linear", "gaussian(m=1)@1"]
    model = MKKMRK(3, kernels=kernels, solver="exact", max_iter=5, random_state=0)
    model.fit([X, X[:, :32]])
    assert model.n_features_in_ == 96 and model.n_features_per_view_ == (64, 32)
    np.testing.assert_array_equal(model.predict([X, X[:, :32]]), model.labels_)
    with pytest.raises(ValueError, match="fitted on 2 view"):
        model.predict(np.hstack([X, X[:, :32]]))
    # a refit records the new input, whatever the previous one was
    model.set_params(kernels=["linear"]).fit(X[:, :10])
    assert model.n_features_in_ == 10 and model.n_features_per_view_ == (10,)
    model.set_params(kernels=kernels).fit([da.from_array(X, chunks=(20, 64)), X[:, :32]])
    assert model.n_features_in_ == 96 and model.n_features_per_view_ == (64, 32)
    K = X @ X.T
    model.set_params(kernels="precomputed").fit(np.stack([K, K**2]))
    assert not hasattr(model, "n_features_in_") and not hasattr(model, "n_features_per_view_")



def test_dtype_takes_a_numpy_dtype(digits):
    # np.dtype("float32") was refused by the parameter constraints (only a type or a string)
    X = digits[0][:150]
    for dtype in (np.dtype("float32"), np.float32, "float32"):
        model = MKKMRK(3, kernels=["linear", "gaussian(m=1)"], solver="nystrom",
                       max_iter=5, random_state=0,
                       backend_options={"n_landmarks": 30, "dtype": dtype}).fit(X)
        assert model.nystrom_model_.dtype == np.float32


def test_a_refit_keeps_nothing_of_the_earlier_fit(digits):
    # A refit with another solver or dictionary is a fresh fit: no attribute, and no summary
    # line, of the earlier one survives (the Nystrom ranks of 2 kernels once broke the
    # summary of a refit with more kernels).
    X = digits[0][:150]
    model = MKKMRK(3, kernels=["cosine", "gaussian(m=1)"], solver="nystrom", max_iter=5,
                   random_state=0, backend_options={"n_landmarks": 30}).fit(X)
    assert hasattr(model, "nystrom_ranks_") and hasattr(model, "nystrom_model_")
    model.set_params(solver="exact", kernels="auto", backend_options=None).fit(X)
    assert not [name for name in vars(model) if name.startswith("nystrom")]
    assert len(model.kernel_names_) > 2 and "Nystrom" not in model.summary()
    assert model.plan_.decision("kernels").auto and "kernels: cosine" in model.summary()
    model.set_params(solver="auto", kernels=["linear"]).fit(X)
    assert not model.plan_.decision("kernels").auto and len(model.kernel_names_) == 1
    assert "solver: exact (auto:" in model.summary() and hasattr(model, "solver_reason_")
    model.set_params(solver="exact").fit(X)
    assert not hasattr(model, "solver_reason_") and "solver: exact (given)" in model.summary()

def test_column_names_are_not_kept_for_a_list_of_views(digits):
    pd = pytest.importorskip("pandas")
    X = digits[0][:60]
    frame = pd.DataFrame(X, columns=[f"px{j}" for j in range(64)])
    model = MKKMRK(3, kernels=["linear"], solver="exact", max_iter=5, random_state=0)
    assert list(model.fit(frame).feature_names_in_) == list(frame.columns)
    model.set_params(kernels=["linear", "linear@1"]).fit([frame, X[:, :8]])
    assert not hasattr(model, "feature_names_in_") and model.n_features_in_ == 72


@pytest.mark.parametrize("params, name", [({"normalize": "yes"}, "normalize"),
                                          ({"verbose": "loud"}, "verbose")])
def test_a_parameter_of_the_wrong_type_is_a_one_line_error_naming_it(digits, params, name):
    from sklearn.utils._param_validation import InvalidParameterError

    with pytest.raises(ValueError, match=f"^{name} must be ") as caught:
        MKKMRK(3, **params).fit(digits[0][:30])
    assert isinstance(caught.value, InvalidParameterError)
    assert "\n" not in str(caught.value) and repr(params[name]) in str(caught.value)


def test_grid_search_with_a_clustering_score_picks_a_number_of_clusters():
    from sklearn.datasets import make_blobs
    from sklearn.metrics import adjusted_rand_score, make_scorer
    from sklearn.model_selection import GridSearchCV

    X, y = make_blobs(90, centers=3, n_features=4, cluster_std=0.6, random_state=0)
    search = GridSearchCV(MKKMRK(2, kernels=["linear", "gaussian(m=1)"], solver="exact",
                                 random_state=0),
                          {"n_clusters": [2, 3]}, scoring=make_scorer(adjusted_rand_score),
                          cv=2)
    search.fit(X, y)
    assert search.best_params_ == {"n_clusters": 3}
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and scores[1] > scores[0]
    assert search.best_estimator_.n_clusters == 3 and search.predict(X).shape == (90,)
