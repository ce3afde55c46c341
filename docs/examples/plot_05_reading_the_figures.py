"""
Reading the figures
===================

``mkrk search DATA --out s.json`` runs a lambda grid and ``mkrk figures s.json`` draws five
figures from it. Here the same happens from Python on 400 digits, a short grid and five
repeats of the final k-means, and each figure is shown with what to read off it.
"""

import tempfile
from pathlib import Path

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
from sklearn.datasets import load_digits

from mkrk_dask import MKKMRK, lambda_search, paper_kernels, search_figures

X, y = load_digits(return_X_y=True)
X, y = X[:400], y[:400]
lams = [2.0**e for e in range(-15, 1, 3)]
found = lambda_search(MKKMRK.paper(n_clusters=10, random_state=0), X, lams, y=y, n_repeats=5)
folder = Path(tempfile.mkdtemp())
written = search_figures(found, folder, dataset="digits",
                         kernel_names=[spec.name for spec in paper_kernels()])
pngs = {p.name.split("_", 1)[1]: p for p in written}


def show(name):
    """Show a PNG that make_figures wrote, whole, at about its own size."""
    image = mpimg.imread(pngs[name])
    fig = plt.figure(figsize=(image.shape[1] / 120, image.shape[0] / 120))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.imshow(image)
    ax.axis("off")


# %%
# Figure 1: the scores against lambda. Solid: the best of the repeats (what the paper
# reports); dashed with a band: their mean and spread. A flat curve means lambda matters
# little; the dotted line marks the lambda of the best ACC.
show("fig1_sensitivity.png")

# %%
# Figure 2: the representation matrix Y. Column j says which kernels represent kernel j;
# a kernel's weight is the mean of its row, so a row full of bright cells is a kernel that
# represents many others.
show("fig2_representation.png")

# %%
# Figure 3: how many kernels matter. "Selected" counts every weight of at least 0.001 (as
# ``selected_kernels_`` does); the effective number 1/sum(w^2) says how many kernels really
# carry the weight (1: a single kernel; m: equal weights).
show("fig3_selected.png")

# %%
# Figure 4: convergence. The objective minus its final value, relative, per iteration: each
# line falling by decades means the alternating loop converges fast at that lambda.
show("fig4_objective.png")

# %%
# Figure 5: the learned weight of every kernel across the grid: which kernels carry the
# clustering at small lambda and which take over as lambda grows.
show("fig5_weights.png")
