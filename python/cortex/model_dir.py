"""Reading a model folder: where the active embedding model is and what it is.

What :mod:`cortex.embed` needs to load a model and :mod:`cortex.model` to describe or
install one, apart from both so that neither imports the other's half: the embedder
imports this module, and ``cortex.model`` imports the embedder (to read a model's
output dimension) and this module, never the other way round.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortex.errors import EmbeddingError
from cortex.paths import data_home

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MODEL_NAME",
    "EXPECTED_INT8_ONNX_SHA256",
    "EXPECTED_ONNX_SHA256",
    "ModelFile",
    "ModelInfo",
    "data_dir",
    "default_model_dir",
    "resolve_model_dir",
]

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
DEFAULT_MAX_TOKENS = 256

# The graphs cortex.model builds (here, so that the embedder checks them without importing
# the installer). The serialized graph is byte-for-byte deterministic (pinned IR version,
# opset and producer), so every machine that installs the model gets the same file and the
# same model id. The tests hold the builder to this digest.
EXPECTED_ONNX_SHA256 = "a15176f498175a49f3ce969d47853ffdad6dcdb1afa5ad15c1d9341d3a685370"
# The int8 query graph (build_minilm_onnx(..., int8=True); cortex.query_int8) of that
# graph, as deterministic: written at install, checked against this at every load.
EXPECTED_INT8_ONNX_SHA256 = "054529886205365da7408772d851e3f56e9031b9a696dbb1be76441be06d4097"

MANIFEST = "manifest.json"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
ST_CONFIG_FILE = "sentence_bert_config.json"
POOLING_CONFIG = "1_Pooling/config.json"


def data_dir() -> Path:
    """The per-user data dir of cortex (``$CORTEX_HOME``, ``%LOCALAPPDATA%`` on Windows, XDG,
    or ``~/.local/share``)."""
    return data_home()


def default_model_dir() -> Path:
    """Where :func:`install_model` puts the default model."""
    return data_dir() / "models" / DEFAULT_MODEL_NAME


def resolve_model_dir() -> tuple[Path, str]:
    """The model dir to use and why: ``$CORTEX_MODEL_DIR`` first, else the data dir.

    Nothing is checked here; :func:`model_info` and the embedder say what is missing.
    """
    env = os.environ.get("CORTEX_MODEL_DIR")
    if env:
        return Path(env).expanduser(), "CORTEX_MODEL_DIR"
    return default_model_dir(), "data dir"


@dataclass(frozen=True, slots=True)
class ModelFile:
    """One file of a model, as ``cortex model`` shows it."""

    name: str
    path: Path
    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What ``cortex model`` shows: the active model, its files and their sha256."""

    model_id: str
    name: str
    path: Path
    source: str
    """``"CORTEX_MODEL_DIR"`` or ``"data dir"``: why this dir was chosen."""
    dim: int
    max_tokens: int
    pooling: str
    files: tuple[ModelFile, ...]
    provenance: Mapping[str, Any]
    """From ``manifest.json`` where one exists (package, version, sha256s, build time)."""

    @property
    def onnx_path(self) -> Path:
        return self.files[0].path

    @property
    def tokenizer_path(self) -> Path:
        return self.files[1].path


# -- reading a model dir --------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _find_onnx(model_dir: Path, source: str) -> Path:
    preferred = model_dir / MODEL_FILE
    if preferred.is_file():
        return preferred
    found = sorted(model_dir.glob("*.onnx")) or sorted(model_dir.glob("onnx/*.onnx"))
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(p.name for p in found)
        raise EmbeddingError(
            f"{model_dir} holds several ONNX files ({names}); keep one, or name it {MODEL_FILE}"
        )
    raise EmbeddingError(_missing_message(model_dir, source))


def _missing_message(model_dir: Path, source: str) -> str:
    if source == "CORTEX_MODEL_DIR":
        return (
            f"no embedding model found at {model_dir} (from CORTEX_MODEL_DIR); it must hold "
            f"an ONNX sentence-embedding model (*.onnx) and its {TOKENIZER_FILE}. Unset "
            "CORTEX_MODEL_DIR to use the default model, or use mode='keyword'"
        )
    return (
        f"no embedding model found at {model_dir}; run `cortex model install` or use mode='keyword'"
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _file_info(path: Path, manifest_files: Mapping[str, Any]) -> ModelFile:
    """sha256 of a file, taken from the manifest while size and mtime still match it."""
    st = path.stat()
    rec = manifest_files.get(path.name)
    if (
        isinstance(rec, dict)
        and rec.get("size") == st.st_size
        and rec.get("mtime_ns") == st.st_mtime_ns
        and isinstance(rec.get("sha256"), str)
    ):
        sha = rec["sha256"]
    else:
        sha = _sha256_file(path)
    return ModelFile(path.name, path, sha, st.st_size)


@dataclass(frozen=True, slots=True)
class _Located:
    path: Path
    source: str
    name: str
    onnx: ModelFile
    tokenizer: ModelFile
    max_tokens: int
    pooling: str
    manifest: dict[str, Any]

    @property
    def model_id(self) -> str:
        # Identifies the vectors exactly: the graph, the tokenizer, and the two
        # settings that change the output without changing either file.
        suffix = ""
        if self.max_tokens != DEFAULT_MAX_TOKENS:
            suffix += f"-t{self.max_tokens}"
        if self.pooling != "mean":
            suffix += f"-{self.pooling}"
        return f"{self.name}@{self.onnx.sha256[:12]}.{self.tokenizer.sha256[:8]}{suffix}"


def _locate(model_dir: str | Path | None = None) -> _Located:
    if model_dir is None:
        path, source = resolve_model_dir()
    else:
        path, source = Path(model_dir).expanduser(), "argument"
    if not path.is_dir():
        raise EmbeddingError(_missing_message(path, source))
    onnx_path = _find_onnx(path, source)
    tok_path = path / TOKENIZER_FILE
    if not tok_path.is_file():
        raise EmbeddingError(_missing_message(path, source))
    manifest = _read_json(path / MANIFEST)
    listed = manifest.get("files")
    files: dict[str, Any] = listed if isinstance(listed, dict) else {}
    st_config = _read_json(path / ST_CONFIG_FILE)
    max_tokens = st_config.get("max_seq_length", DEFAULT_MAX_TOKENS)
    if not isinstance(max_tokens, int) or max_tokens < 2:
        max_tokens = DEFAULT_MAX_TOKENS
    pooling_config = _read_json(path / POOLING_CONFIG)
    pooling = "cls" if pooling_config.get("pooling_mode_cls_token") else "mean"
    named = manifest.get("name")
    name = named if isinstance(named, str) else path.name
    return _Located(
        path=path,
        source=source,
        name=name,
        onnx=_file_info(onnx_path, files),
        tokenizer=_file_info(tok_path, files),
        max_tokens=max_tokens,
        pooling=pooling,
        manifest=manifest,
    )
