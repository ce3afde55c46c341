"""Blockwise backend: the m base kernels in a Zarr store, every heavy product on Dask workers.

``tasks`` run on the workers, ``build`` makes (or reopens) the store, ``backend`` holds the
five quantities of the loop.
"""

from .backend import BlockwiseBackend
from .build import STORE_KIND, default_chunk_size

__all__ = ["BlockwiseBackend", "STORE_KIND", "default_chunk_size"]
