"""Dask collections computed into this process, also when they are persisted."""

from __future__ import annotations

from typing import Any

__all__ = ["compute_here"]


def compute_here(X: Any) -> Any:
    """``X.compute()``, through the client that holds ``X``'s chunks when it was persisted.

    A persisted collection's graph refers to futures; ``compute()`` outside that client's
    ``as_current()`` runs on dask's local scheduler, which cannot read them ("Missing
    dependency"). The client that holds them can, whether or not it is the current one.
    """
    import dask
    from distributed import Client, futures_of

    held = futures_of(X)
    if held:
        return held[0].client.compute(X, sync=True)
    if dask.config.get("scheduler", None) in ("dask.distributed", "distributed"):
        # dask's config still names a client that is gone (one left unclosed sets it and
        # nothing resets it): dask would raise "no Client active"; the local threads can
        # compute a collection that holds no futures
        try:
            Client.current(allow_global=True)
        except ValueError:
            return X.compute(scheduler="threads")
    return X.compute()
