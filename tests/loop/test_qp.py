"""Tests of the Y-step QP (mkrk_dask.qp) against independent references.

Every check recomputes what it relies on (objective, Frank-Wolfe gap) from the textbook
formulas below rather than trusting the module's own numbers; the optimum Y is not unique, so
solutions are compared by objective and gap, never by Y.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning

from mkrk_dask.qp import (
    QPCertificationError,
    QPSolution,
    RepresentativeQP,
    UncertifiedSolutionWarning,
    frank_wolfe_gap,
    kkt_residuals,
    yqp_gradient,
    yqp_objective,
)

LAMBDAS = 2.0 ** np.arange(-15, 6, 4)  # the paper's grid, every 4th value


# ---- independent references ---------------------------------------------------------------


def ref_objective(Y, d, C, lam):
    m = C.shape[0]
    s = Y.sum(axis=1)
    return sum(d[i] * s[i] ** 2 for i in range(m)) / m**2 + lam * np.sum(C * Y)


def ref_gap(Y, d, C, lam):
    """Frank-Wolfe gap straight from its definition."""
    m = C.shape[0]
    G = (2.0 / m**2) * (d * Y.sum(axis=1))[:, None] + lam * C
    return sum(Y[:, j] @ G[:, j] - G[:, j].min() for j in range(m))


def objective_scale(Y, d, C, lam):
    """What a relative gap is relative to: |f| for C >= 0 (plus the documented floor)."""
    m = C.shape[0]
    quad = np.sum(d * Y.sum(axis=1) ** 2) / m**2
    floor = 1e-15 * (d.max() + lam * m * np.abs(C).max())
    return max(quad + abs(lam * np.sum(C * Y)), floor)


def gram_dissimilarity(rng, m, scale):
    """A PSD, Gram-like C (like fip = tr(K_i K_j)) with entries up to ``scale``."""
    X = np.abs(rng.standard_normal((m, max(2, m // 2))))
    C = X @ X.T
    return C / C.max() * scale


def residuals_spanning_magnitudes(rng, m):
    """d from 1e-7 to 1e4, one exact zero and one 1e-7 (the large-sigma Gaussian kernels)."""
    d = 10.0 ** rng.uniform(-7, 4, m)
    d[0] = 0.0
    d[1 % m] = 1e-7 if m > 1 else d[0]
    d[-1] = 1e4
    return d


def check_solution(sol, d, C, lam, gap_tol=1e-8):
    """Feasibility, certificate and KKT checks that every solve must pass."""
    Y = sol.Y
    assert isinstance(sol, QPSolution)
    assert Y.shape == C.shape
    assert np.all(Y >= 0)
    np.testing.assert_allclose(Y.sum(axis=0), 1.0, rtol=0, atol=1e-12)
    f = ref_objective(Y, d, C, lam)
    assert sol.objective == pytest.approx(f, rel=1e-12, abs=1e-300)
    gap = ref_gap(Y, d, C, lam)
    scale = objective_scale(Y, d, C, lam)
    assert gap <= gap_tol * scale, (gap, scale)
    assert sol.certified
    assert sol.relative_gap <= gap_tol
    assert sol.gap == pytest.approx(gap, rel=1e-6, abs=1e-13 * scale)  # Y's own gap
    kkt = kkt_residuals(Y, d, C, lam)
    assert kkt["primal"] <= 1e-12
    assert kkt["dual"] == 0.0  # with nu = min_i G_ij, by construction
    assert kkt["complementarity"] <= gap_tol
    return f


def solve_quietly(qp, d):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncertifiedSolutionWarning)  # no warning expected
        return qp.solve(d)


# ---- objective, gradient, gap, KKT ------------------------------------------------------------


def test_objective_gradient_and_gap_match_definitions():
    rng = np.random.default_rng(0)
    m = 5
    C = rng.standard_normal((m, m))
    d = rng.uniform(0, 3, m)
    lam = 0.7
    Y = rng.dirichlet(np.ones(m), size=m).T  # columns on the simplex
    assert yqp_objective(Y, d, C, lam) == pytest.approx(ref_objective(Y, d, C, lam), rel=1e-13)
    assert frank_wolfe_gap(Y, d, C, lam) == pytest.approx(ref_gap(Y, d, C, lam), rel=1e-12)
    G = yqp_gradient(Y, d, C, lam)
    h = 1e-6
    for i, j in [(0, 0), (2, 4), (4, 1)]:
        E = np.zeros((m, m))
        E[i, j] = h
        fd = (ref_objective(Y + E, d, C, lam) - ref_objective(Y - E, d, C, lam)) / (2 * h)
        assert G[i, j] == pytest.approx(fd, rel=1e-7)


def test_gap_bounds_suboptimality_and_kkt_flags_bad_points():
    rng = np.random.default_rng(1)
    m = 5
    C = gram_dissimilarity(rng, m, 1e3)
    d = 10.0 ** rng.uniform(-2, 3, m)
    lam = 2.0**-3
    sol = solve_quietly(RepresentativeQP(C, lam), d)
    for _ in range(5):
        Y = rng.dirichlet(np.ones(m), size=m).T
        f, gap = ref_objective(Y, d, C, lam), frank_wolfe_gap(Y, d, C, lam)
        assert f - gap <= sol.objective + 1e-9 * abs(sol.objective)  # a true lower bound
        assert gap > 1e-3 * abs(f)  # a random point is visibly suboptimal...
        assert kkt_residuals(Y, d, C, lam)["complementarity"] > 1e-4  # ...and not KKT
    # With a wrong multiplier the dual residual must show it.
    G = yqp_gradient(sol.Y, d, C, lam)
    assert kkt_residuals(sol.Y, d, C, lam, nu=G.min(axis=0) + 1.0)["dual"] > 0
    Y_bad = sol.Y.copy()
    Y_bad[0, 0] += 0.01
    assert kkt_residuals(Y_bad, d, C, lam)["primal"] == pytest.approx(0.01, rel=1e-6)


# ---- random problems --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "m, seed", [(3, 0), (3, 1), (5, 2), (5, 3), (12, 4), (12, 5), (12, 6), (30, 7)]
)
def test_random_problems_are_certified(m, seed):
    rng = np.random.default_rng(seed)
    C = gram_dissimilarity(rng, m, 10.0 ** rng.uniform(2, 6))
    d = residuals_spanning_magnitudes(rng, m)
    lams = LAMBDAS if m <= 12 else LAMBDAS[[0, 3, 5]]
    for lam in lams:
        sol = solve_quietly(RepresentativeQP(C, lam), d)
        check_solution(sol, d, C, lam)


@pytest.mark.parametrize("formulation", ["block", "lifted"])
def test_formulations_agree(formulation):
    rng = np.random.default_rng(11)
    m = 8
    C = gram_dissimilarity(rng, m, 1e5)
    d = residuals_spanning_magnitudes(rng, m)
    ref = solve_quietly(RepresentativeQP(C, 2.0**-7, formulation="lifted"), d)
    sol = solve_quietly(RepresentativeQP(C, 2.0**-7, formulation=formulation), d)
    check_solution(sol, d, C, 2.0**-7)
    assert sol.objective == pytest.approx(ref.objective, rel=2e-8)


def test_hard_cases_are_certified():
    """Duplicate kernels (ties everywhere), C with negative entries, sfn-like C with a zero
    diagonal, near-degenerate tiny lam * C against large d, and m = 1."""
    rng = np.random.default_rng(5)
    m = 12
    C = gram_dissimilarity(rng, m, 1e4)
    C[1], C[:, 1] = C[0], C[:, 0]
    d = 10.0 ** rng.uniform(-3, 3, m)
    d[1] = d[0]
    check_solution(solve_quietly(RepresentativeQP(C, 0.5), d), d, C, 0.5)

    C_neg = rng.standard_normal((m, m)) * 1e3
    check_solution(solve_quietly(RepresentativeQP(C_neg, 0.1), d), d, C_neg, 0.1)

    g = np.diag(C)
    C_sfn = g[:, None] + g[None, :] - 2 * C
    check_solution(solve_quietly(RepresentativeQP(C_sfn, 2.0**-5), d), d, C_sfn, 2.0**-5)

    C_small = gram_dissimilarity(rng, m, 1e2)
    d_big = 1e4 * (1 + 0.1 * rng.random(m))
    check_solution(solve_quietly(RepresentativeQP(C_small, 2.0**-15), d_big),
                   d_big, C_small, 2.0**-15)

    sol = solve_quietly(RepresentativeQP([[3.0]], 1.0), [2.0])
    np.testing.assert_array_equal(sol.Y, [[1.0]])
    assert sol.objective == pytest.approx(5.0)


@pytest.mark.parametrize("m, seed", [(5, 12), (12, 13), (30, 14)])
def test_polish_certifies_from_a_rough_osqp_point(m, seed):
    """25 ADMM iterations are nowhere near optimal; the active-set polish must still reach
    a certified optimum from there (and without it the result must not certify)."""
    rng = np.random.default_rng(seed)
    C = gram_dissimilarity(rng, m, 1e4)
    d = residuals_spanning_magnitudes(rng, m)
    lam = 2.0**-5
    with pytest.warns(UncertifiedSolutionWarning):
        rough = RepresentativeQP(C, lam, max_iter=25, polish=False).solve(d)
    assert rough.relative_gap > 1e-6
    sol = solve_quietly(RepresentativeQP(C, lam, max_iter=25), d)
    check_solution(sol, d, C, lam)
    assert sol.polish_rounds >= 1


def test_polish_saves_admm_iterations_on_near_degenerate_problems():
    """Tiny lam * C against large, similar d: nearly every row is active and ties abound.
    OSQP alone needs ~10^4 iterations to 1e-10; with the polish a loose stage suffices."""
    rng = np.random.default_rng(15)
    m = 8
    C = gram_dissimilarity(rng, m, 1e2)
    d = 1e4 * (1 + 0.1 * rng.random(m))
    lam = 2.0**-15
    polished = solve_quietly(RepresentativeQP(C, lam), d)
    check_solution(polished, d, C, lam)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedSolutionWarning)
        plain = RepresentativeQP(C, lam, polish=False).solve(d)
    assert polished.osqp_iterations < plain.osqp_iterations / 5
    assert polished.objective <= plain.objective + 1e-12 * abs(plain.objective)


# ---- independent optimum ----------------------------------------------------------------------


def scipy_reference_optimum(d, C, lam, rng, n_starts=3):
    """Best SLSQP objective over several starts (uniform, one-hot, random).

    The objective is divided by its value at the uniform Y: unscaled (values up to 1e6)
    SLSQP stopped up to 36% above the optimum.
    """
    m = C.shape[0]
    cons = [{"type": "eq", "fun": lambda x: x.reshape(m, m).sum(axis=0) - 1.0,
             "jac": lambda x: np.kron(np.ones(m), np.eye(m))}]
    scale = abs(ref_objective(np.full((m, m), 1.0 / m), d, C, lam))

    def fun(x):
        Y = x.reshape(m, m)
        G = (2.0 / m**2) * (d * Y.sum(axis=1))[:, None] + lam * C
        return ref_objective(Y, d, C, lam) / scale, G.ravel() / scale

    starts = [np.full((m, m), 1.0 / m), np.eye(m)]
    starts += [rng.dirichlet(np.ones(m), size=m).T for _ in range(n_starts - 2)]
    best = np.inf
    for Y0 in starts:
        res = scipy.optimize.minimize(fun, Y0.ravel(), jac=True, method="SLSQP",
                                      bounds=[(0, None)] * m * m, constraints=cons,
                                      options={"ftol": 1e-16, "maxiter": 1000})
        Y = np.clip(res.x.reshape(m, m), 0, None)
        Y /= Y.sum(axis=0)  # make it exactly feasible before scoring it
        best = min(best, ref_objective(Y, d, C, lam))
    return best


def scipy_dual_lower_bound(d, C, lam):
    """A certified lower bound on f* from the dual (needs every d_i > 0).

    f* = max_t sum_j min_i (t_i + lam C_ij) - sum_i t_i^2 / (2 a_i), a = 2 d / m^2, which
    is the QP  max sum_j nu_j - sum_i t_i^2 / (2 a_i)  s.t.  nu_j <= t_i + lam C_ij. SLSQP
    solves it; the dual function evaluated exactly at any t is a valid lower bound.
    """
    m = C.shape[0]
    a, c = 2.0 * d / m**2, lam * C
    scale = np.abs(c).max() + a.max() * m
    rows = np.arange(m * m)
    A = np.zeros((m * m, 2 * m))
    A[rows, rows // m] = 1.0  # t_i
    A[rows, m + rows % m] = -1.0  # - nu_j

    def fun(x):
        t, nu = x[:m], x[m:]
        value = -(nu.sum() - np.sum(t**2 / (2 * a))) / scale
        return value, np.concatenate([t / a, -np.ones(m)]) / scale

    cons = [{"type": "ineq", "fun": lambda x: (A @ x + c.ravel()) / scale,
             "jac": lambda x: A / scale}]
    x0 = np.concatenate([np.zeros(m), c.min(axis=0)])
    res = scipy.optimize.minimize(fun, x0, jac=True, method="SLSQP", constraints=cons,
                                  options={"ftol": 1e-16, "maxiter": 1000})
    t = res.x[:m]
    return np.sum((t[:, None] + c).min(axis=0)) - np.sum(t**2 / (2 * a))


@pytest.mark.parametrize(
    "m, seed, lam",
    [(3, 20, 2.0**-15), (3, 20, 2.0**5), (4, 21, 2.0**-7), (4, 21, 2.0**-1),
     (5, 22, 2.0**-15), (5, 22, 2.0**-1), (5, 23, 2.0**-7), (5, 23, 2.0**5)],
)
def test_objective_matches_scipy_reference(m, seed, lam):
    rng = np.random.default_rng(seed)
    C = gram_dissimilarity(rng, m, 10.0 ** rng.uniform(2, 5))
    d = 10.0 ** rng.uniform(-3, 3, m)
    sol = solve_quietly(RepresentativeQP(C, lam), d)
    scale = objective_scale(sol.Y, d, C, lam)
    primal = scipy_reference_optimum(d, C, lam, rng)
    dual = scipy_dual_lower_bound(d, C, lam)
    assert dual <= primal + 1e-12 * scale  # the references are consistent
    assert sol.objective <= primal + 1e-10 * scale  # at least as good as SLSQP
    assert sol.objective - dual <= 1e-9 * scale  # and provably optimal, independently
    assert sol.objective - sol.gap <= primal + 1e-12 * scale  # our bound is a lower bound


# ---- closed forms -----------------------------------------------------------------------------


def test_lam_zero_gives_inverse_residual_weights():
    rng = np.random.default_rng(30)
    m = 12
    C = gram_dissimilarity(rng, m, 1e4)
    d = 10.0 ** rng.uniform(-6, 4, m)
    sol = solve_quietly(RepresentativeQP(C, 0.0), d)
    check_solution(sol, d, C, 0.0)
    expected = (1.0 / d) / np.sum(1.0 / d)
    np.testing.assert_allclose(sol.weights, expected, rtol=1e-12)
    np.testing.assert_allclose(sol.Y.sum(axis=1) / m, expected, rtol=1e-12)
    assert sol.objective == pytest.approx(1.0 / np.sum(1.0 / d), rel=1e-12)
    # Same optimum when lam > 0 but C = 0.
    sol0 = solve_quietly(RepresentativeQP(np.zeros((m, m)), 3.0), d)
    assert sol0.objective == pytest.approx(sol.objective, rel=1e-12)


def test_lam_zero_with_a_zero_residual_puts_all_weight_there():
    d = np.array([2.0, 0.0, 1e-7, 5.0, 0.0])
    sol = solve_quietly(RepresentativeQP(np.ones((5, 5)), 0.0), d)
    assert sol.objective == 0.0
    assert sol.certified
    np.testing.assert_allclose(sol.weights[d > 0], 0.0, atol=0)
    assert sol.weights[d == 0].sum() == pytest.approx(1.0)


@pytest.mark.parametrize("m, seed", [(4, 40), (12, 41)])
def test_zero_residuals_is_the_linear_program(m, seed):
    rng = np.random.default_rng(seed)
    C = gram_dissimilarity(rng, m, 1e5) + rng.uniform(0, 1e3, (m, m))
    lam = 2.0**-3
    d = np.zeros(m)
    sol = solve_quietly(RepresentativeQP(C, lam), d)
    check_solution(sol, d, C, lam)
    lp = scipy.optimize.linprog(lam * C.ravel(), A_eq=np.kron(np.ones(m), np.eye(m)),
                                b_eq=np.ones(m), bounds=(0, None), method="highs")
    assert lp.status == 0
    assert sol.objective == pytest.approx(lp.fun, rel=1e-12)


def test_tiny_negative_residuals_are_round_off():
    C = gram_dissimilarity(np.random.default_rng(50), 4, 1e3)
    d = np.array([1.0, -1e-14, 3.0, 2.0])
    sol = solve_quietly(RepresentativeQP(C, 0.1), d)
    check_solution(sol, np.maximum(d, 0), C, 0.1)


# ---- warm start -------------------------------------------------------------------------------


@pytest.mark.parametrize("formulation", ["block", "lifted"])
def test_warm_started_sequence_matches_fresh_solves(formulation):
    rng = np.random.default_rng(60)
    m = 12
    C = gram_dissimilarity(rng, m, 1e5)
    d = residuals_spanning_magnitudes(rng, m)
    lam = 2.0**-5
    warm = RepresentativeQP(C, lam, formulation=formulation)
    warm_iters = fresh_iters = skipped = 0
    for _ in range(8):
        d = d * np.exp(0.03 * rng.standard_normal(m))  # slow drift, zeros stay zero
        sol = solve_quietly(warm, d)
        fresh = solve_quietly(RepresentativeQP(C, lam, formulation=formulation), d)
        check_solution(sol, d, C, lam)
        tol = 2e-8 * objective_scale(sol.Y, d, C, lam)
        assert abs(sol.objective - fresh.objective) <= tol
        warm_iters += sol.osqp_iterations
        fresh_iters += fresh.osqp_iterations
        skipped += sol.osqp_status == "skipped_warm_polish"
    assert warm.n_solves == 8
    assert warm_iters < fresh_iters  # the warm start actually saves work...
    assert skipped >= 4  # ...mostly by polishing the previous support without any ADMM


def test_pattern_survives_zero_then_positive_residuals():
    """P's sparsity is fixed at setup: a first d with zeros must not break later updates."""
    rng = np.random.default_rng(70)
    m = 6
    C = gram_dissimilarity(rng, m, 1e3)
    d0 = 10.0 ** rng.uniform(-3, 3, m)
    d0[[1, 3]] = 0.0
    d1 = 10.0 ** rng.uniform(-3, 3, m)
    qp = RepresentativeQP(C, 0.3, polish=False, eps=1e-9)
    qp.solve(d0)
    again = qp.solve(d1)
    fresh = RepresentativeQP(C, 0.3, polish=False, eps=1e-9).solve(d1)
    assert again.objective == pytest.approx(fresh.objective, rel=1e-7)


def test_timings_are_recorded():
    rng = np.random.default_rng(80)
    C = gram_dissimilarity(rng, 5, 1e3)
    qp = RepresentativeQP(C, 0.5)
    sol = solve_quietly(qp, 10.0 ** rng.uniform(-2, 2, 5))
    assert set(sol.timings) == {"osqp", "polish", "total"}
    assert sol.timings["total"] >= sol.timings["osqp"] + sol.timings["polish"] > 0
    assert qp.total_time["total"] == pytest.approx(sol.timings["total"])
    assert qp.last_solution is sol


# ---- errors and uncertified results -----------------------------------------------------------


@pytest.mark.parametrize(
    "C, lam, match",
    [
        ([[1.0, np.nan], [0.0, 1.0]], 1.0, "NaN"),
        ([[1.0, np.inf], [0.0, 1.0]], 1.0, "NaN or infinite"),
        (np.ones((2, 3)), 1.0, "square"),
        (np.ones(3), 1.0, "square"),
        (np.ones((2, 2)), -1.0, "lam"),
        (np.ones((2, 2)), np.nan, "lam"),
        (np.ones((2, 2)), "big", "lam"),
    ],
)
def test_bad_problem_data_raises(C, lam, match):
    with pytest.raises(ValueError, match=match):
        RepresentativeQP(C, lam)


@pytest.mark.parametrize(
    "d, match",
    [
        ([1.0, np.nan, 1.0], "NaN"),
        ([1.0, 2.0], "shape"),
        ([[1.0, 2.0, 3.0]], "shape"),
        ([1.0, -1e-3, 1.0], ">= 0"),
    ],
)
def test_bad_residuals_raise(d, match):
    qp = RepresentativeQP(np.ones((3, 3)), 1.0)
    with pytest.raises(ValueError, match=match):
        qp.solve(d)


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="formulation"):
        RepresentativeQP(np.ones((2, 2)), 1.0, formulation="dense")
    with pytest.raises(ValueError, match="eps"):
        RepresentativeQP(np.ones((2, 2)), 1.0, eps=0.0)


def uncertifiable_problem():
    rng = np.random.default_rng(90)
    m = 6
    return gram_dissimilarity(rng, m, 1e4), 10.0 ** rng.uniform(-2, 3, m), 2.0**-3


def test_uncertified_solution_warns():
    assert issubclass(UncertifiedSolutionWarning, ConvergenceWarning)
    C, d, lam = uncertifiable_problem()
    qp = RepresentativeQP(C, lam, max_iter=1, polish=False)
    with pytest.warns(UncertifiedSolutionWarning, match="not certified"):
        sol = qp.solve(d)
    assert not sol.certified
    assert sol.relative_gap > 1e-8
    assert sol.relative_gap == pytest.approx(
        ref_gap(sol.Y, d, C, lam) / objective_scale(sol.Y, d, C, lam), rel=1e-6)
    np.testing.assert_allclose(sol.Y.sum(axis=0), 1.0, atol=1e-12)  # still feasible


def test_uncertified_solution_raises_when_strict():
    assert issubclass(QPCertificationError, RuntimeError)
    C, d, lam = uncertifiable_problem()
    qp = RepresentativeQP(C, lam, max_iter=1, polish=False, strict=True)
    with pytest.raises(QPCertificationError, match="gap"):
        qp.solve(d)


def test_ctrl_c_during_an_osqp_solve_interrupts():
    """OSQP traps SIGINT during a solve and returns early; the Y-step must pass the interrupt
    on instead of carrying on with an unfinished solution (``mkrk`` exits 130 on Ctrl-C)."""
    import os
    import signal
    import threading
    import time

    rng = np.random.default_rng(0)
    m = 60
    C = gram_dissimilarity(rng, m, 1e4)
    qp = RepresentativeQP(C, 2.0**-15, polish=False)
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt), warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedSolutionWarning)
        while time.perf_counter() - start < 10:  # mostly inside OSQP
            qp.solve(1e4 * (1 + 0.1 * rng.random(m)))
    assert time.perf_counter() - start < 5
