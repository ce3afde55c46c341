"""Plain words (issue 79): what ``summary()``, the plan and ``mkrk fit`` say at the default
verbosity, and what they leave to ``detail`` / ``-v``."""

from __future__ import annotations

import json

import numpy as np
from sklearn.datasets import load_wine

from mkrk_dask import MKKMRK
from mkrk_dask._text import LINE_WIDTH, format_number, plural, wrap_lines
from mkrk_dask.loop import selection_words

#: how many rows of scikit-learn's digits the shared ``digits`` fixture gives (conftest.py)
DIGITS_ROWS = 300


def test_numbers_and_counts_read_as_words() -> None:
    assert format_number(2.0**-15) == "2^-15" and format_number(1.0) == "1"
    assert format_number(0.5) == "0.5" and format_number(2.0**5) == "2^5"
    assert plural(1, "iteration") == "1 iteration" and plural(3, "iteration") == "3 iterations"
    assert wrap_lines(["  " + "word " * 40]) == wrap_lines(["  " + "word " * 40], LINE_WIDTH)
    wrapped = wrap_lines(["  key: " + "word " * 40, "short"])
    assert max(map(len, wrapped)) <= LINE_WIDTH and wrapped[-1] == "short"
    assert all(line.startswith("    ") for line in wrapped[1:-1])  # continuation lines


def test_equal_weights_select_nothing() -> None:
    assert selection_words(np.full(4, 0.25)) == "equal weights: no kernel selected at this lambda"
    assert selection_words(np.array([0.5, 0.4999, 0.0001])) == \
        "2 of 3 kernels carry weight (>= 0.001)"


def test_summary_is_plain_and_detail_adds_the_diagnostics(
        digits: tuple[np.ndarray, np.ndarray]) -> None:
    X, _ = digits
    model = MKKMRK.paper(10, random_state=0).fit(X)
    text = model.summary()
    head = text.splitlines()[0]
    assert head.startswith("MKKM-RK: 12 kernels, lambda=2^-15, converged in ")
    assert "3.05176e-05" not in text and "QP relative gap" not in text
    assert max(map(len, text.splitlines())) <= LINE_WIDTH
    detail = model.summary(detail=True)
    assert "max QP relative gap" in detail and detail.startswith(head)


def test_the_plan_wraps_for_a_terminal_and_keeps_its_reasons_whole() -> None:
    X, _ = load_wine(return_X_y=True)
    plan = MKKMRK(3).plan(X)
    assert max(map(len, plan.lines())) <= LINE_WIDTH < max(map(len, plan.lines(None)))
    # the head, the cost and the expected time
    assert len(plan.lines(None)) == len(plan.decisions) + 3
    assert str(plan) == "\n".join(plan.lines())
    kernels = plan.decision("kernels")
    # standardised columns have negative values: the kernels say so in plain words
    assert kernels.value.startswith("cosine, gaussian(") and "negative values" in kernels.reason
    assert "\n" not in json.dumps(plan.to_dict())  # the saved plan: every reason whole


def test_mkrk_fit_says_plan_and_equal_weights(run_mkrk, digits_npz) -> None:
    planned = run_mkrk("fit", str(digits_npz), "--plan")
    assert planned.returncode == 0, planned.stderr
    assert planned.stderr.startswith("plan for MKKM-RK on ") and "fitting" not in planned.stderr
    fitted = run_mkrk("fit", str(digits_npz), "--n-init", "2")
    assert fitted.returncode == 0, fitted.stderr
    assert "1 iteration (converged); equal weights: no kernel selected at this lambda" in \
        fitted.stderr and "kernels selected" not in fitted.stderr
    assert "change" not in fitted.stderr and "gap" not in fitted.stderr.replace("eigengap", "")
    verbose = run_mkrk("fit", str(digits_npz), "--n-init", "2", "-v")
    assert "change inf  gap" in verbose.stderr and "max QP relative gap" in verbose.stdout
