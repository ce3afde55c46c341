"""Fitted models saved as arrays + JSON (mkrk_dask.model_io): the same predictions after a
round trip, no pickle anywhere, and damaged or foreign files refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import load_digits

from mkrk_dask import MKKMRK
from mkrk_dask.model_io import load_model, save_model

X, _ = load_digits(return_X_y=True)
X = X[:240]
NEW = load_digits(return_X_y=True)[0][240:330]
KERNELS = ["cosine", "polynomial(a=1,b=2)", "gaussian(c=0.2)"]


@pytest.mark.parametrize("solver, extra", [
    ("exact", {}),
    ("blockwise", {}),
    ("nystrom", {"backend_options": {"n_landmarks": 40}}),
    ("nystrom", {"backend_options": {"n_landmarks": 40, "local_threshold": 0}}),
])
def test_round_trip_predicts_the_same(client, tmp_path, solver, extra):
    model = MKKMRK.paper(10, kernels=KERNELS, solver=solver, scheduler=client, random_state=0,
                   **extra).fit(X)
    folder = save_model(model, tmp_path / "model")
    assert sorted(p.name for p in folder.iterdir()) == ["arrays.npz", "model.json"]
    with np.load(folder / "arrays.npz", allow_pickle=False) as npz:  # no object arrays
        assert all(npz[k].dtype != object for k in npz.files)
    loaded = load_model(folder)
    assert type(loaded) is MKKMRK and loaded.get_params()["kernels"] == KERNELS
    assert isinstance(loaded.get_params()["scheduler"], str)  # the Client's address, kept
    for name in ("weights_", "labels_", "embedding_", "representation_", "cluster_centers_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    np.testing.assert_array_equal(loaded.predict(NEW), model.predict(NEW))
    np.testing.assert_array_equal(loaded.predict(X), model.labels_)
    assert loaded.summary() == model.summary()


def test_precomputed_kernels_model_has_no_row_map(tmp_path):
    K = np.stack([np.corrcoef(X) + 1.0, np.exp(-np.square(X[:, None] - X[None]).sum(-1) / 5e3)])
    model = MKKMRK.paper(10, kernels="precomputed", random_state=0).fit(K)
    loaded = load_model(save_model(model, tmp_path / "m"))
    np.testing.assert_array_equal(loaded.labels_, model.labels_)
    assert not hasattr(loaded, "predict")


def test_credentials_are_never_saved(tmp_path):
    model = MKKMRK.paper(10, kernels=KERNELS, random_state=0,
                   storage_options={"secret": "s3cr3t"}).fit(X)
    folder = save_model(model, tmp_path / "m")
    assert "s3cr3t" not in (folder / "model.json").read_text()


@pytest.mark.parametrize("damage, message", [
    (lambda f: (f / "model.json").write_text("{not json"), "not a model description"),
    (lambda f: (f / "model.json").write_text(json.dumps({"format": "other"})),
     "not an mkrk-dask model"),
    (lambda f: (f / "arrays.npz").write_bytes(b"PK\x03\x04 broken"), "cannot be read"),
    (lambda f: (f / "arrays.npz").unlink(), "holds no saved model"),
    # version 1 held the features step's centres of rows not scaled to unit length: its
    # predict would be wrong under the unit-row rule, so it is refused
    (lambda f: (f / "model.json").write_text(json.dumps(
        {**json.loads((f / "model.json").read_text()), "format_version": 1})),
     r"model format version 1; this version reads 4 \(fit and save the model again"),
    # version 2 records no digests to check its arrays against
    (lambda f: (f / "model.json").write_text(json.dumps(
        {**json.loads((f / "model.json").read_text()), "format_version": 2})),
     r"model format version 2; this version reads 4 \(fit and save the model again"),
    # version 3 names the storage knobs as parameters, which the estimators no longer take
    (lambda f: (f / "model.json").write_text(json.dumps(
        {**json.loads((f / "model.json").read_text()), "format_version": 3})),
     r"model format version 3; this version reads 4 \(fit and save the model again"),
])
def test_damaged_or_foreign_model_is_refused(tmp_path, damage, message):
    model = MKKMRK.paper(10, kernels=KERNELS, random_state=0).fit(X)
    folder = save_model(model, tmp_path / "m")
    damage(folder)
    with pytest.raises(ValueError, match=message) as caught:
        load_model(folder)
    assert "\n" not in str(caught.value)


def test_an_object_array_smuggled_into_the_npz_is_not_loaded(tmp_path):
    model = MKKMRK.paper(10, kernels=KERNELS, random_state=0).fit(X)
    folder = save_model(model, tmp_path / "m")
    with np.load(folder / "arrays.npz") as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["fitted.weights_"] = np.array([{"evil": 1}], dtype=object)
    np.savez(folder / "arrays.npz", **arrays)  # pickles the object array
    with pytest.raises(ValueError, match="cannot be read"):
        load_model(folder)


def test_a_nystrom_model_saved_before_its_factor_layout_was_recorded_loads_as_plain(
        client, tmp_path):
    """A saved Nystrom model records how its factors follow from its transforms
    ("rotated"); a file without that key (saved before it was recorded) is read as "plain",
    the factors its coefficients were fitted to, never with rotated factors, which give
    another embedding for the same coefficients."""
    from mkrk_dask.backends.nystrom.model import TRAPEZOID_COLUMNS

    model = MKKMRK.paper(10, kernels=["cosine", "gaussian(c=0.2)"], solver="nystrom",
                         scheduler=client, random_state=0,
                         backend_options={"n_landmarks": 120}).fit(X)
    assert max(model.nystrom_model_.strong_columns) > TRAPEZOID_COLUMNS  # a rotated kernel
    folder = save_model(model, tmp_path / "model")
    document = json.loads((folder / "model.json").read_text())
    assert document["row_map"]["factor_layout"] == "rotated"
    assert load_model(folder).nystrom_model_.factor_layout == "rotated"
    del document["row_map"]["factor_layout"]
    (folder / "model.json").write_text(json.dumps(document))
    old = load_model(folder).nystrom_model_
    assert old.factor_layout == "plain"
    for T, P in zip(old.transforms, old.product_transforms(), strict=True):
        np.testing.assert_array_equal(P, T)
    assert not np.allclose(old.transform([NEW]), model.nystrom_model_.transform([NEW]))


@pytest.mark.parametrize("solver, extra", [("exact", {}),
                                           ("nystrom", {"backend_options": {"n_landmarks": 40}})])
def test_simple_mkkm_round_trip(client, tmp_path, solver, extra):
    from mkrk_dask import SimpleMKKM

    model = SimpleMKKM(10, kernels=KERNELS, solver=solver, scheduler=client, random_state=0,
                       **extra).fit(X)
    loaded = load_model(save_model(model, tmp_path / "model"))
    assert type(loaded) is SimpleMKKM and loaded.get_params()["direction"] == "scaled"
    for name in ("weights_", "labels_", "embedding_", "relative_gaps_", "objective_history_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    assert loaded.n_h_steps_ == model.n_h_steps_
    assert loaded.optimality_gap_ == model.optimality_gap_
    np.testing.assert_array_equal(loaded.predict(NEW), model.predict(NEW))
    np.testing.assert_array_equal(loaded.predict(X), model.labels_)
    assert loaded.summary() == model.summary()
