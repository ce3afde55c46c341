"""The Kubernetes recipe's manifest (cluster/kubernetes/daskcluster.yaml) against the Dask
operator's own CRD schema, read from the ``dask-kubernetes`` package (the CRD its Helm chart
installs), with ``jsonschema``. No Kubernetes cluster runs here: this catches a misspelt or
misplaced field and a wrong type, as ``kubectl apply --validate=strict`` would, not what a
cluster does with the manifest.

The schema is made strict the way the API server's strict field validation is: an object
whose schema lists its properties (and does not preserve unknown fields) accepts no other
property. The API server itself would silently drop such a field (pruning), so a typo would
otherwise pass unnoticed.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest
import yaml

jsonschema = pytest.importorskip("jsonschema")

MANIFEST = Path(__file__).resolve().parents[2] / "cluster" / "kubernetes" / "daskcluster.yaml"


def _crd() -> dict:
    # Found without importing dask_kubernetes (which imports a Kubernetes client): only the
    # CRD file it ships is needed.
    spec = importlib.util.find_spec("dask_kubernetes")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("dask-kubernetes is not installed (pip install -e '.[test]')")
    package = Path(next(iter(spec.submodule_search_locations)))
    path = (package / "operator" / "deployment" / "helm" / "dask-kubernetes-operator" / "crds"
            / "daskcluster.yaml")
    assert path.is_file(), f"dask-kubernetes ships no DaskCluster CRD at {path}"
    return yaml.safe_load(path.read_text())


def _strict(schema: dict) -> dict:
    """The schema with every object that lists its properties closed to others."""
    schema = copy.deepcopy(schema)

    def close(node):
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


def _validator():
    crd = _crd()
    version = next(v for v in crd["spec"]["versions"] if v.get("served", True))
    schema = _strict(version["schema"]["openAPIV3Schema"])
    # apiVersion, kind and metadata are every object's, checked by the API server itself.
    schema.setdefault("properties", {}).update(
        apiVersion={"const": f"{crd['spec']['group']}/{version['name']}"},
        kind={"const": crd["spec"]["names"]["kind"]},
        metadata={"type": "object", "required": ["name"]})
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    return jsonschema.Draft7Validator(schema)


def _errors(validator, manifest: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(manifest)]


def test_the_manifest_validates_against_the_operator_crd() -> None:
    manifest = yaml.safe_load(MANIFEST.read_text())
    assert _errors(_validator(), manifest) == []


@pytest.mark.parametrize("change", ["typo", "misplaced", "type", "kind"])
def test_a_broken_manifest_fails(change: str) -> None:
    """The check is not vacuous: each kind of mistake in the real manifest is caught."""
    manifest = yaml.safe_load(MANIFEST.read_text())
    worker = manifest["spec"]["worker"]
    if change == "typo":
        worker["replcas"] = worker.pop("replicas")
    elif change == "misplaced":
        worker["spec"]["containers"][0]["replicas"] = 2
    elif change == "type":
        worker["spec"]["containers"][0]["ports"][0]["containerPort"] = "eight"
    else:
        manifest["kind"] = "DaskClusters"
    assert _errors(_validator(), manifest), change
