"""
A run on a Dask cluster
=======================

The blockwise and Nystrom backends send their passes over the data to a Dask cluster: give
the estimator a :class:`distributed.Client` (or its address as ``scheduler=``). Here a
``LocalCluster`` with two workers stands in for a real cluster; ``cluster/`` in the
repository has recipes for ssh hosts, SLURM and Kubernetes, and a TLS setup.

``verbose=1`` reports every Dask pass, every iteration and every long stage as the fit goes,
as records of the ``mkrk_dask`` logger: give that logger a handler to route them (here to
standard output, which the gallery shows), or set its level to ``WARNING`` to silence them.
"""

import logging
import sys

from distributed import Client, LocalCluster
from sklearn.datasets import load_digits

from mkrk_dask import MKKMRK, clustering_scores

X, y = load_digits(return_X_y=True)
X, y = X[:800], y[:800]

# Dashboards on this machine only (the defaults listen on every network interface).
cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                       dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0")
client = Client(cluster)
print("workers:", len(client.scheduler_info()["workers"]))

logging.getLogger("mkrk_dask").addHandler(logging.StreamHandler(sys.stdout))
model = MKKMRK.paper(n_clusters=10, lam=2.0**-15, solver="blockwise", scheduler=client,
                     random_state=0, verbose=1, backend_options={"chunk_size": 200}).fit(X)
print(clustering_scores(y, model.labels_))

client.close()
cluster.close()

# %%
# From the command line the same run is::
#
#     cluster/local/start-cluster.sh              # prints tcp://127.0.0.1:8786
#     mkrk fit digits.npz --scheduler tcp://127.0.0.1:8786 --store /tmp/d.zarr --out run1
#     cluster/local/stop-cluster.sh
