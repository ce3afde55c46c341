"""The saved model of ``mkrk fit`` and how ``mkrk predict`` reads it: the one place that knows
the model's file format.

The library's :mod:`mkrk_dask.model_io` writes a fitted estimator as arrays plus JSON
(``save_model(estimator, directory)`` / ``load_model(directory)``), which carries no code:
``mkrk fit`` saves the model that way into ``--out/model/`` and ``mkrk predict`` reads it.
Where that module is not available, ``mkrk fit`` falls back to a joblib pickle
(``model.joblib``). A pickle can run any code when it is loaded, so ``mkrk predict`` loads one
only with ``--trust``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from .errors import UserError

__all__ = ["save", "load", "MODEL_DIR", "PICKLE_FILE"]

#: the model folder inside ``--out`` (arrays + JSON, :mod:`mkrk_dask.model_io`)
MODEL_DIR = "model"
#: the pickled model of the fallback (and of runs made before model_io)
PICKLE_FILE = "model.joblib"
_PICKLE_SUFFIXES = (".joblib", ".pkl", ".pickle")


def _model_io() -> Any:
    """:mod:`mkrk_dask.model_io`, or None where this version of the library has none."""
    try:
        return importlib.import_module("mkrk_dask.model_io")
    except ImportError:
        return None


def save(model: Any, folder: Path) -> str:
    """Save a fitted estimator into ``folder``; returns the name written there."""
    # a connection and progress output are not part of a model (AnchorGraphClustering has
    # neither parameter)
    model.set_params(**{name: value for name, value in (("scheduler", None), ("verbose", 0))
                        if name in model.get_params()})
    io = _model_io()
    if io is not None:
        io.save_model(model, folder / MODEL_DIR)
        return MODEL_DIR
    import joblib

    joblib.dump(model, folder / PICKLE_FILE)
    return PICKLE_FILE


def _locate(path: Path) -> tuple[Path, bool]:
    """The model at ``path`` (a fit's --out folder, its model folder, or a pickle) and
    whether it is a pickle."""
    if path.is_dir():
        if (path / MODEL_DIR).is_dir():
            return path / MODEL_DIR, False
        if (path / PICKLE_FILE).is_file():
            return path / PICKLE_FILE, True
        if (path / "result.json").is_file():
            raise UserError(f"{path} holds a fit but no saved model ({MODEL_DIR}/ or "
                            f"{PICKLE_FILE})")
        return path, False  # a model folder itself
    if path.is_file():
        return path, path.suffix.lower() in _PICKLE_SUFFIXES or _is_pickle(path)
    raise UserError(f"model {path} does not exist (give the --out folder of mkrk fit)")


def _is_pickle(path: Path) -> bool:
    with open(path, "rb") as handle:
        head = handle.read(2)
    return len(head) == 2 and head[0] == 0x80  # the pickle protocol opcode


def load(path_text: str, *, trust: bool) -> Any:
    """The fitted estimator saved at ``path_text``.

    Raises
    ------
    UserError
        No model there, a pickle without ``trust``, or a file that does not load.
    """
    path, pickled = _locate(Path(path_text).expanduser())
    if pickled:
        if not trust:
            raise UserError(f"{path} is a pickle, which can run any code when loaded; give "
                            "--trust if you made it yourself or trust its source")
        import joblib

        try:
            return joblib.load(path)
        except Exception as err:  # unpickling raises many types for a foreign file
            raise UserError(f"cannot load the model {path}: "
                            f"{' '.join(str(err).split()) or type(err).__name__}") from None
    io = _model_io()
    if io is None:
        raise UserError(f"{path} is not a model this version of mkrk-dask can read (it reads "
                        f"{PICKLE_FILE} with --trust)")
    try:
        return io.load_model(path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UserError(f"cannot load the model {path}: "
                        f"{' '.join(str(err).split()) or type(err).__name__}") from None
