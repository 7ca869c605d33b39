"""The int8 query encoder: the default model's encoder with int8 weights, for queries only.

:func:`cortex.model.build_minilm_onnx` with ``int8=True`` writes it (cortex's own ONNX
writer, no ``onnx`` package): every Linear's weight quantized per output column to int8
and its input quantized at run time (``DynamicQuantizeLinear`` -> ``MatMulInteger``), the
ops onnxruntime's ``quantize_dynamic`` emits. It runs a query in ~0.37x the CPU of the
fp32 graph on this kind of CPU (BENCHMARKS.md, "Hybrid latency, second pass"). Its
vectors are close to the fp32 ones, not equal (cosine >= 0.989 on SciFact's claims), so
it encodes *queries* only: memories are always embedded by the fp32 graph whose sha256
the model id names, and a query from this graph is compared with them (the pairing
measured for quality: SciFact and the agent set lose < 0.005 nDCG@10).

It is the default query encoder. ``OnnxEmbedder(query_encoder="fp32")`` or
``$CORTEX_QUERY_ENCODER=fp32`` keep the fp32 graph for queries too.

The graph is written by ``cortex model install`` into ``<model dir>/int8/model.onnx``
beside a record (``int8/manifest.json``) of its sha256 and of the fp32 graph's it was
made from; both are pinned (:data:`cortex.model_dir.EXPECTED_INT8_ONNX_SHA256`) and
checked when it is loaded. A model dir without it (installed by an older cortex, or a model of
``$CORTEX_MODEL_DIR`` that cortex did not build) falls back to fp32 queries by default,
with a one-time notice; asking for int8 explicitly makes it on first use from the fp32
graph's own weights (~1 s, no extra package), and is an error for a model cortex cannot
build.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from cortex.errors import EmbeddingError
from cortex.log import get_logger
from cortex.model_dir import (
    EXPECTED_INT8_ONNX_SHA256,
    EXPECTED_ONNX_SHA256,
    ModelFile,
    _file_info,
    _read_json,
)

__all__ = [
    "DEFAULT_ENCODER",
    "ENCODERS",
    "ENCODER_ENV",
    "INT8_DIR",
    "ensure_int8",
    "installed_int8",
    "int8_graph",
    "notice_fallback",
    "query_encoder_asked",
    "query_encoder_choice",
    "write_int8",
]

log = get_logger(__name__)

#: The query encoders an OnnxEmbedder runs: the model's own graph, or its int8 twin.
ENCODERS = ("fp32", "int8")
#: The environment variable that chooses the query encoder (``fp32`` or ``int8``).
ENCODER_ENV = "CORTEX_QUERY_ENCODER"
#: The default when neither the argument nor the environment chooses.
DEFAULT_ENCODER = "int8"
#: Where the int8 graph and its record live, inside the model dir.
INT8_DIR = "int8"
INT8_FILE = "model.onnx"
INT8_MANIFEST = "manifest.json"
#: Bump when the int8 graph changes (the record then no longer matches).
RECIPE = "cortex build_minilm_onnx int8 v1"

_NOTICED: set[str] = set()
_NOTICE_LOCK = threading.Lock()


def query_encoder_choice(asked: str | None) -> str:
    """The query encoder to run: `asked`, else ``$CORTEX_QUERY_ENCODER``, else the
    default. Raises ValueError (argument) or EmbeddingError (environment) otherwise."""
    if asked is not None:
        if asked not in ENCODERS:
            raise ValueError(f"query_encoder must be one of {', '.join(ENCODERS)}, not {asked!r}")
        return asked
    raw = os.environ.get(ENCODER_ENV, "").strip().lower()
    if not raw:
        return DEFAULT_ENCODER
    if raw not in ENCODERS:
        raise EmbeddingError(f"{ENCODER_ENV} must be one of {', '.join(ENCODERS)}, not {raw!r}")
    return raw


def query_encoder_asked(asked: str | None) -> bool:
    """Whether the encoder was chosen (the argument or ``$CORTEX_QUERY_ENCODER``) rather
    than left to the default: a chosen int8 that cannot run is an error, the default
    falls back to fp32."""
    return asked is not None or bool(os.environ.get(ENCODER_ENV, "").strip())


def _pinned(source: ModelFile) -> str | None:
    """The sha256 the int8 graph of `source` must have: pinned for the graph cortex
    builds, None for any other model (cortex cannot build its int8 twin)."""
    return EXPECTED_INT8_ONNX_SHA256 if source.sha256 == EXPECTED_ONNX_SHA256 else None


def installed_int8(model_dir: Path, source: ModelFile) -> ModelFile | None:
    """The int8 graph in `model_dir` when its record says it was made from `source` by
    this recipe and its bytes match both the record and the pin; else None."""
    folder = model_dir / INT8_DIR
    path = folder / INT8_FILE
    record = _read_json(folder / INT8_MANIFEST)
    want = _pinned(source)
    if (
        want is None
        or not path.is_file()
        or record.get("source_sha256") != source.sha256
        or record.get("recipe") != RECIPE
    ):
        return None
    files = record.get("files")
    made = _file_info(path, files if isinstance(files, dict) else {})
    if made.sha256 != want:
        return None  # changed since it was made (or the record is damaged): make it again
    return made


def int8_graph(fp32_graph: bytes) -> bytes:
    """The int8 query graph of cortex's fp32 graph (its serialized bytes): the weights
    read back from the fp32 graph, then :func:`cortex.model.build_minilm_onnx`."""
    from cortex import onnx_proto
    from cortex.model import MINILM_CONFIG, build_minilm_onnx

    weights = {}
    for name, array in onnx_proto.read_initializers(fp32_graph).items():
        if name.endswith(".weight_t"):  # stored [in, out]; the builder takes torch's [out, in]
            weights[name[: -len("_t")]] = array.T
        else:
            weights[name] = array
    return build_minilm_onnx(weights, MINILM_CONFIG, int8=True)


def write_int8(model_dir: Path, graph: bytes, sha256: str, source_sha256: str) -> ModelFile:
    """Write `graph` (whose sha256 the caller computed) and its record into
    ``<model_dir>/int8`` (each file swapped in whole). Raises OSError when the folder is
    not writable."""
    folder = model_dir / INT8_DIR
    folder.mkdir(exist_ok=True)
    tmp = folder / f".{INT8_FILE}.{os.getpid()}.tmp"
    tmp.write_bytes(graph)
    os.replace(tmp, folder / INT8_FILE)
    st = (folder / INT8_FILE).stat()
    record: dict[str, Any] = {
        "recipe": RECIPE,
        "source_sha256": source_sha256,
        "files": {INT8_FILE: {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}},
    }
    _write_json(folder / INT8_MANIFEST, record)
    return ModelFile(INT8_FILE, folder / INT8_FILE, sha256, st.st_size)


def ensure_int8(model_dir: Path, source: ModelFile) -> ModelFile:
    """The int8 graph of the fp32 graph `source` (a verified file of `model_dir`): the
    installed one when it matches, else made now (~1 s) and recorded. Raises
    EmbeddingError naming the fix when it cannot be made."""
    found = installed_int8(model_dir, source)
    if found is not None:
        return found
    want = _pinned(source)
    if want is None:
        raise EmbeddingError(
            f"the int8 query encoder is made only for the model cortex installs; "
            f"{source.path} is another graph: use query_encoder='fp32' "
            f"({ENCODER_ENV}=fp32)"
        )
    try:
        graph = int8_graph(source.path.read_bytes())
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"cannot read the fp32 graph {source.path}: {exc}") from exc
    sha = hashlib.sha256(graph).hexdigest()
    if sha != want:
        raise EmbeddingError(
            f"the int8 query graph made from {source.path} does not match its pinned "
            f"sha256; run `cortex model install --force`, or use query_encoder='fp32'"
        )
    try:
        return write_int8(model_dir, graph, sha, source.sha256)
    except OSError as exc:
        raise EmbeddingError(
            f"cannot write the int8 query encoder into {model_dir / INT8_DIR}: {exc}; make "
            f"the model folder writable, or use query_encoder='fp32' ({ENCODER_ENV}=fp32)"
        ) from exc


def notice_fallback(model_dir: Path, source: ModelFile) -> None:
    """Say once per model dir and process that queries use the fp32 graph because the
    default int8 one is not installed there (or cannot be, for a model cortex did not
    build)."""
    key = str(model_dir)
    with _NOTICE_LOCK:
        if key in _NOTICED:
            return
        _NOTICED.add(key)
    if _pinned(source) is None:
        fix = "cortex makes the int8 graph only for the model it installs"
    else:
        fix = "run `cortex model install` to add it"
    log.warning(
        "the int8 query encoder is not installed in %s: queries use the fp32 graph "
        "(slower, same results as an fp32 query); %s, or set %s=fp32 to silence this",
        model_dir,
        fix,
        ENCODER_ENV,
    )


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
