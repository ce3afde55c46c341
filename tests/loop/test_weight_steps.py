"""Weight steps (mkrk_dask.weight_steps): MKKM-RK's Y-step gives w = Y 1 / m, certified."""

from __future__ import annotations

import numpy as np

from mkrk_dask.qp import frank_wolfe_gap, yqp_objective
from mkrk_dask.weight_steps import RepresentativeStep


def test_representative_step_returns_row_means_of_a_certified_y():
    rng = np.random.default_rng(3)
    A = rng.random((5, 5))
    C = A @ A.T
    d = rng.random(5) * 10
    step = RepresentativeStep(C, 0.1)
    np.testing.assert_array_equal(step.initial_representation(5), np.eye(5))
    np.testing.assert_allclose(step.initial_weights(5), 0.2)
    update = step.update(d)
    Y = update.representation
    np.testing.assert_allclose(update.weights, Y.sum(axis=1) / 5)
    np.testing.assert_allclose(update.weights.sum(), 1.0)
    assert update.objective == np.float64(yqp_objective(Y, d, C, 0.1))
    assert update.certified and frank_wolfe_gap(Y, d, C, 0.1) <= 1e-8 * update.objective
