"""``python -m mkrk_dask.cli``: the ``mkrk`` command."""

import sys

from . import main

sys.exit(main())
