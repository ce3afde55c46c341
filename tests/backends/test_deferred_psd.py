"""The exact backend's PSD test beside the loop (precomputed.DeferredPsdTest): every kernel is
still tested, the lowest failing one is named, and no result comes out of kernels that fail."""

from __future__ import annotations

import time

import numpy as np
import pytest

from mkrk_dask import MKKMRK
from mkrk_dask._threads import local_threads, usable_cores
from mkrk_dask.backends.exact import ExactBackend
from mkrk_dask.precomputed import prepare_precomputed, prepare_precomputed_deferred

two_cores = pytest.mark.skipif(usable_cores() < 2, reason="the background test needs 2 cores")


def _stack(bad: tuple[int, ...] = (), m: int = 6, n: int = 200, seed: int = 0) -> np.ndarray:
    """``m`` Gaussian kernels of random data; those in ``bad`` get an eigenvalue of -1."""
    rng = np.random.default_rng(seed)
    kernels = []
    for p in range(m):
        X = rng.normal(size=(n, 4))
        sq = np.sum(X**2, axis=1)
        K = np.exp(-(sq[:, None] + sq[None, :] - 2 * X @ X.T) / (2.0 + p))
        if p in bad:
            v = rng.normal(size=n)
            v /= np.linalg.norm(v)
            K -= (np.linalg.eigvalsh(K)[0] + 1.0) * np.outer(v, v)
        kernels.append((K + K.T) / 2)
    return np.stack(kernels)


@pytest.mark.parametrize("hold_one_thread", [True, False])
def test_the_lowest_failing_kernel_is_named_with_or_without_a_background_thread(
        hold_one_thread):
    K = _stack(bad=(2, 4))
    _, test = prepare_precomputed_deferred(K)
    with local_threads(1 if hold_one_thread else None):
        test.start()
        assert test.background == (hold_one_thread and usable_cores() > 1)
        with pytest.raises(ValueError, match="precomputed kernel 2 is not positive semi"):
            test.wait()
    test.wait()  # raised once: a later wait (a backend's exit) does not raise it again
    assert test.seconds > 0


def test_the_deferred_copy_is_the_checked_copy():
    K = _stack()
    copy, test = prepare_precomputed_deferred(K)
    test.wait()
    np.testing.assert_array_equal(copy, prepare_precomputed(K))


def test_a_cancelled_test_is_resumed_by_wait():
    """close() cancels the test; a later wait tests the kernels it had not reached."""
    K = _stack(bad=(5,))
    _, test = prepare_precomputed_deferred(K)
    with local_threads(1):
        test.start()
        test.cancel()  # returns once the kernel in progress is done
    with pytest.raises(ValueError, match="precomputed kernel 5 is not positive semi"):
        test.wait()


@two_cores
def test_the_loop_raises_the_error_as_soon_as_it_is_known():
    backend = ExactBackend.from_precomputed(_stack(bad=(0,)))
    weights = np.full(6, 1 / 6)
    with local_threads(1):
        deadline = time.monotonic() + 30
        with pytest.raises(ValueError, match="precomputed kernel 0 is not positive semi"):
            try:
                # The first computation starts the test; with one small kernel to test, it
                # may raise the error already.
                backend.traces()
            finally:
                assert backend._psd_test.background
            while time.monotonic() < deadline:
                backend.combined_kernel(weights)
                time.sleep(0.01)
    backend.close()


def test_no_embedding_and_no_clean_exit_from_kernels_that_fail():
    K = _stack(bad=(3,))
    backend = ExactBackend.from_precomputed(K)
    top = backend.top_k(np.full(6, 1 / 6), 2)
    with pytest.raises(ValueError, match="precomputed kernel 3 is not positive semi"):
        backend.embedding(top)
    with pytest.raises(ValueError, match="precomputed kernel 3 is not positive semi"):
        with ExactBackend.from_precomputed(K):
            pass
    # Another error in the block is explained by the PSD test's, and chained to it.
    with pytest.raises(ValueError, match="kernel 3 is not positive semi") as caught:
        with ExactBackend.from_precomputed(K):
            raise RuntimeError("the loop failed")
    assert isinstance(caught.value.__context__, RuntimeError)
    # An interrupt is not held up by the test.
    with pytest.raises(KeyboardInterrupt):
        with ExactBackend.from_precomputed(K):
            raise KeyboardInterrupt


@two_cores
@pytest.mark.parametrize("bad", [(0,), (1, 4), (5,)])
def test_fit_refuses_every_failing_stack_with_the_background_test(bad):
    """The estimator's fit holds one BLAS thread at this n, so the test runs beside the loop;
    the error is the one the upfront test gives."""
    K = _stack(bad=bad)
    with pytest.raises(ValueError, match=f"precomputed kernel {bad[0]} is not positive") as a:
        MKKMRK.paper(3, kernels="precomputed").fit(K)
    with pytest.raises(ValueError) as b:
        prepare_precomputed(K)
    assert str(a.value) == str(b.value)


@two_cores
def test_the_final_step_runs_while_the_test_ends_and_publishes_nothing_before(monkeypatch):
    """The final k-means runs on ``draft_embedding`` while the test's last kernels are
    factorised; the fit sets none of its results before leaving the backend's block."""
    from mkrk_dask import precomputed

    real = precomputed._check_psd

    def slow(K, p, *args):
        if p == 5:
            time.sleep(1.0)
        real(K, p, *args)

    monkeypatch.setattr(precomputed, "_check_psd", slow)
    backend = ExactBackend.from_precomputed(_stack(bad=(5,)))
    with local_threads(1):
        top = backend.top_k(np.full(6, 1 / 6), 2)  # starts the test
        started = time.monotonic()
        H = backend.draft_embedding(top)
        assert time.monotonic() - started < 0.5
        np.testing.assert_array_equal(H, top.basis)
        with pytest.raises(ValueError, match="kernel 5 is not positive semi"):
            backend.embedding(top)
    backend.close()
    model = MKKMRK.paper(3, kernels="precomputed", final_step="features", n_components=4)
    with pytest.raises(ValueError, match="kernel 5 is not positive semi"):
        model.fit(_stack(bad=(5,)))
    assert not [name for name in ("labels_", "embedding_", "weights_", "n_components_",
                                  "component_scores_") if hasattr(model, name)]


def test_fit_on_good_kernels_is_the_fit_on_the_checked_copy():
    K = _stack()
    model = MKKMRK.paper(3, kernels="precomputed", random_state=0).fit(K)
    reference = MKKMRK.paper(3, kernels="precomputed", normalize=False,
                             random_state=0).fit(prepare_precomputed(K))
    np.testing.assert_array_equal(model.labels_, reference.labels_)
    np.testing.assert_allclose(model.weights_, reference.weights_, rtol=0, atol=1e-12)


@pytest.mark.parametrize("hold_one_thread", [True, False])
def test_a_kernel_the_test_could_not_factorise_is_an_error_not_a_pass(monkeypatch,
                                                                      hold_one_thread):
    from mkrk_dask import precomputed

    real = precomputed._check_psd

    def failing(K, p, *args):
        if p == 2:
            raise MemoryError("no room for the factorisation")
        real(K, p, *args)

    monkeypatch.setattr(precomputed, "_check_psd", failing)
    _, test = prepare_precomputed_deferred(_stack())
    with local_threads(1 if hold_one_thread else None):
        test.start()
        with pytest.raises(RuntimeError, match="kernel 2 could not be tested .*MemoryError"):
            test.wait()


def test_above_the_one_thread_size_the_test_is_made_before_any_work(monkeypatch):
    """There a fit holds no one-thread limit, so the test cannot run beside the loop: the
    backend refuses the kernels when it is made, as the upfront test did."""
    from mkrk_dask.backends import exact

    monkeypatch.setattr(exact, "SINGLE_THREAD_MAX_N", 100)
    with pytest.raises(ValueError, match="precomputed kernel 1 is not positive semi"):
        ExactBackend.from_precomputed(_stack(bad=(1, 3)))
    backend = ExactBackend.from_precomputed(_stack())
    assert backend.compute_threads() is None and not backend._psd_test.background
    backend.embedding(backend.top_k(np.full(6, 1 / 6), 2))
