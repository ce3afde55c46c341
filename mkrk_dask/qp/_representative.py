"""The Y-step QP of MKKM-RK, solved with OSQP and the active-set polish, and certified.

The problem and its certificate are in :mod:`._problem`.

How it is solved. One OSQP workspace per (C, lam) is built once and reused across the
alternating loop; each solve only updates P's values and q. The result is then refined by an
*active-set KKT polish* (a primal active-set method with exact line searches: solve the KKT
equations on a guessed support by least squares, step towards that point as far as Y >= 0
allows, add the most violated entry, repeat). The polish matters because the large-sigma
Gaussian kernels have tiny ``d_i``: their weights move while the objective barely does, and ADMM
needs 10-100x more iterations to reach 1e-10 than to find the right support. So OSQP runs in
tightening stages (1e-6, 1e-8, ``eps``), each followed by the polish, and stops at the first
certified result; a warm solve first tries the polish alone from the previous solution and
skips OSQP when that certifies. Every candidate is feasible and certified with the Frank-Wolfe
gap; the one with the smallest objective is returned. An uncertified result is never silent:
it warns (:class:`UncertifiedSolutionWarning`) or, with ``strict=True``, raises
(:class:`QPCertificationError`).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import osqp
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, StrOptions

from ..exceptions import QPCertificationError, UncertifiedSolutionWarning
from ..validation import LAM, constrained
from ._active_set import (
    _KKT_CONSISTENT,
    _POLISH_MAX_UNKNOWNS,
    _PROX_MU,
    _closed_form_lam0,
    _closed_form_lp,
    _initial_support,
    _line_search,
    _prices,
    _project_columns,
    _solve_kkt_on_support,
)
from ._problem import (
    _TINY,
    QPSolution,
    _check_C,
    _check_d,
    _fw_gap_from_gradient,
    _gradient,
    _objective_parts,
    _objective_scale,
)

__all__ = ["RepresentativeQP"]

#: OSQP's status when Ctrl-C arrived during a solve
_OSQP_SIGINT = (osqp.SolverStatus.OSQP_SIGINT.value if hasattr(osqp, "SolverStatus")
                else osqp.constant("OSQP_SIGINT"))


# --------------------------------------------------------------------------------------------
# OSQP layouts
# --------------------------------------------------------------------------------------------


@dataclass
class _Layout:
    """Sparsity patterns and constant data of one OSQP formulation of the Y-step.

    Variables start with row-major ``vec(Y)`` (index ``i*m + j``). ``P_row[k]`` says which
    price ``a_i = 2 d_i / m^2`` the k-th stored entry of P carries, so ``Px = a[P_row]``; the
    pattern stores every entry explicitly, zeros included, so it never changes with ``d``.
    """

    formulation: str
    m: int
    n_var: int
    P_indices: np.ndarray
    P_indptr: np.ndarray
    P_row: np.ndarray
    A: sp.csc_matrix
    l: np.ndarray
    u: np.ndarray


def _column_sum_rows(m: int, n_var: int) -> sp.csc_matrix:
    k = np.arange(m * m)
    return sp.csc_matrix((np.ones(m * m), (k % m, k)), shape=(m, n_var))


def _bound_rows(m: int, n_var: int) -> sp.csc_matrix:
    k = np.arange(m * m)
    return sp.csc_matrix((np.ones(m * m), (k, k)), shape=(m * m, n_var))


def _block_layout(m: int) -> _Layout:
    """P block-diagonal over vec(Y), block i = a_i 1 1^T (upper triangle); A = [colsum; I]."""
    n = m * m
    col = np.arange(n)
    blk = col // m  # the row i of Y that variable k = i*m + j belongs to
    counts = col % m + 1  # upper triangle of a dense m x m block: its column j has j+1 entries
    indptr = np.concatenate([[0], np.cumsum(counts)])
    nnz = int(indptr[-1])
    indices = np.repeat(blk * m, counts) + np.arange(nnz) - np.repeat(indptr[:-1], counts)
    A = sp.vstack([_column_sum_rows(m, n), _bound_rows(m, n)], format="csc")
    A.sort_indices()
    l = np.concatenate([np.ones(m), np.zeros(n)])
    u = np.concatenate([np.ones(m), np.full(n, np.inf)])
    return _Layout("block", m, n, indices.astype(np.int64), indptr.astype(np.int64),
                   np.repeat(blk, counts), A, l, u)


def _lifted_layout(m: int) -> _Layout:
    """Variables [vec(Y), s]: P = diag(0, a) (only the s entries stored), A = [colsum;
    rowsum(Y) - s; I]. Same optimum, but P has m entries instead of m^2 (m+1)/2."""
    n = m * m
    n_var = n + m
    indptr = np.concatenate([np.zeros(n + 1, dtype=np.int64), np.arange(1, m + 1)])
    indices = np.arange(n, n_var, dtype=np.int64)
    k = np.arange(n)
    row_def = sp.csc_matrix(
        (np.concatenate([np.ones(n), -np.ones(m)]),
         (np.concatenate([k // m, np.arange(m)]), np.concatenate([k, n + np.arange(m)]))),
        shape=(m, n_var))
    A = sp.vstack([_column_sum_rows(m, n_var), row_def, _bound_rows(m, n_var)], format="csc")
    A.sort_indices()
    l = np.concatenate([np.ones(m), np.zeros(m), np.zeros(n)])
    u = np.concatenate([np.ones(m), np.zeros(m), np.full(n, np.inf)])
    return _Layout("lifted", m, n_var, indices, indptr, np.arange(m), A, l, u)


_LAYOUTS = {"block": _block_layout, "lifted": _lifted_layout}


@dataclass
class _Candidate:
    """A feasible point with its objective, Frank-Wolfe gap and objective scale."""

    Y: np.ndarray
    objective: float
    fw_gap: float
    scale: float


class RepresentativeQP:
    """The Y-step QP for a fixed ``C`` and ``lam``, solved repeatedly for changing ``d``.

    The OSQP problem is built once: ``P`` is block-diagonal over row-major ``vec(Y)`` with
    block i equal to ``(2 d_i / m^2) 1 1^T`` (stored with explicit entries even when
    ``d_i = 0``, so its sparsity never changes), ``q = lam vec(C)``, and ``A`` stacks the
    column-sum rows over the identity. Each :meth:`solve` only updates ``P``'s values and
    ``q`` (both divided by a per-solve cost scale so OSQP always sees O(1) data) and is
    warm-started from the previous solution, since the alternating loop changes ``d`` slowly.

    Parameters
    ----------
    C : array_like of shape (m, m)
        Dissimilarity matrix (finite).
    lam : float
        Weight of the representation cost (finite, ``>= 0``).
    gap_tol : float, default 1e-8
        A solution is *certified* when its relative Frank-Wolfe gap is at most this.
    eps : float, default 1e-10
        OSQP ``eps_abs`` and ``eps_rel``.
    max_iter : int, default 200_000
        OSQP iteration cap.
    polish : bool, default True
        Run the active-set KKT polish after OSQP. (OSQP's own polishing is always on.)
    strict : bool, default False
        Raise :class:`QPCertificationError` instead of warning when a solution is not
        certified.
    formulation : {"lifted", "block"}, default "lifted"
        ``"block"``: P block-diagonal over ``vec(Y)``, block i = ``(2 d_i/m^2) 1 1^T``.
        ``"lifted"``: the row sums ``s`` are extra variables tied to Y by ``m`` equality rows,
        so P is diagonal; same optimum, far sparser KKT system (about 3x faster per OSQP
        iteration at m = 30 and 10x at m = 100; in the alternating loop on 400 samples with
        the 12 paper kernels, warm solves took a median 3 ms lifted vs 22 ms block).

    Attributes
    ----------
    m : int
    n_solves : int
        Number of :meth:`solve` calls so far.
    total_time : dict
        Cumulative wall-clock seconds per phase (``"osqp"``, ``"polish"``, ``"total"``).
    last_solution : QPSolution or None
    """

    _parameter_constraints: dict = {
        "C": ["array-like"],  # its values: _check_C
        "lam": LAM,
        "gap_tol": [Interval(Real, 0, None, closed="left")],
        "eps": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "polish": ["boolean"],
        "strict": ["boolean"],
        "formulation": [StrOptions(set(_LAYOUTS))],
    }

    @constrained(_parameter_constraints)
    def __init__(self, C, lam, *, gap_tol: float = 1e-8, eps: float = 1e-10,
                 max_iter: int = 200_000, polish: bool = True, strict: bool = False,
                 formulation: str = "lifted"):
        self.C = _check_C(C)
        self.lam = float(lam)
        self.gap_tol = float(gap_tol)
        self.eps = float(eps)
        self.max_iter = int(max_iter)
        self.polish = bool(polish)
        self.strict = bool(strict)
        self.formulation = formulation
        self.m = self.C.shape[0]
        self._c = self.lam * self.C  # the linear cost, in the same units as the gradient
        self.n_solves = 0
        self.total_time = {"osqp": 0.0, "polish": 0.0, "total": 0.0}
        self.last_solution: QPSolution | None = None
        # Patterns are built once; OSQP itself is set up on the first solve that needs it,
        # so that its (fixed) Ruiz scaling is computed from real data rather than a guess.
        self._layout = _LAYOUTS[formulation](self.m)
        self._solver: osqp.OSQP | None = None
        self._Y_prev: np.ndarray | None = None
        self._fallback: RepresentativeQP | None = None

    # ---- OSQP problem -----------------------------------------------------------------------

    def _settings(self, eps: float) -> dict:
        return dict(eps_abs=eps, eps_rel=eps, polishing=True, verbose=False, adaptive_rho=True,
                    max_iter=self.max_iter, warm_starting=True, polish_refine_iter=10)

    def _eps_stages(self) -> list[float]:
        """OSQP tolerances to try in turn, loosest first.

        The KKT polish usually certifies from a 1e-6 OSQP point already (the support is what
        it needs, not digits), while driving ADMM to 1e-10 can take 10-100x more iterations
        or stall at ``max_iter`` on degenerate problems. So we tighten only until the result
        certifies; ADMM resumes from its own iterate between stages, so nothing is wasted.
        Without the polish there is nothing to stop early for: one stage at ``eps``.
        """
        if not self.polish:
            return [self.eps]
        return [e for e in (1e-6, 1e-8) if e > self.eps] + [self.eps]

    def _osqp_setup(self, Px: np.ndarray, q: np.ndarray, eps: float) -> None:
        lay = self._layout
        P = sp.csc_matrix((Px, lay.P_indices, lay.P_indptr), shape=(lay.n_var, lay.n_var))
        self._solver = osqp.OSQP()
        self._solver.setup(P, q, lay.A, lay.l, lay.u, **self._settings(eps))

    def _osqp_load(self, a: np.ndarray) -> None:
        """Put the data for prices ``a = 2 d / m^2`` into the workspace."""
        # Divide the cost by its largest coefficient: OSQP's Ruiz scaling is fixed at setup,
        # and d, lam C can span 1e-8 .. 1e6, so normalising per solve keeps its data O(1).
        cost_scale = max(float(np.max(a)), float(np.max(np.abs(self._c))), _TINY)
        lay = self._layout
        Px = a[lay.P_row] / cost_scale
        q = np.zeros(lay.n_var)
        q[: self.m**2] = self._c.ravel() / cost_scale
        if self._solver is None:
            self._osqp_setup(Px, q, self._eps_stages()[0])
        else:
            # warm_starting=True: ADMM resumes from its last iterate. We measured explicit
            # warm starts from the polished Y and its implied duals: never clearly better, and
            # sometimes they stalled ADMM (5000+ iterations instead of ~400 at m = 60).
            self._solver.update(Px=Px, q=q)

    def _osqp_run(self, eps: float, max_iter: int):
        """One OSQP solve at tolerance ``eps``; returns (Y or None, status, iterations)."""
        self._solver.update_settings(eps_abs=eps, eps_rel=eps, max_iter=max_iter)
        res = self._solver.solve(raise_error=False)
        if res.info.status_val == _OSQP_SIGINT:
            # OSQP traps Ctrl-C during a solve and returns; pass the interrupt on.
            raise KeyboardInterrupt
        x = np.array(res.x, dtype=float)  # copy: OSQP reuses the buffer
        m = self.m
        ok = x.size == self._layout.n_var and np.all(np.isfinite(x))
        Y = x[: m * m].reshape(m, m) if ok else None
        return Y, str(res.info.status), int(res.info.iter)

    # ---- candidates and polish ----------------------------------------------------------------

    def _candidate(self, Y: np.ndarray, d: np.ndarray) -> _Candidate:
        quad, lin = _objective_parts(Y, d, self.C, self.lam)
        G = _gradient(Y, d, self.C, self.lam)
        return _Candidate(Y, quad + lin, max(_fw_gap_from_gradient(Y, G), 0.0),
                          _objective_scale(quad, lin, d, self.C, self.lam))

    def _polish(self, Y0: np.ndarray, d: np.ndarray, a: np.ndarray) -> tuple[list, int]:
        """Active-set KKT polish from ``Y0``; returns (feasible candidates, rounds run).

        A primal active-set method on the support ``S``, kept monotone by line searches:

        1. solve the KKT equations on ``S`` (the minimiser of f over matrices supported on
           ``S`` with unit column sums) and move towards it from the current feasible point,
           as far as ``Y >= 0`` allows; an entry that blocks the step leaves ``S``;
        2. if ``S`` holds ties that cannot all hold, those equations are inconsistent; a
           proximal KKT step (always a descent direction) replaces the exact one, and its line
           search soon drops an entry of the offending cycle;
        3. once an exact step is taken in full, Y minimises f on ``S``; if an entry outside
           ``S`` is cheaper than its column's multiplier (``G_ij < nu_j``), the most violated
           one joins ``S``; if none is, Y is a KKT point of the whole problem.

        f never increases, so the rounds cannot cycle the way "drop every negative entry,
        add every violated one" did (it oscillated between near-identical supports on
        near-degenerate problems). Every iterate is a feasible candidate for the certificate.
        """
        m = self.m
        c = self._c
        G0 = _prices(Y0, a, c)
        S = _initial_support(Y0, G0, y_thr=1e-7, r_thr=1e-6, max_size=_POLISH_MAX_UNKNOWNS - m)
        Y = _project_columns(np.where(S, Y0, 0.0), G0)
        cands = [self._candidate(Y, d)]
        rounds = 0
        # One round adds or removes about one support entry; from an OSQP point 1 round is
        # typical, from a poor start a few per active row.
        while rounds < 20 + 4 * m and S.sum() + m <= _POLISH_MAX_UNKNOWNS:
            rounds += 1
            target, _, misfit = _solve_kkt_on_support(S, a, c)
            exact = misfit <= _KKT_CONSISTENT
            if not exact:
                target, _, _ = _solve_kkt_on_support(S, a, c, center=Y, mu=_PROX_MU)
            Y_new, blocking = _line_search(Y, np.where(S, target - Y, 0.0), a, c)
            if Y_new is not None:
                Y = Y_new
                S &= ~blocking
                cand = self._candidate(Y, d)
                cands.append(cand)
                if cand.fw_gap <= 1e-3 * self.gap_tol * cand.scale:
                    break  # far below the certificate; further rounds cannot matter
                if np.any(blocking) or not exact:
                    continue  # re-solve on the new support / from the new point
            elif not exact:
                break  # no descent even with the proximal step: round-off level
            # Y minimises f on S: price the entries outside S.
            G = _prices(Y, a, c)
            nu = np.where(S, G, np.inf).min(axis=0)
            rho = np.where(S, np.inf, G - nu[None, :])
            # Price to the accuracy the certificate needs (a violation rho costs at most
            # |rho| per column), but not below round-off in G: with a data scale (lam * C)
            # far above the objective, a tolerance relative to max |G| stops too early.
            g_scale = max(float(np.max(np.abs(G))), _TINY)
            tol = max(min(1e-12 * g_scale, 1e-2 * self.gap_tol * cands[-1].scale / m),
                      1e-15 * g_scale)
            if not rho.min() < -tol:
                break  # a KKT point of the whole problem
            S[np.unravel_index(np.argmin(rho), rho.shape)] = True
        return cands, rounds

    # ---- public -------------------------------------------------------------------------------

    def solve(self, d) -> QPSolution:
        """Solve the Y-step for residuals ``d`` and certify the result.

        Parameters
        ----------
        d : array_like of shape (m,)
            Per-kernel residuals, finite and ``>= 0`` (negatives within round-off of 0 are
            set to 0).

        Returns
        -------
        QPSolution

        Raises
        ------
        ValueError
            On a malformed ``d``.
        QPCertificationError
            With ``strict=True`` when the relative gap exceeds ``gap_tol``.

        Warns
        -----
        UncertifiedSolutionWarning
            With ``strict=False`` when the relative gap exceeds ``gap_tol``.
        """
        t0 = time.perf_counter()
        d = _check_d(d, self.m)
        m = self.m
        a = (2.0 / m**2) * d
        timings = {"osqp": 0.0, "polish": 0.0}
        status, iters, rounds = "closed_form", 0, 0
        if not np.any(self._c):  # lam == 0 or C == 0: no linear cost
            cands = [self._candidate(_closed_form_lam0(d), d)]
        elif not np.any(d):
            cands = [self._candidate(_closed_form_lp(self._c), d)]
        else:
            cands, status, iters, rounds = self._solve_numerically(d, a, timings)
            if self.polish and self._certificate(cands)[1] > self.gap_tol:
                # The two formulations fail on different problems (seen: lifted stalls on an
                # "ld" C spanning 1e-8..1e8 that block certifies in 750 iterations), so the
                # other one gets a try before anything is reported uncertified.
                more, status, extra, more_rounds = self._other_formulation()._solve_numerically(
                    d, a, timings)
                cands += more
                iters += extra
                rounds += more_rounds
        sol = self._select(cands, status, iters, rounds)
        sol.timings = {**timings, "total": time.perf_counter() - t0}
        for key, value in sol.timings.items():
            self.total_time[key] += value
        self.n_solves += 1
        self._Y_prev = sol.Y.copy()
        self.last_solution = sol
        self._report(sol)
        return sol

    def restore(self, Y_prev: np.ndarray | None) -> None:
        """Continue from ``Y_prev`` as if it were the last solution (a resumed fit)."""
        self._Y_prev = None if Y_prev is None else np.array(Y_prev, dtype=float)

    def _solve_numerically(self, d: np.ndarray, a: np.ndarray, timings: dict):
        """OSQP in tightening stages, each followed by the KKT polish, until certified.

        Returns (candidates, last OSQP status, total iterations, total polish rounds).
        """
        m = self.m
        # A fresh OSQP workspace for every solve: the result is then a function of d and the
        # previous Y alone, so a resumed fit repeats the uninterrupted one to the bit.
        self._solver = None
        cands = []
        if self._Y_prev is not None:
            cands.append(self._candidate(self._Y_prev, d))  # a free fallback
        status, iters, rounds = "not_run", 0, 0
        if self.polish and self._Y_prev is not None:
            # The cheapest warm start: d moved a little, so the previous support is usually
            # still right and the KKT polish alone certifies; OSQP is then not needed at all.
            t = time.perf_counter()
            more, rounds = self._polish(self._Y_prev, d, a)
            timings["polish"] += time.perf_counter() - t
            cands.extend(more)
            if self._certificate(cands)[1] <= self.gap_tol:
                return cands, "skipped_warm_polish", 0, rounds
        t = time.perf_counter()
        self._osqp_load(a)
        timings["osqp"] += time.perf_counter() - t
        stages = self._eps_stages()
        for stage, eps in enumerate(stages):
            # Early stages get a bounded budget: if ADMM stalls there, the polish usually
            # certifies from wherever it stopped, and the last stage still has max_iter.
            budget = self.max_iter if stage == len(stages) - 1 else min(self.max_iter, 10_000)
            t = time.perf_counter()
            Y0, status, it = self._osqp_run(eps, budget)
            timings["osqp"] += time.perf_counter() - t
            iters += it
            if Y0 is not None:
                Y0 = _project_columns(Y0)
                cands.append(self._candidate(Y0, d))
            if self.polish:
                if Y0 is not None:
                    start = Y0
                elif cands:  # OSQP gave nothing usable: polish from the best point we have
                    start = min(cands, key=lambda z: z.objective).Y
                else:
                    start = np.full((m, m), 1.0 / m)
                t = time.perf_counter()
                more, r = self._polish(start, d, a)
                timings["polish"] += time.perf_counter() - t
                cands.extend(more)
                rounds += r
            if cands and self._certificate(cands)[1] <= self.gap_tol:
                break
        if not cands:
            cands.append(self._candidate(np.full((m, m), 1.0 / m), d))
        return cands, status, iters, rounds

    def _certificate(self, cands: list) -> tuple[_Candidate, float]:
        """The candidate to return and its relative gap.

        Among the certified candidates, the one with the smallest objective (any two differ
        by at most their gaps); if none is certified, the one with the smallest relative gap.
        Its own Frank-Wolfe gap is what we report, so users can recompute it from Y alone.
        """
        def rel(z: _Candidate) -> float:
            return z.fw_gap / z.scale

        certified = [z for z in cands if rel(z) <= self.gap_tol]
        best = min(certified, key=lambda z: z.objective) if certified else min(cands, key=rel)
        return best, rel(best)

    def _select(self, cands: list, status: str, iters: int, rounds: int) -> QPSolution:
        best, rel = self._certificate(cands)
        return QPSolution(Y=best.Y, objective=best.objective, gap=best.fw_gap, relative_gap=rel,
                          certified=bool(rel <= self.gap_tol), osqp_status=status,
                          osqp_iterations=iters, polish_rounds=rounds)

    def _other_formulation(self) -> RepresentativeQP:
        """The same problem in the other formulation (built once, on first need)."""
        if self._fallback is None:
            other = next(name for name in _LAYOUTS if name != self.formulation)
            self._fallback = RepresentativeQP(self.C, self.lam, gap_tol=self.gap_tol,
                                              eps=self.eps, max_iter=self.max_iter,
                                              polish=True, formulation=other)
        return self._fallback

    def _report(self, sol: QPSolution) -> None:
        if sol.certified:
            return
        msg = (f"Y-step QP not certified: relative Frank-Wolfe gap {sol.relative_gap:.3e} > "
               f"gap_tol {self.gap_tol:.1e} (gap {sol.gap:.3e}, objective "
               f"{sol.objective:.6e}, OSQP status {sol.osqp_status!r} after "
               f"{sol.osqp_iterations} iterations, {sol.polish_rounds} polish rounds)")
        if self.strict:
            raise QPCertificationError(msg)
        warnings.warn(msg, UncertifiedSolutionWarning, stacklevel=3)
