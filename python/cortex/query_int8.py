"""The int8 query encoder: a graph derived from the verified fp32 one, for queries only.

``onnxruntime.quantization.quantize_dynamic`` (int8 weights, per output channel; the
activations quantized at run time) of the model's fp32 graph runs a query in ~0.45x
the CPU of the fp32 graph on this kind of CPU (BENCHMARKS.md, "Hybrid latency").
Its vectors are close to the fp32 ones, not equal (cosine 0.98-0.99 on SciFact's
claims), so it encodes *queries* only: the stored vectors stay fp32-made, every
memory is embedded by the graph whose sha256 the model id names, and a query from
this graph is compared with them (a pairing measured for quality before it was
offered; see BENCHMARKS.md). It is a choice: ``OnnxEmbedder(query_encoder="int8")``
or ``$CORTEX_QUERY_ENCODER=int8``.

The graph is made once per model, at ``cortex model install`` or on first use, into
``<model dir>/int8/model.onnx`` beside a record (``int8/manifest.json``) of its own
sha256 and of the fp32 graph's it was made from. A graph whose checksum does not match
its record, or that was made from another fp32 graph, is made again. Making it needs
the ``onnx`` package (onnxruntime's quantizer imports it; cortex does not otherwise).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from cortex.errors import EmbeddingError
from cortex.model_dir import ModelFile, _file_info, _read_json

__all__ = ["ENCODERS", "ENCODER_ENV", "INT8_DIR", "ensure_int8", "query_encoder_choice"]

#: The query encoders an OnnxEmbedder runs: the model's own graph, or its int8 twin.
ENCODERS = ("fp32", "int8")
#: The environment variable that chooses the query encoder (``fp32`` or ``int8``).
ENCODER_ENV = "CORTEX_QUERY_ENCODER"
#: The default when neither the argument nor the environment chooses.
DEFAULT_ENCODER = "fp32"
#: Where the int8 graph and its record live, inside the model dir.
INT8_DIR = "int8"
INT8_FILE = "model.onnx"
INT8_MANIFEST = "manifest.json"
#: Bump when the quantization settings change (the record then no longer matches).
RECIPE = "quantize_dynamic QInt8 per_channel v1"


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


def _recorded(folder: Path, source: ModelFile) -> ModelFile | None:
    """The int8 graph in `folder` when its record says it was made from `source` by
    this recipe and its bytes still match the recorded sha256; else None."""
    path = folder / INT8_FILE
    record = _read_json(folder / INT8_MANIFEST)
    if (
        not path.is_file()
        or record.get("source_sha256") != source.sha256
        or record.get("recipe") != RECIPE
    ):
        return None
    files = record.get("files")
    made = _file_info(path, files if isinstance(files, dict) else {})
    if made.sha256 != (files or {}).get(INT8_FILE, {}).get("sha256"):
        return None  # changed since it was made (or the record is damaged): make it again
    return made


def ensure_int8(model_dir: Path, source: ModelFile) -> ModelFile:
    """The int8 graph of the fp32 graph `source` (a verified file of `model_dir`): the
    recorded one when it matches, else made now (a few seconds) and recorded. Raises
    EmbeddingError naming the fix when it cannot be made."""
    folder = model_dir / INT8_DIR
    found = _recorded(folder, source)
    if found is not None:
        return found
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]
    except ImportError as exc:
        raise EmbeddingError(
            f"the int8 query encoder is made by onnxruntime.quantization, which needs the "
            f"onnx package ({exc}); run `pip install onnx`, or use query_encoder='fp32' "
            f"(unset {ENCODER_ENV})"
        ) from exc
    try:
        folder.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".int8-", dir=folder) as tmp:
            staged = Path(tmp) / INT8_FILE
            # The quantizer logs a hint about pre-processing at WARNING on the root logger.
            root = logging.getLogger()
            level = root.level
            root.setLevel(logging.ERROR)
            try:
                quantize_dynamic(
                    str(source.path),
                    str(staged),
                    weight_type=QuantType.QInt8,
                    per_channel=True,
                )
            finally:
                root.setLevel(level)
            os.replace(staged, folder / INT8_FILE)
        made = _file_info(folder / INT8_FILE, {})
        st = made.path.stat()
        record: dict[str, Any] = {
            "recipe": RECIPE,
            "source_sha256": source.sha256,
            "files": {
                INT8_FILE: {"sha256": made.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
            },
        }
        _write_json(folder / INT8_MANIFEST, record)
    except OSError as exc:
        raise EmbeddingError(
            f"cannot write the int8 query encoder into {folder}: {exc}; make the model "
            f"folder writable, or use query_encoder='fp32' (unset {ENCODER_ENV})"
        ) from exc
    except Exception as exc:  # the quantizer's own errors
        raise EmbeddingError(
            f"cannot make the int8 query encoder from {source.path}: {exc}"
        ) from exc
    return made


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
