"""
A run on a Dask cluster
=======================

The blockwise and Nystrom backends send their passes over the data to a Dask cluster: give
the estimator a :class:`distributed.Client` (or its address as ``scheduler=``). Here a
``LocalCluster`` with two workers stands in for a real cluster; ``cluster/`` in the
repository has recipes for ssh hosts, SLURM and Kubernetes, and a TLS setup.

``mkrk_dask.progress.reporting`` shows every Dask pass and every iteration as the fit goes.
"""

import sys

from distributed import Client, LocalCluster
from sklearn.datasets import load_digits

from mkrk_dask import MKKMRK, clustering_scores
from mkrk_dask.progress import reporting

X, y = load_digits(return_X_y=True)
X, y = X[:800], y[:800]

# Dashboards on this machine only (the defaults listen on every network interface).
cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                       dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0")
client = Client(cluster)
print("workers:", len(client.scheduler_info()["workers"]))

with reporting(verbose=1, stream=sys.stdout):
    model = MKKMRK.paper(n_clusters=10, lam=2.0**-15, solver="blockwise", chunk_size=200,
                   scheduler=client, random_state=0).fit(X)
print(clustering_scores(y, model.labels_))

client.close()
cluster.close()

# %%
# From the command line the same run is::
#
#     cluster/local/start-cluster.sh              # prints tcp://127.0.0.1:8786
#     mkrk fit digits.npz --scheduler tcp://127.0.0.1:8786 --store /tmp/d.zarr --out run1
#     cluster/local/stop-cluster.sh
