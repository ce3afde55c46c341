"""
Choosing a backend
==================

The same model runs on three backends:

- ``exact``: the kernels dense in memory; the reference, for n up to about 10,000;
- ``blockwise``: the kernels in a Zarr store, computed and multiplied on Dask, for n up to a
  few tens of thousands (memory: one block of rows at a time);
- ``nystrom``: per-kernel low-rank factors, for millions of samples.

All three label new points with ``predict``: ``exact`` and ``blockwise`` through the
training rows (the spectral out-of-sample extension), ``nystrom`` through its landmarks.

Here they run on 600 of scikit-learn's digits; the two exact ones give the same weights and
the Nystrom approximation comes close.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

from mkrk_dask import MKKMRK, clustering_scores

X, y = load_digits(return_X_y=True)
X, y = X[:600], y[:600]

results = {}
for solver, options in [("exact", None), ("blockwise", {"chunk_size": 200}),
                        ("nystrom", {"n_landmarks": 200})]:
    start = time.perf_counter()
    model = MKKMRK.paper(n_clusters=10, lam=2.0**-15, solver=solver, random_state=0,
                         backend_options=options).fit(X)
    seconds = time.perf_counter() - start
    acc = clustering_scores(y, model.labels_)["acc"]
    results[solver] = model.weights_
    print(f"{solver:<10s} {seconds:5.1f} s  {model.n_iter_} iterations  ACC {100 * acc:.2f}")

print("largest weight difference, blockwise vs exact:",
      f"{np.abs(results['blockwise'] - results['exact']).max():.1e}")
print("largest weight difference, nystrom vs exact:  ",
      f"{np.abs(results['nystrom'] - results['exact']).max():.1e}")

# %%
# The learned weights on each backend.

names = model.kernel_names_
fig, ax = plt.subplots(figsize=(8, 3.4))
x = np.arange(len(names))
for offset, (solver, weights) in zip((-0.27, 0.0, 0.27), results.items(), strict=True):
    ax.bar(x + offset, weights, width=0.27, label=solver)
ax.set_xticks(x, labels=names, rotation=70, fontsize=8)
ax.set_ylabel("weight")
ax.set_title("scikit-learn digits (600 images), the paper's 12 kernels: the learned weights "
             "per backend", fontsize=10)
ax.legend(title="solver", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
fig.tight_layout()
