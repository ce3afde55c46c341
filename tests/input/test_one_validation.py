"""One validation system (issue 78): every public parameter of every estimator, backend options
class, dense method and search or protocol function has exactly one declared constraint, checked
by :func:`mkrk_dask.validation.check_constraints`; a bad value is a one-line error naming it."""

from __future__ import annotations

import inspect
from dataclasses import fields, is_dataclass

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

import mkrk_dask
import mkrk_dask.dense_methods as dense_methods
from mkrk_dask.backends import options as options_module
from mkrk_dask.protocol import run_protocol
from mkrk_dask.search import lambda_search
from mkrk_dask.validation import check_constraints


def _estimators() -> list[type]:
    """The classes :mod:`mkrk_dask` exports that have ``get_params``."""
    found = [getattr(mkrk_dask, name) for name in mkrk_dask.__all__]
    return [obj for obj in found if inspect.isclass(obj) and hasattr(obj, "get_params")]


def _option_classes() -> list[type]:
    """The options dataclasses: every class of the backends' options module whose fields are
    user parameters (every solver's, and the store options they share)."""
    return [obj for obj in vars(options_module).values()
            if inspect.isclass(obj) and is_dataclass(obj)
            and obj.__module__ == options_module.__name__]


def _dense_methods() -> list:
    """The functions :mod:`mkrk_dask.dense_methods` exports (the dense Table 2 baselines)."""
    found = [getattr(dense_methods, name) for name in dense_methods.__all__]
    return [obj for obj in found if inspect.isfunction(obj)]


ESTIMATORS = _estimators()
OPTIONS = _option_classes()
DENSE_METHODS = _dense_methods()
#: every function whose parameters are declared (:func:`mkrk_dask.validation.constrained`)
FUNCTIONS = [*DENSE_METHODS, lambda_search, run_protocol, mkrk_dask.make_multiview_blobs]


def test_the_lists_are_complete():
    names = {cls.__name__ for cls in ESTIMATORS}
    assert {"MKKMRK", "MKKM", "MKKMMR", "SimpleMKKM", "AnchorGraphClustering"} <= names
    assert set(options_module.SOLVER_OPTIONS.values()) <= set(OPTIONS)
    assert {func.__name__ for func in DENSE_METHODS} == {"rmkkm", "lmkkm"}


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda cls: cls.__name__)
def test_every_estimator_parameter_has_one_constraint(cls):
    params = set(cls().get_params(deep=False))
    assert set(cls._parameter_constraints) == params


@pytest.mark.parametrize("cls", OPTIONS, ids=lambda cls: cls.__name__)
def test_every_option_has_one_constraint(cls):
    assert set(cls._parameter_constraints) == {f.name for f in fields(cls)}


@pytest.mark.parametrize("func", FUNCTIONS, ids=lambda func: func.__name__)
def test_every_function_parameter_has_one_constraint(func):
    assert set(func._parameter_constraints) == set(inspect.signature(func).parameters)


def test_the_qp_parameters_have_one_constraint_each():
    cls = mkrk_dask.RepresentativeQP
    params = set(inspect.signature(cls).parameters)
    assert set(cls._parameter_constraints) == params
    _one_line_error(lambda: cls(np.ones((2, 2)), 1.0, max_iter=0), "max_iter", 0)


def _one_line_error(call, name, value):
    with pytest.raises((ValueError, TypeError)) as caught:
        call()
    message = str(caught.value)
    assert isinstance(caught.value, InvalidParameterError)
    assert message.startswith(f"{name} must be ") and "\n" not in message
    assert repr(value) in message


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda cls: cls.__name__)
def test_a_bad_estimator_parameter_is_one_line_naming_it(cls):
    X = np.random.default_rng(0).normal(size=(20, 3))
    _one_line_error(lambda: cls(n_clusters=0).fit(X), "n_clusters", 0)


@pytest.mark.parametrize("cls, name, value", [
    (options_module.ExactOptions, "eigen_method", "qr"),
    (options_module.BlockwiseOptions, "eigen_depth", 2.5),
    (options_module.NystromOptions, "n_landmarks", [10, -1]),
    (options_module.NystromOptions, "diagonal_correction", "yes"),
])
def test_a_bad_option_is_one_line_naming_it(cls, name, value):
    _one_line_error(lambda: cls(**{name: value}), name, value)


@pytest.mark.parametrize("func", DENSE_METHODS, ids=lambda func: func.__name__)
def test_a_bad_dense_method_argument_is_one_line_naming_it(func):
    kernels = np.stack([np.eye(6)] * 2)
    _one_line_error(lambda: func(kernels, 2, max_iter=1.5), "max_iter", 1.5)
    _one_line_error(lambda: func(kernels, 2, check_input="no"), "check_input", "no")


def test_the_options_check_what_they_checked():
    # bools are no numbers; numpy's numbers and bools are
    nys = options_module.NystromOptions
    for bad in ({"chunk_size": True}, {"rank_tol": 1.0}, {"local_threshold": float("nan")},
                {"rel_floor": float("inf")},
                {"n_landmarks": []}, {"store_factors": np.True_}, {"blas_threads": 0}):
        with pytest.raises(ValueError, match=f"^{next(iter(bad))} must be "):
            nys(**bad)
    assert nys(n_landmarks=np.array([3, 4]), chunk_size=np.int64(8),
               diagonal_correction=np.True_, landmark_oversampling=float("inf")).n_landmarks \
        == (3, 4)


def test_a_long_value_is_quoted_in_one_short_line():
    with pytest.raises(ValueError) as caught:
        check_constraints({"lam": np.ones((40, 40))}, {"lam": [None]})
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 120


def test_a_bad_search_or_protocol_argument_is_one_line_naming_it(tmp_path):
    model = mkrk_dask.MKKMRK.paper(2)
    X = np.random.default_rng(0).normal(size=(20, 3))
    _one_line_error(lambda: lambda_search(model, X, [1.0], n_repeats=2.0), "n_repeats", 2.0)
    _one_line_error(lambda: lambda_search(model, X, [1.0], callback=3), "callback", 3)
    _one_line_error(lambda: run_protocol(["orl"], data_dir=tmp_path, threads=0), "threads", 0)
