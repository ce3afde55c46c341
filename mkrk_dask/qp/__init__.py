"""The Y-step of MKKM-RK: a convex QP over a product of simplices, solved and certified.

- :mod:`._problem`: the objective, its gradient, the Frank-Wolfe gap and KKT residuals (usable
  on any Y, from any solver), and :class:`QPSolution`;
- :mod:`._active_set`: the closed forms and the active-set KKT polish;
- :mod:`._representative`: :class:`RepresentativeQP`, OSQP in tightening stages plus the
  polish, every solution certified by its duality gap;
- :mod:`._simplex`: :class:`SimplexQP`, a convex quadratic over one simplex (MKKM-MR's weight
  step), by an exact active-set method, certified the same way.
"""

from ..exceptions import QPCertificationError, UncertifiedSolutionWarning
from ._problem import QPSolution, frank_wolfe_gap, kkt_residuals, yqp_gradient, yqp_objective
from ._representative import RepresentativeQP
from ._simplex import SimplexQP, SimplexSolution, simplex_gap

__all__ = [
    "QPCertificationError",
    "QPSolution",
    "RepresentativeQP",
    "SimplexQP",
    "SimplexSolution",
    "UncertifiedSolutionWarning",
    "frank_wolfe_gap",
    "kkt_residuals",
    "simplex_gap",
    "yqp_gradient",
    "yqp_objective",
]
