"""Write ``benchmarks/folds.json``: the wide benchmark's sets split into two folds (issue 76).

The split is made once, at random, stratified by kind (image/text, tabular, multi-view), before
any rule of the default is chosen on it, and committed. A rule is chosen on one fold and judged
on the other (``bench_defaults_wide.py``'s protocol section); the file is never rewritten to
make a rule look better. Run ``python benchmarks/make_folds.py`` to check that the committed
file is what this script makes (it refuses to overwrite a different one).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

#: the sets of the wide benchmark by kind; uci_mfeat (six views of handwritten digits) counts
#: as multi-view
KINDS = {
    "image/text": ["jaffe", "orl", "tr11", "coil20", "usps", "fashion_mnist", "sklearn:digits"],
    "tabular": ["sklearn:iris", "sklearn:wine", "sklearn:breast_cancer", "kernlab:spam",
                "kernlab:musk", "kernlab:promotergene", "MASS:crabs", "MASS:Pima",
                "MASS:biopsy", "MASS:fgl", "MASS:Cars93", "MASS:birthwt", "MASS:survey",
                "MASS:cats"],
    "multi-view": ["uci_mfeat", "mv:ACM", "mv:Cora", "mv:Movies", "mv:MNIST-4",
                   "mv:ProteinFold", "mv:Prokaryotic", "mv:Reuters-1200", "mv:Wikipedia"],
}
#: the seed of the split: the issue's number
SEED = 76
PATH = Path(__file__).with_name("folds.json")


def make() -> dict:
    rng = np.random.default_rng(SEED)
    folds: dict[str, list[str]] = {"A": [], "B": []}
    first = "A"
    for names in KINDS.values():
        order = [names[i] for i in rng.permutation(len(names))]
        half = (len(order) + (first == "A")) // 2  # an odd kind's extra set alternates
        folds[first] += order[:half]
        folds["B" if first == "A" else "A"] += order[half:]
        if len(order) % 2:
            first = "B" if first == "A" else "A"
    return {"seed": SEED, "made_by": "python benchmarks/make_folds.py",
            "kinds": {name: kind for kind, names in KINDS.items() for name in names},
            "folds": folds}


def main() -> None:
    folds = make()
    if PATH.exists():
        if json.loads(PATH.read_text()) != folds:
            sys.exit(f"{PATH} differs from what this script makes; it is not rewritten")
        print(f"{PATH}: unchanged")
        return
    PATH.write_text(json.dumps(folds, indent=1) + "\n")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
