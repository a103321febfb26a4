"""Where model weights come from: packages that ship them, or paths the user configures."""
from __future__ import annotations

import importlib.util
from pathlib import Path


class MissingWeightsError(RuntimeError):
    """A configured backend has no weights; the message names the parameter to set."""


def packaged_file(package: str, *parts: str, install_hint: str) -> str:
    """A file shipped inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingWeightsError(f"package '{package}' is not installed ({install_hint})")
    path = Path(list(spec.submodule_search_locations)[0]).joinpath(*parts)
    if not path.is_file():
        raise MissingWeightsError(f"{path} not found in package '{package}' ({install_hint})")
    return str(path)


def configured_file(path: str, parameter: str, what: str) -> str:
    """A weights file named by a parameter; a clear error when it is unset or absent."""
    if not path:
        raise MissingWeightsError(f"{what} needs weights: set the parameter '{parameter}' to the file "
                                  "(no model hub is reachable from this robot)")
    resolved = Path(path).expanduser()
    if not resolved.exists():
        raise MissingWeightsError(f"{what}: '{parameter}' = {path} does not exist")
    return str(resolved)
