"""The texts at the end of every ``mkrk --help``: the exit codes and each command's examples
(also rendered into docs/cli.rst by ``docs/_ext/mkrk_cli.py``)."""

from __future__ import annotations

__all__ = ["EXAMPLES", "EXIT_CODES"]

EXIT_CODES = """exit codes:
  0    success
  1    an internal error (a bug: run with --debug and report the traceback)
  2    a user error: bad arguments, an unreadable or invalid input, an --out that cannot
       be written, an unreachable scheduler (one line on stderr)
  3    the Dask scheduler was lost during the run (restart it and run the command again)
  130  interrupted (Ctrl-C)"""

EXAMPLES = {
    "build": """examples:
  mkrk build data.npz --store kernels.zarr
  mkrk build big.npz --solver nystrom --n-landmarks 300 --store factors.zarr
  mkrk build data.npz --store /shared/k.zarr --scheduler tcp://10.0.0.5:8786
  mkrk build data.npz --store s3://bucket/k.zarr --storage-option anon=false
  mkrk fit data.npz --solver blockwise --store kernels.zarr --out run1   # reuses the store""",
    "fit": """examples:
  mkrk fit data.npz --out run1                      # exact; k = number of classes in y
  mkrk fit data.csv -k 5 --lam 0.001 --out run2
  mkrk fit data.npz --solver blockwise --store k.zarr --out run3
  mkrk fit data.npz --scheduler tcp://127.0.0.1:8786 --out run4   # on a running cluster
  mkrk fit data.npz --scheduler tls://10.0.0.5:8786 --tls-ca ca.pem \\
      --tls-cert client.pem --tls-key client-key.pem --out run5   # over TLS
  mkrk fit data.npz --out run1 --force -q > scores.txt            # replace run1; scores only

stdout: ACC/NMI/purity (with labels), then the weights of the selected kernels.
outputs in --out DIR: labels.npy/.csv, weights.npy/.csv, Y.npy/.csv (rows and columns named
by kernel), objective.npy/.csv, metrics.json, result.json (everything, with the library
version; written last) and the model that 'mkrk predict' reads. The folder appears whole or
not at all.""",
    "graph": """examples:
  mkrk graph images.npz --out g1                    # k = number of classes in y
  mkrk graph pixels.zarr -k 10 --out g2             # a Zarr array, read block by block
  mkrk graph images.npz --n-anchors 500 --n-neighbors 5 --seed 1 --out g3
  mkrk predict g1 new_images.npy > labels.txt       # the saved model labels new rows

stdout: ACC/NMI/purity (with labels), then the anchors, geometry and the graph's eigenvalues
(an eigenvalue near 1 beyond the k-th: more disconnected parts than clusters).
outputs in --out DIR: labels.npy/.csv, metrics.json, result.json (written last) and the model
that 'mkrk predict' reads.""",
    "search": """examples:
  mkrk search data.npz --out search.json                 # the paper's grid 2^-15..2^5
  mkrk search orl --repeats 20 --out orl.json            # a benchmark from the data folder
  mkrk search data.npz --lams 2^-15..2^-5 --repeats 5 --out s.json
  mkrk search data.npz --lams 0.001,0.01,0.1 --out s.json --force
  mkrk figures s.json                                    # draw it""",
    "predict": """examples:
  mkrk fit train.npz --out run5
  mkrk predict run5 new.npy > labels.txt                 # one label per line
  mkrk predict run5 new.npz --out new_labels.csv         # scores on stdout if new.npz has y
  mkrk predict old/model.joblib new.npy --trust          # a pickled model: only if trusted""",
    "reproduce": """examples:
  mkrk reproduce                                   # jaffe orl tr11 coil20, 21 lambdas, 20 repeats
  mkrk reproduce --datasets orl tr11 --figures --out results
  mkrk reproduce --datasets jaffe --repeats 3 --lams 2^-15,2^-10,2^0
  mkrk reproduce --data-dir /data/mkrk --threads 1""",
    "figures": """examples:
  mkrk figures search.json                                  # PNGs in ./figures next to it
  mkrk figures benchmarks/results/paper/paper_table.json --datasets orl tr11
  mkrk figures run1/result.json                             # Y, objective, weights of a fit

figures: <dataset>_fig1_sensitivity.png (ACC/NMI/purity vs log2 lambda),
<dataset>_fig2_representation.png (Y for several lambdas), <dataset>_fig3_selected.png
(selected and effective number of kernels vs lambda), <dataset>_fig4_objective.png
(objective minus its final value per iteration), <dataset>_fig5_weights.png (the learned
weight of every kernel).""",
    "demo": """examples:
  mkrk demo
  mkrk demo --lam 2^-5 --seed 3 -v
  mkrk demo --solver exact --n-samples 600""",
}
