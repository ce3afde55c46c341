"""chunk_size, n_landmarks, landmarks and dtype are backend options: set in
``backend_options`` only (the estimators take no keyword of those names), checked there once,
and built from the command line's flags."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone

from mkrk_dask import MKKM, MKKMMR, MKKMRK, SimpleMKKM
from mkrk_dask.cli import main
from mkrk_dask.model_io import load_model, save_model

X = np.random.default_rng(0).normal(size=(60, 4))
KERNELS = ["linear", "gaussian(m=1)"]
KNOBS = [("n_landmarks", 20, "nystrom"), ("landmarks", "uniform", "nystrom"),
         ("chunk_size", 16, "blockwise"), ("dtype", "float32", "nystrom")]
ESTIMATORS = [MKKMRK, MKKM, MKKMMR, SimpleMKKM]


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("name, value, solver", KNOBS)
def test_the_knob_is_no_parameter(cls, name, value, solver):
    with pytest.raises(TypeError, match=name):
        cls(3, **{name: value})
    assert name not in cls().get_params()
    with pytest.raises(ValueError, match=f"Invalid parameter {name!r}"):
        cls().set_params(**{name: value})


def test_the_backend_option_works():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = MKKMRK(3, kernels=KERNELS, solver="blockwise",
                      backend_options={"chunk_size": 10}).plan(X)
    assert plan.options["chunk_size"] == 10


@pytest.mark.parametrize("name, value, solver", KNOBS)
def test_the_option_plans_without_a_warning(name, value, solver):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        planned = MKKMRK(3, kernels=KERNELS, solver=solver,
                         backend_options={name: value}).plan(X)
    assert (planned.dtype if name == "dtype" else planned.options[name]) == value


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_every_estimator_takes_the_options(cls):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        plan = cls(3, kernels=KERNELS, solver="nystrom",
                   backend_options={"n_landmarks": 30, "dtype": "float32"}).plan(X)
    assert plan.options["n_landmarks"] == 30 and plan.dtype == "float32"


def test_the_options_fit(client):
    common = dict(kernels=KERNELS, solver="nystrom", scheduler=client, random_state=0,
                  max_iter=5)
    model = MKKMRK(3, backend_options={"n_landmarks": 25, "landmarks": "uniform"},
                   **common).fit(X)
    assert model.plan_.options["n_landmarks"] == 25
    assert model.plan_.options["landmarks"] == "uniform"


def test_options_of_the_backends_auto_did_not_choose_are_left_out():
    # solver="auto" keeps the options of the backend it chooses (here exact) and leaves the
    # others out, without a word; a given solver refuses an option it does not have
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = MKKMRK(3, kernels=KERNELS, backend_options={"n_landmarks": 300,
                                                           "chunk_size": 8}).plan(X)
    assert plan.solver == "exact" and "n_landmarks" not in plan.options
    with pytest.raises(ValueError, match="unknown option 'n_landmarks' for solver='exact'"):
        MKKMRK(3, solver="exact", backend_options={"n_landmarks": 300}).plan(X)


def test_auto_dtype_in_backend_options_is_resolved_by_the_plan():
    for solver, stored in (("nystrom", "float64"), ("exact", "float64")):
        plan = MKKMRK(3, kernels=KERNELS, solver=solver,
                      backend_options={"dtype": "auto"}).plan(X)
        assert plan.dtype == stored and plan.decision("dtype").auto
        assert plan == MKKMRK(3, kernels=KERNELS, solver=solver).plan(X)
    plan = MKKMRK(3, kernels=KERNELS, solver="nystrom",
                  backend_options={"dtype": np.float32}).plan(X)
    assert plan.dtype == "float32" and plan.options["dtype"] == "float32"
    assert not plan.decision("dtype").auto


def test_get_params_clone_and_set_params_round_trip():
    model = MKKMRK(3, backend_options={"n_landmarks": 40, "chunk_size": 8})
    twin = clone(model)
    assert twin.get_params() == model.get_params()
    model.set_params(backend_options={"n_landmarks": 50})
    assert model.get_params()["backend_options"] == {"n_landmarks": 50}
    model.set_params(backend_options={"n_landmarks": 60}, solver="nystrom")
    assert clone(model).get_params()["backend_options"] == {"n_landmarks": 60}
    assert model.plan(X).options["n_landmarks"] == 60


def test_the_command_line_builds_backend_options_from_its_flags(
        client, digits_npz: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        # the CLI keeps its flags and builds backend_options from them
        for solver in ("exact", "nystrom", "auto"):
            out = tmp_path / solver
            assert main(["fit", str(digits_npz), "-q", "--n-init", "2", "--solver", solver,
                         "--n-landmarks", "40", "--chunk-size", "50", "--landmarks",
                         "uniform", "--dtype", "auto", "--out", str(out)]) == 0
            plan = json.loads((out / "result.json").read_text())["plan"]
            if solver == "nystrom":
                assert plan["dtype"] == "float64" and {
                    k: plan["options"][k] for k in ("n_landmarks", "chunk_size", "landmarks")
                } == {"n_landmarks": 40, "chunk_size": 50, "landmarks": "uniform"}
            else:  # 150 rows: auto chooses exact
                assert plan["solver"] == "exact" and "n_landmarks" not in plan["options"]
        assert main(["fit", str(digits_npz), "--plan", "--solver", "nystrom",
                     "--n-landmarks", "40"]) == 0
        assert "solver: nystrom" in capsys.readouterr().out


def test_a_saved_model_keeps_the_options_and_names_no_knob(tmp_path):
    model = MKKMRK(3, kernels=KERNELS, solver="exact", random_state=0, n_init=2,
                   backend_options={"dtype": np.float32}).fit(X)
    folder = save_model(model, tmp_path / "model")
    document = json.loads((folder / "model.json").read_text())
    assert not {name for name, _, _ in KNOBS} & set(document["params"])
    assert document["params"]["backend_options"] == {"dtype": "float32"}
    loaded = load_model(folder)
    assert loaded.get_params()["backend_options"] == {"dtype": "float32"}
    np.testing.assert_array_equal(loaded.predict(X), model.labels_)
    assert loaded.plan(X).dtype == "float32"
