"""External clustering scores: accuracy (ACC), normalised mutual information (NMI), purity.

These are the three scores of the paper's Table 2. All take the true classes and the predicted
clusters as 1-D label arrays of the same length; labels may be arbitrary integers or strings,
and the number of clusters need not equal the number of classes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import normalized_mutual_info_score

__all__ = [
    "check_labels_present",
    "contingency_table",
    "clustering_accuracy",
    "normalized_mutual_info",
    "purity",
    "clustering_scores",
]


def check_labels_present(y: np.ndarray, what: str) -> None:
    """Raise a one-line ValueError naming ``what`` if a label is missing: NaN (or infinite) or
    blank. numpy counts the NaNs as one more class, so they would change k and the scores.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        The labels.
    what : str
        Where they come from, for the message (``"y"``, a file name).
    """
    if y.dtype.kind == "f":
        missing = ~np.isfinite(y)
    elif y.dtype.kind in "US":
        missing = np.char.str_len(np.char.strip(y)) == 0
    else:
        return
    if missing.any():
        rows = np.flatnonzero(missing)
        raise ValueError(f"{what}: {rows.size} of {y.size} labels are missing (NaN, infinite or "
                         f"blank), the first at index {rows[0]}; every sample needs a label")


def _check_labels(y_true: ArrayLike, y_pred: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Return both label vectors as 1-D arrays, or raise ValueError naming the problem."""
    arrays = []
    for name, labels in (("y_true", y_true), ("y_pred", y_pred)):
        arr = np.asarray(labels)
        if arr.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got an array of shape {arr.shape}")
        if arr.size == 0:
            raise ValueError(f"{name} is empty")
        check_labels_present(arr, name)
        arrays.append(arr)
    if arrays[0].shape[0] != arrays[1].shape[0]:
        raise ValueError(
            f"y_true and y_pred differ in length: {arrays[0].shape[0]} != {arrays[1].shape[0]}"
        )
    return arrays[0], arrays[1]


def contingency_table(y_true: ArrayLike, y_pred: ArrayLike) -> np.ndarray:
    """Count the samples of every (class, cluster) pair.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True classes and predicted clusters.

    Returns
    -------
    table : ndarray of shape (n_classes, n_clusters), int64
        ``table[i, j]`` is the number of samples of the i-th class (in sorted label order)
        that fall into the j-th cluster (in sorted label order).
    """
    y_true, y_pred = _check_labels(y_true, y_pred)
    classes, class_idx = np.unique(y_true, return_inverse=True)
    clusters, cluster_idx = np.unique(y_pred, return_inverse=True)
    # One bincount over the flattened pair index is the vectorised 2-D histogram.
    flat = class_idx.ravel() * clusters.size + cluster_idx.ravel()
    counts = np.bincount(flat, minlength=classes.size * clusters.size)
    return counts.reshape(classes.size, clusters.size).astype(np.int64, copy=False)


def clustering_accuracy(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Clustering accuracy under the best one-to-one matching of clusters to classes.

    The matching maximises the number of correctly assigned samples (the Hungarian algorithm,
    :func:`scipy.optimize.linear_sum_assignment`, on the contingency table). When the numbers
    of clusters and classes differ, the surplus clusters (or classes) stay unmatched and their
    samples count as errors.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True classes and predicted clusters; any hashable, sortable labels.

    Returns
    -------
    float
        ACC in [0, 1]; 1 when the clustering equals the classes up to a relabelling.

    Raises
    ------
    ValueError
        If the inputs are not 1-D, are empty, or differ in length.
    """
    table = contingency_table(y_true, y_pred)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum() / table.sum())


def normalized_mutual_info(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Normalised mutual information between classes and clusters.

    ``NMI = I(T; P) / ((H(T) + H(P)) / 2)``: the mutual information divided by the arithmetic
    mean of the two entropies (scikit-learn's default ``average_method="arithmetic"``, which
    this function fixes explicitly so that a change of default cannot move the scores).

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True classes and predicted clusters.

    Returns
    -------
    float
        NMI in [0, 1]; scikit-learn defines it as 1 when both labelings are a single group.

    Raises
    ------
    ValueError
        If the inputs are not 1-D, are empty, or differ in length.
    """
    y_true, y_pred = _check_labels(y_true, y_pred)
    return float(normalized_mutual_info_score(y_true, y_pred, average_method="arithmetic"))


def purity(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Purity: the fraction of samples that belong to the majority class of their cluster.

    Unlike :func:`clustering_accuracy`, several clusters may share a majority class, so purity
    is at least ACC and reaches 1 whenever every cluster is pure (e.g. one cluster per sample).

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True classes and predicted clusters.

    Returns
    -------
    float
        Purity in [0, 1].

    Raises
    ------
    ValueError
        If the inputs are not 1-D, are empty, or differ in length.
    """
    table = contingency_table(y_true, y_pred)
    return float(table.max(axis=0).sum() / table.sum())


def clustering_scores(y_true: ArrayLike, y_pred: ArrayLike) -> dict[str, float]:
    """All three scores of the paper's Table 2 at once.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True classes and predicted clusters.

    Returns
    -------
    dict
        ``{"acc": ..., "nmi": ..., "purity": ...}``, each a float in [0, 1].

    Raises
    ------
    ValueError
        If the inputs are not 1-D, are empty, or differ in length.
    """
    return {
        "acc": clustering_accuracy(y_true, y_pred),
        "nmi": normalized_mutual_info(y_true, y_pred),
        "purity": purity(y_true, y_pred),
    }
