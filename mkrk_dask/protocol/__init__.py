"""The paper's protocol (Table 2 of Yao & Chen, AAAI 2019) as library code.

- :mod:`~mkrk_dask.protocol.run`: the protocol itself (SB-KKM, A-MKKM and MKKM-RK over the
  lambda grid on every dataset), its report and its Markdown table (the names this package
  exports);
- :mod:`~mkrk_dask.protocol.methods`: the other methods of the paper's Table 2 (MKKM, LMKKM,
  RMKKM, MKKM-MR) and SimpleMKKM, each under the same protocol.
"""

from .run import (
    DATASETS,
    EXTRA_METHODS,
    METHODS,
    METRICS,
    PAPER_TABLE,
    PROTOCOL_DIFFERENCES,
    PROTOCOL_METHODS,
    find_datasets,
    render_markdown,
    run_dataset,
    run_protocol,
)

__all__ = ["run_protocol", "run_dataset", "render_markdown", "find_datasets", "DATASETS",
           "METHODS", "EXTRA_METHODS", "PROTOCOL_METHODS", "METRICS", "PAPER_TABLE",
           "PROTOCOL_DIFFERENCES"]
