"""Typed backend options and the factory: a bad option is refused in one line before any
kernel is computed, any Dask cluster is started or any store is written."""

from __future__ import annotations

import numpy as np
import pytest

import mkrk_dask.backends.construction as construction
import mkrk_dask.backends.factory as factory
from mkrk_dask import MKKMRK
from mkrk_dask.backends import (
    BlockwiseOptions,
    ExactOptions,
    NystromOptions,
    make_backend,
    make_options,
    option_names,
)

X = np.random.default_rng(0).normal(size=(40, 5))

BAD = [
    (dict(solver="blockwise", backend_options={"prodcts": "fused"}), "unknown option 'prodcts'"),
    (dict(solver="blockwise", backend_options={"products": "both"}), "products must be one of"),
    (dict(solver="blockwise", backend_options={"eigen_depth": 2.5}), "eigen_depth must be an int"),
    (dict(solver="exact", backend_options={"eigen_method": 3}), "eigen_method must be one of"),
    (dict(solver="exact", backend_options={"local_threshold": 0}), "unknown option"),
    (dict(solver="exact", backend_options={"copy": "no"}), "copy must be True or False"),
    (dict(solver="nystrom", backend_options={"n_landmarks": 0}),
     "n_landmarks must be an integer >= 1"),
    (dict(solver="nystrom", backend_options={"n_landmarks": [10, -1]}),
     "n_landmarks must be an integer >= 1"),
    (dict(solver="nystrom", backend_options={"n_landmarks": "many"}),
     "n_landmarks must be an integer"),
    (dict(solver="nystrom", backend_options={"landmarks": "random"}), "landmarks must be one of"),
    (dict(solver="nystrom", backend_options={"dtype": "float16"}), "dtype must be one of"),
    (dict(solver="exact", backend_options={"dtype": "float16"}), "dtype must be one of"),
    (dict(solver="blockwise", backend_options={"chunk_size": 0}),
     "chunk_size must be an integer >= 1"),
    (dict(solver="exact", backend_options={"n_landmarks": 300}),
     "unknown option 'n_landmarks' for solver='exact'"),
    (dict(solver="blockwise", backend_options={"landmarks": "uniform"}),
     "unknown option 'landmarks' for solver='blockwise'"),
    (dict(solver="nystrom", backend_options={"local_threshold": -1.0}), "local_threshold must"),
    (dict(solver="auto", backend_options={"nonsense": 1}), "no backend has them"),
    (dict(solver="auto", backend_options={"n_landmarks": -3}),
     "n_landmarks must be an integer >= 1"),
    (dict(solver="auto", backend_options={"dtype": "int8"}), "dtype must be one of"),
    (dict(solver="blockwise", backend_options=["products"]),
     "backend_options must be None or a dict"),
]


@pytest.mark.parametrize("params, message", BAD)
def test_bad_option_is_refused_before_any_work(params, message, tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(construction, "DaskSession", lambda *a, **k: started.append(1))
    monkeypatch.setattr(factory, "make_backend", lambda *a, **k: started.append(2))
    store = tmp_path / "store.zarr"
    # (the exact backend takes no store: refused on its own, test_bad_input)
    model = MKKMRK.paper(3, **({} if params.get("solver") == "exact" else {"store": store}),
                         **params)
    with pytest.raises(ValueError, match=message) as caught:
        model.fit(X)
    assert "\n" not in str(caught.value)
    assert started == []
    assert not store.exists()


def test_options_are_typed_and_complete():
    assert make_options("exact") == ExactOptions()
    assert make_options("blockwise", products="fused").products == "fused"
    nys = make_options("nystrom", n_landmarks=[3, 4], dtype=np.float32)
    assert isinstance(nys, NystromOptions) and nys.n_landmarks == (3, 4) and nys.dtype == "float32"
    assert "local_threshold" in option_names("nystrom") and "products" in option_names("blockwise")
    with pytest.raises(ValueError, match="solver must be one of"):
        make_options("magic")
    with pytest.raises(TypeError):
        make_backend({"products": "fused"}, views=[X], specs=[])


def test_factory_refuses_inconsistent_inputs():
    with pytest.raises(ValueError, match="either views"):
        make_backend(ExactOptions())
    with pytest.raises(ValueError, match="needs features"):
        make_backend(NystromOptions(), kernels=np.eye(3)[None])
    with pytest.raises(ValueError, match="need kernel specifications"):
        make_backend(BlockwiseOptions(), views=[X])


def test_auto_ignores_options_of_the_backends_it_did_not_choose():
    # exact at this size; the blockwise option is accepted (auto may have chosen blockwise)
    model = MKKMRK.paper(3, solver="auto", backend_options={"products": "fused"},
                   random_state=0).fit(X)
    assert model.solver_ == "exact"
