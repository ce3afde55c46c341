"""
Multi-view data: one weight per kernel and per view
===================================================

MKKM-RK takes several views of the same samples (a list of matrices with the same rows) and
a dictionary of kernels on each view; the learned weights show which views and kernels carry
the clustering.

The data: the UCI multiple-features digits (``uci_mfeat``: 2000 handwritten digits described
by six views, from Fourier coefficients to pixel averages), 500 of them drawn at random, when
the datasets folder is there; otherwise the library's synthetic multi-view generator, whose
views are informative, pure noise or a noisy copy of an informative one.
"""

import matplotlib.pyplot as plt
import numpy as np

from mkrk_dask import MKKMRK, clustering_scores, load_dataset, make_multiview_blobs

try:  # the benchmark file, where the data folder holds it
    data = load_dataset("uci_mfeat", subset=500, random_state=0)
    views, y, view_names = data.views, data.y, list(data.view_names)
    source = "UCI multiple features (500 of 2000 digits)"
except FileNotFoundError:
    views, y, view_names = make_multiview_blobs(500, n_clusters=10, n_features=16,
                                                random_state=0)
    source = "synthetic multi-view blobs"
described = [f"{name} ({v.shape[1]} features)" for name, v in zip(view_names, views, strict=True)]
print(source, "-", len(views), "views:", ", ".join(described))

# %%
# Two kernels per view: cosine and a Gaussian whose width is 0.1 times the view's largest
# pairwise distance. ``@v`` says which view a kernel reads.

kernels = [spec for v in range(len(views))
           for spec in (f"cosine@{v}", f"gaussian(c=0.1)@{v}")]
model = MKKMRK.paper(n_clusters=10, lam=2.0**-10, kernels=kernels, random_state=0).fit(views)
scores = clustering_scores(y, model.labels_)
print({k: round(100 * v, 2) for k, v in scores.items()})
print(model.summary())

# %%
# The weight of every kernel, grouped by view: a view whose kernels get no weight did not
# help the clustering (on the synthetic data, the noise views).

weights = model.weights_.reshape(len(views), 2)
fig, ax = plt.subplots(figsize=(7, 3.2))
x = np.arange(len(views))
ax.bar(x - 0.2, weights[:, 0], width=0.4, label="cosine")
ax.bar(x + 0.2, weights[:, 1], width=0.4, label="gaussian(c=0.1)")
ax.set_xticks(x, labels=view_names, rotation=20)
ax.set_ylabel("weight")
ax.set_title(f"{source}: kernel weights per view (ACC {100 * scores['acc']:.1f})",
             fontsize=10)
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
fig.tight_layout()
