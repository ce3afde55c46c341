"""The PSD test's float32 factorisation on kernels with entries below float32's normal range
(a narrow Gaussian kernel): those entries are flushed to zero first (subnormal arithmetic
took 1.2 s on one COIL20 kernel against 20 ms for the others), and the test still accepts
PSD kernels and refuses kernels with an eigenvalue below the shift."""

from __future__ import annotations

import numpy as np
import pytest

from mkrk_dask import psd_digests
from mkrk_dask.precomputed import PSD_TOL, _check_psd, _flush_tiny, prepare_precomputed


def _narrow_gaussian(n: int = 300, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    sq = np.sum(X**2, axis=1)
    D = np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0)
    K = np.exp(-D / 0.05)  # most entries far below 1e-38, many of them not zero in float64
    return (K + K.T) / 2


def _with_eigenvalue(K: np.ndarray, value: float, seed: int = 1) -> np.ndarray:
    """K with its smallest eigenvalue moved to ``value`` along a random direction."""
    values, vectors = np.linalg.eigh(K)
    values[0] = value
    out = (vectors * values) @ vectors.T
    out = (out + out.T) / 2
    return out


def test_the_kernel_has_float32_subnormal_entries():
    K = _narrow_gaussian()
    tiny = np.abs(K) < np.finfo(np.float32).tiny
    assert tiny.mean() > 0.1 and np.any(K[tiny] > 0)


def test_flush_zeroes_only_entries_below_the_threshold():
    K = _narrow_gaussian().astype(np.float32)
    n = K.shape[0]
    shift = PSD_TOL * n
    flushed = K.copy()
    _flush_tiny(flushed, shift)
    threshold = np.float32(shift * 2.0**-20 / n)
    keep = np.abs(K) >= threshold
    np.testing.assert_array_equal(flushed[keep], K[keep])
    assert not np.any(flushed[~keep])
    smallest = np.abs(flushed[flushed != 0]).min()
    assert smallest >= np.finfo(np.float32).tiny
    # The change is far inside the shift the test allows (2-norm at most n * threshold).
    assert np.linalg.norm(flushed.astype(np.float64) - K, 2) <= 2.0**-20 * shift


def test_a_psd_narrow_kernel_is_accepted():
    K = _narrow_gaussian()
    _check_psd(K, 0, PSD_TOL)
    prepare_precomputed(K)


@pytest.mark.parametrize("relative", [1e-3, 1e-2])
def test_a_negative_eigenvalue_is_refused(relative):
    """An eigenvalue of -1e-3 (relative to the largest diagonal entry, 1) is below the shift,
    PSD_TOL n = 3e-4 at n = 300: refused, with the kernel named."""
    K = _with_eigenvalue(_narrow_gaussian(), -relative)
    with pytest.raises(ValueError, match="precomputed kernel 4 is not positive semi-definite"):
        _check_psd(K, 4, PSD_TOL)
    with pytest.raises(ValueError, match="precomputed kernel 1 is not positive semi-definite"):
        prepare_precomputed(np.stack([_narrow_gaussian(seed=2), K]), normalize=False)


def test_an_eigenvalue_inside_the_shift_is_accepted():
    K = _with_eigenvalue(_narrow_gaussian(), -1e-5)
    _check_psd(K, 0, PSD_TOL)


def test_a_kernel_that_passed_is_not_factorised_again(monkeypatch):
    """The PSD test keeps the digests of the kernels that passed: a second fit on the same
    kernels skips their factorisations; any change to an entry, the tolerance or the layout
    tests again, and a refusal is never kept."""
    from mkrk_dask import precomputed
    from mkrk_dask._packed import PackedLayout
    from mkrk_dask.precomputed import PackedKernel

    calls = []
    real = precomputed.cholesky_info

    def counting(a):
        calls.append(a.dtype)
        return real(a)

    monkeypatch.setattr(precomputed, "cholesky_info", counting)
    monkeypatch.setattr(psd_digests, "_PASSED", type(psd_digests._PASSED)())
    K = _narrow_gaussian(n=120, seed=5)
    _check_psd(K, 0, PSD_TOL)
    assert len(calls) == 1
    _check_psd(K.copy(), 0, PSD_TOL)  # the same entries in another array
    assert len(calls) == 1
    changed = K.copy()
    changed[3, 7] = changed[7, 3] = changed[3, 7] + 1e-12
    _check_psd(changed, 0, PSD_TOL)
    assert len(calls) == 2
    _check_psd(K, 0, 10 * PSD_TOL)  # another tolerance
    assert len(calls) == 3
    layout = PackedLayout(120)
    packed = np.empty(layout.size)
    for a, b, strip in layout.strips(packed):
        strip[...] = K[a:b, a:]
    _check_psd(PackedKernel(packed, layout), 0, PSD_TOL)  # another layout: tested
    _check_psd(PackedKernel(packed, layout), 0, PSD_TOL)
    assert len(calls) == 4
    bad = _with_eigenvalue(K, -1e-2)
    for _ in range(2):
        with pytest.raises(ValueError, match="precomputed kernel 2 is not positive"):
            _check_psd(bad, 2, PSD_TOL)
    assert len(calls) == 4 + 2 * 2  # float32, then float64, both times
    # A view that is not one contiguous block is tested, not hashed through a copy.
    wide = np.zeros((120, 240))
    wide[:, ::2] = K
    _check_psd(wide[:, ::2], 0, PSD_TOL)
    _check_psd(wide[:, ::2], 0, PSD_TOL)
    assert len(calls) == 10


def test_the_digest_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(psd_digests, "_PASSED", type(psd_digests._PASSED)())
    monkeypatch.setattr(psd_digests, "PSD_CACHE_SIZE", 3)
    for seed in range(5):
        _check_psd(_narrow_gaussian(n=40, seed=seed), 0, PSD_TOL)
    assert len(psd_digests._PASSED) == 3
