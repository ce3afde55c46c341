"""The final step of a fit: the step (``final_step="auto"``: the features of the top
eigenpairs of the learned kernel), its rank (``n_components``), and the final partition
(``final_clustering="auto"``: for the default, the k-means partition refined on an anchor
graph of the final rows, kept where it agrees with the k-means partition or where the graph
clearly has k parts). The graph's constants live here, read by the plan and by
``estimators/_final.py``; so do the restarts of the k-means partition the graph is checked
against (:func:`reference_inits`) and the k-means runs a fit makes (:func:`kmeans_cost`)."""

from __future__ import annotations

from .fit_plan import Decision, is_auto

#: the features step's rank per cluster (``n_components="auto"``): the top ``FEATURES_RANK * k``
#: eigenpairs of the learned kernel
FEATURES_RANK = 2
#: neighbours of a row in the final graph (scikit-learn's SpectralClustering default)
GRAPH_NEIGHBORS = 10
#: the graph's partition is kept only if its NMI with the k-means partition reaches this: a
#: refinement of it, not a different answer (one cluster of nearly every row beside tiny ones)
GRAPH_MIN_AGREEMENT = 0.5
#: ... or where the graph clearly has k parts (the eigengap of spectral clustering): its
#: normalised Laplacian's k-th smallest eigenvalue ``1 - lambda_k`` at most this fraction of
#: the next one, and every cluster of at least :data:`GRAPH_CLEAR_ROWS` rows. Two moons or
#: two rings are k well separated curves that k-means cuts across: the graph's answer is then
#: a different one, and the right one. Where the graph has more parts with no edge to the
#: rest than clusters, it is clear only with k parts of at least GRAPH_CLEAR_ROWS rows beside
#: stray ones (``estimators/_final.parts_apart``)
GRAPH_CLEAR_GAP = 0.1
#: restarts of the k-means partition the final graph is checked against (its NMI with the
#: graph's, against :data:`GRAPH_MIN_AGREEMENT`): a coarse test, which does not need the
#: ``n_init`` restarts of the partition a fit returns. Where the graph is kept its labels
#: are the fit's, and where it is not the k-means is made again with ``n_init`` restarts
#: (the same labels as a single k-means of ``n_init``)
GRAPH_REFERENCE_INITS = 3
#: anchors of the final graph, at most ... More anchors follow the final rows more finely,
#: and cost more (seeding, the mini-batch k-means and the nearest-anchor pass all grow with
#: them): at 2,000 the graph costs less than the fit it refines on 11,000 to 70,000 images
#: (``docs/defaults.rst``)
GRAPH_ANCHORS = 2000
#: passes of the anchors' mini-batch k-means (they need only cover the final rows)
GRAPH_ANCHOR_ITERATIONS = 10
#: ... and at most one per this many rows
GRAPH_ROWS_PER_ANCHOR = 2
#: rows of the smallest cluster of a clear graph: a row's nearest anchors' worth, the floor the
#: plan puts on the rows a cluster for a graph at all (a tiny isolated clump also makes a
#: clear gap, of a partition into the clump and the rest)
GRAPH_CLEAR_ROWS = GRAPH_NEIGHBORS * GRAPH_ROWS_PER_ANCHOR
#: most rows the final graph is built on whole: above, on a uniform sample of
#: :data:`GRAPH_SAMPLE_ROWS` of them, the other rows labelled by the graph block by block (its
#: memory stays that of the sample at any n). The largest set of the wide benchmark, its
#: Fashion-MNIST line, has 70,000 rows: every set there keeps the graph of all its rows
GRAPH_ALL_ROWS = 70_000
#: rows of the sample the final graph is built on above :data:`GRAPH_ALL_ROWS`. Its anchors'
#: seeding and mini-batch k-means, its own nearest-anchor pass and its spectral k-means grow
#: with the rows it is built on: on 100,000 rows they were 47% of the default fit at 10^5
#: (issue 77, ``benchmarks/results/scale/scaling_final_share.md``); on 20,000 (still 10 rows
#: an anchor at 2,000 anchors) only the labels of the other rows grow with n
GRAPH_SAMPLE_ROWS = 20_000
#: anchors of the graph on that sample: one per 20 of its rows. The seeding grows with the
#: square of the anchors, the anchors' k-means and every row's nearest anchors with their
#: count; at 2,000 the graph on the sample still took about as long as the final k-means and
#: embedding together at 10^5 rows (issue 77), at 1,000 about half of that, with the same NMI
#: on the benchmark's data (99.98)
GRAPH_SAMPLE_ANCHORS = 1000


def final_decisions(params: dict, n: int, k: int, *, line: bool = False, corners: bool = False,
                    capped: bool = False) -> tuple[list[Decision], str, int, str, int]:
    """The final step, its rank and the final partition; ``line``: the data are one number
    (one view of one column); ``corners``: every column takes two values; ``capped``: the
    backend may give fewer eigenpairs than the rank (plain Nystrom, :func:`final_rank`)."""
    step, rank, clustering = params["final_step"], params["n_components"], \
        params["final_clustering"]
    decisions = []
    if is_auto(step):
        step_used = "features"
        decisions.append(Decision("final step", "features", "k-means on the unit rows of the "
                                  "features V sqrt(mu) of the top eigenpairs of the learned "
                                  "kernel: a low-rank kernel k-means, one eigendecomposition"))
    else:
        step_used = step
        decisions.append(Decision("final step", step, "given", auto=False))
    if is_auto(rank):
        rank_used = (k if step_used == "spectral"
                     else max(1, min(int(FEATURES_RANK * k), n - 1)))
        why = ("the loop's top k eigenvectors (the paper's step)" if step_used == "spectral"
               else f"{FEATURES_RANK}k: room for each cluster's direction and its spread")
        if capped:
            why += ("; at most the Nystrom components of the kernels with nonzero weight, "
                    "known when the loop ends (final_rank)")
        decisions.append(Decision("n_components", str(rank_used), why))
    else:
        rank_used = int(rank)
        decisions.append(Decision("n_components", str(rank_used), "given", auto=False))
    anchors = (min(GRAPH_ANCHORS, n // GRAPH_ROWS_PER_ANCHOR) if n <= GRAPH_ALL_ROWS
               else GRAPH_SAMPLE_ANCHORS)
    graph_possible = anchors >= max(k, GRAPH_NEIGHBORS)
    # A row's nearest anchors should lie in its own cluster: with fewer anchors a cluster
    # (on average) than neighbours, the graph joins every row to other clusters too.
    graph_local = anchors >= k * GRAPH_NEIGHBORS
    if is_auto(clustering):
        used = ("graph" if is_auto(step) and graph_local and not (line or corners)
                else "kmeans")
        sample = ("" if n <= GRAPH_ALL_ROWS else
                  f", built on a uniform sample of {GRAPH_SAMPLE_ROWS:,} rows that labels the "
                  f"others: n > {GRAPH_ALL_ROWS:,}, where a graph of every row costs more "
                  "than the rest of the final step")
        if used == "graph":
            why = (f"k-means partition refined by spectral clustering on the anchor graph of "
                   f"the final rows ({anchors} anchors, {GRAPH_NEIGHBORS} nearest{sample}), "
                   f"kept where its NMI with a k-means partition of "
                   f"{reference_inits('graph', int(params['n_init']))} restarts reaches "
                   f"{GRAPH_MIN_AGREEMENT} or where the graph clearly has {k} parts (its "
                   f"eigengap; or, where it has more parts with no edge between them, {k} "
                   f"of at least {GRAPH_CLEAR_ROWS} rows beside stray ones, which costs one "
                   "more pass of the graph's rows to their anchors)")
        elif not graph_possible:
            why = f"k-means (too few rows for a graph of {k} clusters)"
        elif not is_auto(step):
            why = "k-means (an explicit final step: the paper's configuration)"
        elif line:
            # three groups on a line: the graph split off a few rows of a tail and joined two
            # groups (tests/plan/test_plan.py checks such data against k-means)
            why = ("k-means (one column: the rows lie on a line, whose anchor graph is a "
                   "path, and a path's spectral cuts fall at its sparse tails, not between "
                   "the groups)")
        elif corners:
            # binary data: wherever kept, the graph lost to k-means (docs/defaults.rst)
            why = ("k-means (every column takes two values: the rows are corners of a box, "
                   "with no curved cluster for a graph of near rows to follow; on binary "
                   "data the graph lost to k-means, docs/defaults.rst)")
        else:
            why = (f"k-means ({anchors} anchors, {anchors / k:.1f} a cluster, fewer than the "
                   f"{GRAPH_NEIGHBORS} nearest each row is joined to: too few rows a cluster "
                   "for a local graph)")
        decisions.append(Decision("final partition", used, why))
    else:
        used = clustering if (clustering == "kmeans" or graph_possible) else "kmeans"
        decisions.append(Decision("final partition", used, "given" if used == clustering else
                                  "k-means: too few rows for a graph", auto=used != clustering))
    return decisions, step_used, rank_used, used, anchors if used == "graph" else 0


def final_rank(planned: int, auto: bool, limit: int | None) -> int:
    """The final step's rank on a backend that gives at most ``limit`` eigenpairs for the
    learned weights (plain Nystrom: the factor columns of the kernels with nonzero weight,
    known once the loop ends; None: no limit): the plan's ``planned``, or where that is more,
    ``limit`` for an ``"auto"`` rank (the plan's ``n_components`` decision says so).

    Raises
    ------
    ValueError
        A given rank above ``limit``.
    """
    if limit is None or planned <= limit:
        return planned
    if auto:
        return max(1, limit)  # the Nystrom factors hold fewer components
    raise ValueError(f"n_components={planned}, but the kernels with nonzero weight have only "
                     f"{limit} Nystrom components; use more landmarks "
                     "(backend_options={'n_landmarks': ...}) or fewer components")


def reference_inits(final_clustering: str, n_init: int) -> int:
    """Restarts of a fit's first k-means partition: ``n_init`` where it is the fit's answer;
    at most :data:`GRAPH_REFERENCE_INITS` where a final graph is planned, which needs it only
    to check the graph's partition against (made again with ``n_init`` where the graph is
    not kept)."""
    return min(n_init, GRAPH_REFERENCE_INITS) if final_clustering == "graph" else n_init


def final_graph_rows(n: int, anchors: int) -> int:
    """The rows the final graph is built on: all ``n`` up to :data:`GRAPH_ALL_ROWS`, else a
    uniform sample of :data:`GRAPH_SAMPLE_ROWS`; 0 without a graph (``anchors`` 0)."""
    if not anchors:
        return 0
    return n if n <= GRAPH_ALL_ROWS else min(n, GRAPH_SAMPLE_ROWS)


def kmeans_cost(clustering: str, n_init: int) -> int | str:
    """The k-means runs a fit makes (:func:`reference_inits`)."""
    if clustering != "graph":
        return 1
    reference = reference_inits(clustering, n_init)
    again = "; 3 where the graph is not kept" if reference < n_init else ""
    return f"2 (the graph's, and one of {reference} restarts it is checked against{again})"
