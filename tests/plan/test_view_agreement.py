"""The default's view weights on three or more views: each view weighed by how far its own
partition agrees with the other views' (mkrk_dask.view_agreement, issue 76)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import normalized_mutual_info_score

from mkrk_dask import MKKMRK
from mkrk_dask.view_agreement import view_scores

K = 4


def _views(n: int = 400, seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    """Two views that tell the same four clusters (different columns, different noise)."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(K), n // K)
    # clusters that overlap a little: each view alone leaves some rows in doubt
    a = rng.normal(scale=1.3, size=(K, 5))[y] + rng.normal(size=(n, 5))
    b = rng.normal(scale=1.3, size=(K, 8))[y] + rng.normal(size=(n, 8))
    return [a, b], y


def _gaussian_view(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 8))


def _shuffled(view: np.ndarray, seed: int = 2) -> np.ndarray:
    return view[np.random.default_rng(seed).permutation(view.shape[0])]


def test_view_scores_mean_agreement_with_the_others():
    agreement = np.array([[1.0, 0.6, 0.0], [0.6, 1.0, -0.1], [0.0, -0.1, 1.0]])
    np.testing.assert_allclose(view_scores(agreement), [0.3, 0.3, 0.0])


@pytest.mark.parametrize("noise", ["gaussian", "shuffled"])
def test_a_view_of_noise_drops_out(noise):
    views, y = _views()
    extra = _gaussian_view(len(y)) if noise == "gaussian" else _shuffled(views[0])
    model = MKKMRK(K, random_state=0).fit([*views, extra])
    assert model.plan_.view_weights == "agreement"
    assert model.view_weights_.shape == (3,)
    np.testing.assert_allclose(model.view_weights_.sum(), 1.0)
    assert model.view_weights_[2] < 0.1, model.view_weights_
    # a view's share is the sum of its kernels' weights, each kernel at its view's score
    views_of = np.array([s.view for s in model.kernels_])
    for v in range(3):
        np.testing.assert_allclose(model.weights_[views_of == v].sum(), model.view_weights_[v])
        assert np.ptp(model.weights_[views_of == v]) < 1e-12
    clean = MKKMRK(K, random_state=0).fit(views)  # the two views alone
    noisy_equal = MKKMRK(K, random_state=0, view_weights="equal").fit([*views, extra])
    score = normalized_mutual_info_score(y, model.labels_)
    assert score >= normalized_mutual_info_score(y, clean.labels_) - 0.02
    # the check can fail: with equal weights the same noise costs the partition
    assert normalized_mutual_info_score(y, noisy_equal.labels_) < score


def test_when_the_rule_applies():
    views, y = _views(200)
    three = [*views, _gaussian_view(len(y))]
    assert MKKMRK(K).plan(views).view_weights == "equal"  # two views: one number for both
    assert MKKMRK(K).plan(three).view_weights == "agreement"
    assert MKKMRK(K, lam=0.5).plan(three).view_weights == "equal"  # learned weights
    assert MKKMRK.paper(K).plan(three).view_weights == "equal"
    assert MKKMRK(K, solver="nystrom").plan(three).view_weights == "equal"
    assert MKKMRK(K, view_weights="agreement").plan(views).view_weights == "agreement"
    decision = MKKMRK(K).plan(three).decision("view weights")
    assert decision.auto and "agrees with no other" in decision.reason
    model = MKKMRK(K, random_state=0, view_weights="equal").fit(three)
    assert not hasattr(model, "view_weights_")
    np.testing.assert_allclose(model.weights_, np.full(len(model.kernels_),
                                                       1 / len(model.kernels_)))


def test_agreement_weights_predict_the_fit():
    views, y = _views()
    three = [*views, _gaussian_view(len(y))]
    model = MKKMRK(K, random_state=0).fit(three)
    # predict maps the fitted rows to the labels of the fit (the same learned kernel)
    agree = normalized_mutual_info_score(model.labels_, model.predict(three))
    assert agree > 0.95


def test_view_weights_refused_in_one_line():
    views, _ = _views(100)
    with pytest.raises(ValueError, match="view_weights"):
        MKKMRK(K, view_weights="best").fit(views)


def test_agreement_without_views_is_refused_in_one_line():
    views, _ = _views(60)
    kernels = np.stack([v @ v.T for v in views])
    with pytest.raises(ValueError, match="needs two or more views") as e:
        MKKMRK(K, kernels="precomputed", view_weights="agreement").fit(kernels)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="got one view"):
        MKKMRK(K, view_weights="agreement").plan(views[0])


def test_views_that_agree_alike_keep_equal_weights_whatever_their_kernels():
    # A view of one kernel (links: the cosine alone) beside views of four: shared out per view,
    # its one kernel outweighed each of theirs 16x in K_w, and a noise view added to two real
    # ones (weighed at zero) still changed the fit by turning the real views' 4 : 1 into 1 : 4.
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(K), 60)
    n = y.size
    links = (rng.random((n, n)) < np.where(y[:, None] == y[None, :], 0.1, 0.002)).astype(float)
    links = np.triu(links, 1)
    links = links + links.T
    a, b = _views(n)[0][0], _views(n, seed=5)[0][1]  # the same four clusters, row by row
    model = MKKMRK(K, random_state=0).fit([a, b, links])
    counts = np.bincount([s.view for s in model.kernels_])
    assert counts[2] == 1 and counts[0] > 1  # the link view has the cosine alone
    scores = np.asarray(model.view_agreement_).copy()
    per_view = np.clip(scores, 0, None).sum(axis=1) - 1  # minus the diagonal
    views_of = np.array([s.view for s in model.kernels_])
    expected = per_view[views_of] / per_view[views_of].sum()
    np.testing.assert_allclose(model.weights_, expected, rtol=1e-12)
    # the link view's one kernel weighs what each of the others' does where the scores match
    assert model.weights_[views_of == 2][0] < 2 * model.weights_[views_of == 0].max()
