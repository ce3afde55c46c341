"""chunk_size, n_landmarks, landmarks and dtype moved into backend_options: the old keywords
still work for one release, with one FutureWarning that names the replacement, and nothing in
the library itself gives that warning."""

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
MOVED = [("n_landmarks", 20, "nystrom"), ("landmarks", "uniform", "nystrom"),
         ("chunk_size", 16, "blockwise"), ("dtype", "float32", "nystrom")]


def _future_warnings(caught: list) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]


@pytest.mark.parametrize("name, value, solver", MOVED)
def test_old_keyword_warns_once_and_plans_as_the_option(name, value, solver):
    new = MKKMRK(3, kernels=KERNELS, solver=solver, backend_options={name: value})
    old = MKKMRK(3, kernels=KERNELS, solver=solver, **{name: value})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        planned = old.plan(X)
    messages = _future_warnings(caught)
    assert len(messages) == 1
    assert messages[0].startswith(f"{name} is deprecated as a parameter and will be removed "
                                  "in 0.3")
    assert f"backend_options={{{name!r}: {value!r}}}" in messages[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        expected = new.plan(X)
    assert planned == expected
    assert (planned.dtype if name == "dtype" else planned.options[name]) == value
    assert old.get_params()[name] == value  # the estimator keeps what it was given


@pytest.mark.parametrize("cls", [MKKMRK, MKKM, MKKMMR, SimpleMKKM])
def test_every_estimator_takes_the_new_spelling_and_warns_for_the_old(cls):
    params = cls().get_params()
    assert all(params[name] == "deprecated" for name, _, _ in MOVED)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        plan = cls(3, kernels=KERNELS, solver="nystrom",
                   backend_options={"n_landmarks": 30, "dtype": "float32"}).plan(X)
    assert plan.options["n_landmarks"] == 30 and plan.dtype == "float32"
    with pytest.warns(FutureWarning, match=r"n_landmarks, dtype are deprecated as parameters "
                                           r".*backend_options=\{'n_landmarks': 30, "
                                           r"'dtype': 'float32'\}") as caught:
        old = cls(3, kernels=KERNELS, solver="nystrom", n_landmarks=30, dtype="float32").plan(X)
    assert len(_future_warnings(caught)) == 1  # one warning for both
    assert old == plan


def test_old_keyword_fits_as_the_option(client):
    common = dict(kernels=KERNELS, solver="nystrom", scheduler=client, random_state=0,
                  max_iter=5)
    new = MKKMRK(3, backend_options={"n_landmarks": 25, "landmarks": "uniform"},
                 **common).fit(X)
    with pytest.warns(FutureWarning, match="n_landmarks, landmarks are deprecated") as caught:
        old = MKKMRK(3, n_landmarks=25, landmarks="uniform", **common).fit(X)
    assert len(_future_warnings(caught)) == 1
    np.testing.assert_array_equal(old.weights_, new.weights_)
    np.testing.assert_array_equal(old.labels_, new.labels_)
    assert old.plan_ == new.plan_ and new.plan_.options["n_landmarks"] == 25


@pytest.mark.parametrize("name, value, solver", MOVED)
def test_both_spellings_are_refused_in_one_line(name, value, solver):
    model = MKKMRK(3, kernels=KERNELS, solver=solver, backend_options={name: value},
                   **{name: value})
    with pytest.raises(ValueError, match=f"^{name} given both as a parameter and in "
                                         "backend_options; give it once") as caught:
        model.plan(X)
    assert "\n" not in str(caught.value)


def test_an_old_keyword_the_solver_lacks_is_ignored_as_before():
    # as a keyword, n_landmarks did nothing with the exact backend (and still does nothing)
    with pytest.warns(FutureWarning, match="n_landmarks does nothing with solver='exact'"):
        plan = MKKMRK(3, kernels=KERNELS, solver="exact", n_landmarks=300).plan(X)
    assert plan == MKKMRK(3, kernels=KERNELS, solver="exact").plan(X)
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
    assert twin.get_params()["n_landmarks"] == "deprecated"
    model.set_params(backend_options={"n_landmarks": 50})
    assert model.get_params()["backend_options"] == {"n_landmarks": 50}
    # set_params of an old keyword: kept as given, and the fit or plan warns
    model.set_params(n_landmarks=60, backend_options=None, solver="nystrom")
    assert clone(model).get_params()["n_landmarks"] == 60
    with pytest.warns(FutureWarning, match="n_landmarks is deprecated"):
        assert model.plan(X).options["n_landmarks"] == 60


def test_no_library_path_gives_the_future_warning(client, digits_npz: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        MKKMRK(3, random_state=0, n_init=2).fit(X)
        MKKMRK.paper(3, random_state=0, n_init=2).fit(X)
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


def test_a_model_saved_with_the_old_keywords_loads_without_them(tmp_path):
    model = MKKMRK(3, kernels=KERNELS, solver="exact", random_state=0, n_init=2).fit(X)
    folder = save_model(model, tmp_path / "model")
    document = json.loads((folder / "model.json").read_text())
    assert document["params"]["n_landmarks"] == "deprecated"
    # as the previous version wrote them: every keyword, at its default or not
    document["params"].update(chunk_size=None, n_landmarks=500, landmarks="kmeans++",
                              dtype="float32", solver="auto")
    (folder / "model.json").write_text(json.dumps(document))
    loaded = load_model(folder)
    params = loaded.get_params()
    assert all(params[name] == "deprecated" for name, _, _ in MOVED)
    assert params["backend_options"] == {"dtype": "float32"}  # the one not at its default
    np.testing.assert_array_equal(loaded.predict(X), model.labels_)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        assert loaded.plan(X).dtype == "float32"
