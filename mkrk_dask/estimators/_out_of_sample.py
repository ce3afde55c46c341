"""``predict`` and ``transform`` of new data, shared by the multiple kernel k-means
estimators: the map of new rows to the embedding that a fit keeps (``row_map_``) and the
learned centres."""

from __future__ import annotations

import functools
import weakref
from typing import Any

import numpy as np
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..assignment import assign_rows, within_cluster_loss
from ..passes import is_dask
from ..validation import check_feature_views
from ..views import check_new_views, default_view_names

__all__ = ["OutOfSampleMixin", "lazy_rows", "score_rows"]


def score_rows(model: Any, X: Any, step: str) -> float:
    """The opposite of the within-cluster loss of the rows of ``model.transform(X)``, each
    assigned by ``model._assign`` to one of ``model.cluster_centers_``. For a dask array
    each block's loss is summed where the block is (its rows never travel to the client)."""
    if is_dask(X):
        loss = functools.partial(_block_loss, step=step)
        return -float(lazy_rows(model, loss, X, (), np.float64).sum().compute())
    return -_block_loss(model, X, step=step)


def _block_loss(model: Any, X: Any, *, step: str) -> float:
    rows = model.transform(X)
    return within_cluster_loss(rows, model._assign(rows), model.cluster_centers_, step=step)


#: the fitted models scattered to a cluster, by model, with the client and the fit they hold
_SCATTERED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _shared_model(model: Any) -> Any:
    """The fitted ``model`` as one node of a dask graph: where a distributed client is
    current, scattered to its workers once (and again only for another client or a refit),
    so that its arrays travel once and never inside a task graph; else a delayed object."""
    import dask

    from ..dask_session import current_client

    client = current_client()
    if client is None:
        return dask.delayed(model, pure=True)
    # the fitted state's identity: a refit replaces these objects
    fit = tuple(id(getattr(model, name, None)) for name in ("row_map_", "cluster_centers_",
                                                               "labels_"))
    held = _SCATTERED.get(model)
    if held is not None and held[0] == client.id and held[1] == fit \
            and held[2].status == "finished":
        return held[2]
    future = client.scatter(model, broadcast=True, hash=False)
    _SCATTERED[model] = (client.id, fit, future)
    return future


def lazy_rows(model: Any, method: str | Any, X: Any, n_columns: int | tuple | None,
              dtype: Any) -> Any:
    """``model.<method>`` (or ``method(model, rows)``) of a dask array, as a dask array of
    the same row chunks: every block is mapped when computed (the fitted model is one shared
    node of the graph, scattered once to a distributed cluster, not copied into every task).
    ``n_columns`` None: one value per row; ``()``: one value per block."""
    n_features = getattr(model, "n_features_in_", None)
    if n_features is not None and X.ndim == 2 and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features; the model was fitted with {n_features}")
    X = X.rechunk({1: -1}) if X.ndim == 2 else X
    shared = _shared_model(model)

    def block(rows: Any, fitted: Any) -> np.ndarray:
        mapped = method(fitted, rows) if callable(method) else getattr(fitted, method)(rows)
        return np.atleast_1d(mapped)

    if n_columns == ():
        return X.map_blocks(block, shared, drop_axis=1, chunks=((1,) * X.numblocks[0],),
                            dtype=dtype, meta=np.empty((0,), dtype=dtype))
    if n_columns is None:
        return X.map_blocks(block, shared, drop_axis=1, dtype=dtype,
                            meta=np.empty((0,), dtype=dtype))
    return X.map_blocks(block, shared, chunks=(X.chunks[0], (n_columns,)), dtype=dtype,
                        meta=np.empty((0, 0), dtype=dtype))


class OutOfSampleMixin:
    """What :class:`~mkrk_dask.estimators._base.MultipleKernelKMeans` needs to map new points:
    ``transform`` and ``predict`` read what the fit's final stage kept (``row_map_``,
    ``cluster_centers_``, ``final_graph_``: :class:`~mkrk_dask.estimators._final.FinalPartition`;
    feature input only)."""

    def _out_of_sample_views(self, X: Any) -> list:
        check_is_fitted(self)
        if not hasattr(self, "row_map_"):
            raise NotImplementedError(
                "predict/transform of new data needs features: with kernels='precomputed' "
                "there is no kernel between new points and the training points")
        dims = list(self.row_map_.n_features)
        names = getattr(self, "view_names_", None) or default_view_names(len(dims))
        given = check_new_views(X, names, dims)
        views = check_feature_views(self, given if len(given) > 1 else given[0], reset=False)
        # the column transform of the fit (the plan's preprocessing) first
        return self.plan_.apply_scaling(views) if hasattr(self, "plan_") else views

    def _maps_new_points(self) -> bool:
        """New points have kernels with the training points only for feature input."""
        return not (isinstance(self.kernels, str) and self.kernels == "precomputed")

    @available_if(_maps_new_points)
    def transform(self, X: Any) -> np.ndarray:
        """Embed samples into the learned spectral space.

        The spectral out-of-sample extension ``h(x) = K_w(x, X) H diag(mu)^-1`` through the
        training rows (exact and blockwise backends), or ``F(x) B`` through the Nystrom
        landmarks; where the fit kept the features (``final_step_="features"``) its columns are
        scaled by ``feature_scale_``.
        On the training data it reproduces ``embedding_``.

        Parameters
        ----------
        X : array-like, sparse matrix, dask or Zarr array, or list of views, like the data
            given to ``fit``

        Returns
        -------
        ndarray of shape (n_samples, embedding_.shape[1])
            A dask array (lazy, in X's row chunks) where X is one.
        """
        if is_dask(X):
            return lazy_rows(self, "transform", X, self.embedding_.shape[1],
                             self.embedding_.dtype)
        views = self._out_of_sample_views(X)
        rows = self.row_map_.transform(views)  # a new array, in embedding_'s dtype
        scale = getattr(self, "feature_scale_", None)
        if scale is not None:
            rows *= scale[None, :]  # as fit scales embedding_: the same bits in float32 too
        return rows

    @available_if(_maps_new_points)
    def predict(self, X: Any) -> np.ndarray:
        """Cluster of new samples: the nearest learned centre of the rows of :meth:`transform`
        (scaled to unit length where the fit kept ``final_step_="spectral"``); on the
        training data it returns ``labels_``.

        Parameters
        ----------
        X : array-like, sparse matrix, dask or Zarr array, or list of views, like the data
            given to ``fit``

        Returns
        -------
        ndarray of shape (n_samples,)
            A dask array (lazy, in X's row chunks) where X is one.
        """
        if is_dask(X):
            return lazy_rows(self, "predict", X, None, np.int64)
        return self._assign(self.transform(X))

    def _assign(self, rows: np.ndarray) -> np.ndarray:
        # the graph of the final rows, where it partitioned the training data
        return assign_rows(rows, self.final_step_, graph=getattr(self, "final_graph_", None),
                           centres=getattr(self, "cluster_centers_", None))

    @available_if(_maps_new_points)
    def score(self, X: Any, y: Any = None) -> float:
        """Opposite of the within-cluster loss of X in the fitted feature map: the sum over
        samples of the squared distance of their row of :meth:`transform` (unit length where
        the fit kept ``final_step_="spectral"``) to the centre of their predicted cluster,
        negated (the kernel analogue of ``KMeans.score``: higher is better).

        Parameters
        ----------
        X : like the data given to ``fit``
        y : ignored

        Returns
        -------
        float
        """
        return score_rows(self, X, self.final_step_)
