"""Text embeddings: the :class:`Embedder` protocol and the default :class:`OnnxEmbedder`.

The default model is all-MiniLM-L6-v2 (384-d, mean pooling over the attention
mask, L2 normalised, 256 tokens at most) on onnxruntime's CPU provider, loaded
from files that ``cortex model install`` puts in the per-user data dir (see
:mod:`cortex.model`). Nothing is downloaded at run time. Its vectors match
sentence-transformers within 2e-7 per component (min cosine > 0.9999999) on the
reference sentences in ``tests/fixtures/minilm_reference.json``.

Every vector carries the embedder's ``model_id``, which names the model and
the sha256 of its graph and tokenizer: vectors of two ids are never compared.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from cortex.errors import EmbeddingError
from cortex.model_dir import ModelInfo, _locate

__all__ = ["Embedder", "OnnxEmbedder", "load_default_embedder"]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length float32 vectors of one fixed dimension."""

    @property
    def model_id(self) -> str:
        """Identifies the model exactly; vectors of different ids are never mixed."""
        ...

    @property
    def dim(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, text: str) -> np.ndarray:
        """One text → float32 array of shape ``(dim,)``, L2 norm 1."""
        ...

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """n texts → float32 array of shape ``(n, dim)``, rows in the caller's order."""
        ...


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


#: Intra-op threads for queries and small batches. Split over the two cores of a busy
#: machine, every step of the graph waits for the slower core: one query took 26-30 ms
#: p50 on 1 thread against 32-44 ms on 2 at load 15 (5.0 against 6.9 ms when the
#: machine was quiet; `benches/bench_embed.py`, BENCHMARKS.md). In a hybrid search the
#: keyword leg runs beside the embedding and needs the other core anyway.
QUERY_THREADS = 1
#: The environment variable that overrides QUERY_THREADS (a positive integer).
THREADS_ENV = "CORTEX_EMBED_THREADS"


def _query_threads() -> int:
    """QUERY_THREADS, or ``$CORTEX_EMBED_THREADS`` when set (a positive integer)."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return QUERY_THREADS
    if not raw.isdigit() or int(raw) < 1:
        raise EmbeddingError(f"{THREADS_ENV} must be a positive integer, not {raw!r}")
    return int(raw)


#: Token budget of one inference batch (rows x padded width). Measured on length-sorted
#: texts at 1 thread: 256-1024 tokens ran at the same CPU cost per token, 2,048 cost
#: 1.2x and 4,096 1.4x (the activations outgrow the cache), fixed batches of 16-64 rows
#: 1.2x (short rows make small matrices).
TOKEN_BUDGET = 1024
#: A batch of at least this many texts runs on a second session with every usable core
#: (an import): loading it costs ~0.4 s, which 256 texts repay on a quiet machine.
BULK_MIN_TEXTS = 256


def _fix_surrogates(text: str) -> str:
    # A str may hold surrogates (from bad JSON or os.fsdecode); the tokenizer
    # takes UTF-8 only. Pairs are joined, lone ones become U+FFFD. The check
    # costs well under a microsecond for a short text.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


class OnnxEmbedder:
    """An ONNX sentence-embedding model on onnxruntime's CPU provider.

    *model_dir* holds ``*.onnx`` and ``tokenizer.json``; ``None`` means the
    active model (``$CORTEX_MODEL_DIR``, else the installed default). The graph
    may output pooled sentence embeddings ``[batch, dim]`` or hidden states
    ``[batch, seq, dim]``, which are pooled here (mean over the attention mask,
    or the first token when ``1_Pooling/config.json`` asks for CLS pooling).
    *threads* sets onnxruntime's intra-op threads; the default (None) runs queries and
    small batches on :data:`QUERY_THREADS` (or ``$CORTEX_EMBED_THREADS``) and batches of
    :data:`BULK_MIN_TEXTS` texts
    or more on a second session, loaded on first use, with every usable core.
    Texts are sorted by token count and cut into batches of about
    :data:`TOKEN_BUDGET` tokens (at most *batch_size* rows), so padding stays under
    1 % when a whole import is embedded in one call.
    *query_encoder* chooses what :meth:`embed_query` runs: ``"fp32"`` (the model's graph)
    or ``"int8"`` (its quantized twin, :mod:`cortex.query_int8`; queries only); None reads
    ``$CORTEX_QUERY_ENCODER``, else the default ``"int8"``, which falls back to ``"fp32"``
    (with a one-time notice on the ``cortex`` logger) where the int8 graph is not
    installed. Documents (:meth:`embed`, :meth:`embed_batch`) always run the model's own
    graph, loaded on first use when queries run the int8 one.
    """

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        threads: int | None = None,
        batch_size: int = 256,
        token_budget: int = TOKEN_BUDGET,
        query_encoder: str | None = None,
    ) -> None:
        from cortex.query_int8 import (
            installed_int8,
            notice_fallback,
            query_encoder_asked,
            query_encoder_choice,
        )

        self._query_encoder = query_encoder_choice(query_encoder)
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise ValueError(f"threads must be a positive int or None, not {threads!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, not {batch_size!r}")
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
            raise ValueError(f"token_budget must be a positive int, not {token_budget!r}")
        located = _locate(model_dir)
        try:
            import onnxruntime as ort  # type: ignore[import-untyped]
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingError(
                f"semantic search needs onnxruntime and tokenizers ({exc}); "
                "run `pip install onnxruntime tokenizers` or use mode='keyword'"
            ) from exc

        self._threads = threads if threads is not None else _query_threads()
        self._bulk_threads = threads if threads is not None else _default_threads()
        self._batch_size = batch_size
        self._token_budget = token_budget
        self._max_tokens = located.max_tokens
        self._pooling = located.pooling
        reinstall = (
            "run `cortex model install --force`"
            if located.source != "CORTEX_MODEL_DIR"
            else "check the files in CORTEX_MODEL_DIR"
        )

        try:
            tokenizer = Tokenizer.from_file(str(located.tokenizer.path))
        except Exception as exc:  # the tokenizers library raises bare Exception
            raise EmbeddingError(
                f"cannot read {located.tokenizer.path}: {exc}; {reinstall}"
            ) from exc
        # tokenizer.json of this model fixes padding and truncation at 128; match
        # sentence-transformers instead: no padding (done per batch here), 256 max.
        tokenizer.no_padding()
        tokenizer.enable_truncation(self._max_tokens)
        self._tokenizer = tokenizer

        self._ort = ort
        self._located = located
        self._reinstall = reinstall
        self._bulk_lock = threading.Lock()
        # Sessions: fp32 for documents (and queries under "fp32"), fp32 on every core for
        # large batches, and the query encoder's. A process that only searches with the
        # int8 encoder never loads the fp32 graph (~0.15 s, 90 MB).
        self._session: Any = None
        self._bulk_session: Any = None
        self._query_session: Any = None
        if self._query_encoder == "int8":
            int8_file = installed_int8(located.path, located.onnx)
            if int8_file is not None:
                self._query_session = self._load_session(int8_file.path, self._threads, reinstall)
            elif not query_encoder_asked(query_encoder):
                notice_fallback(located.path, located.onnx)
                self._query_encoder = "fp32"
            # else: asked for int8 and not installed: made on the first query (_int8)
        first = self._query_session if self._query_session is not None else self._fp32()
        if self._query_encoder == "fp32":
            self._query_session = first

        self._inputs: dict[str, Any] = {}
        for inp in first.get_inputs():
            dtype = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}.get(inp.type)
            known = inp.name in ("input_ids", "attention_mask", "token_type_ids")
            if dtype is None or not known:
                raise EmbeddingError(
                    f"{located.onnx.path} takes an input {inp.name!r} of {inp.type}; cortex "
                    "feeds input_ids, attention_mask and token_type_ids as int64 or int32"
                )
            self._inputs[inp.name] = dtype
        if "input_ids" not in self._inputs:
            raise EmbeddingError(f"{located.onnx.path} has no input_ids input; {reinstall}")
        outputs = {o.name: o for o in first.get_outputs()}
        out = outputs.get("sentence_embedding") or next(iter(outputs.values()))
        if len(out.shape) not in (2, 3):
            raise EmbeddingError(
                f"{located.onnx.path}: output {out.name!r} has shape {out.shape}; "
                "expected [batch, dim] or [batch, seq, dim]"
            )
        self._output = out.name
        self._pool_here = len(out.shape) == 3
        last = out.shape[-1]
        self._dim = last if isinstance(last, int) and last > 0 else 0
        if not self._dim:  # a symbolic dimension: ask the model
            self._dim = int(self._run(["dim"]).shape[1])

    # -- public surface ------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        """``<name>@<sha256(onnx)[:12]>.<sha256(tokenizer.json)[:8]>``."""
        return self._located.model_id

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def threads(self) -> int:
        """onnxruntime intra-op threads for queries and small batches."""
        return self._threads

    @property
    def bulk_threads(self) -> int:
        """onnxruntime intra-op threads for batches of BULK_MIN_TEXTS texts or more."""
        return self._bulk_threads

    @property
    def query_encoder(self) -> str:
        """What :meth:`embed_query` runs: ``"fp32"`` or ``"int8"``."""
        return self._query_encoder

    @property
    def query_id(self) -> str:
        """Identifies the query vectors: the model id, with ``+int8`` when the int8
        query encoder makes them (a cache of query vectors keys on it)."""
        return self.model_id if self._query_encoder == "fp32" else f"{self.model_id}+int8"

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    @property
    def info(self) -> ModelInfo:
        """What ``cortex model`` shows about this embedder's model."""
        loc = self._located
        return ModelInfo(
            model_id=self.model_id,
            name=loc.name,
            path=loc.path,
            source=loc.source,
            dim=self._dim,
            max_tokens=self._max_tokens,
            pooling=self._pooling,
            files=(loc.onnx, loc.tokenizer),
            provenance=loc.manifest.get("source", {}),
        )

    def embed(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise TypeError(f"embed() takes a str, not {type(text).__name__}")
        row: np.ndarray = self.embed_batch([text])[0]
        return row

    def embed_query(self, text: str) -> np.ndarray:
        """A search query → float32 ``(dim,)``, L2 norm 1, by the query encoder
        (:attr:`query_encoder`), compared with vectors :meth:`embed_batch` made."""
        if not isinstance(text, str):
            raise TypeError(f"embed_query() takes a str, not {type(text).__name__}")
        if self._query_encoder == "fp32":
            return self.embed(text)
        row: np.ndarray = self._run([text], session=self._int8())[0]
        return row

    def embed_batch(
        self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None
    ) -> np.ndarray:
        """n texts → ``(n, dim)`` float32, rows in the caller's order. The texts are
        embedded in token-length order, so one call over a whole import pads least;
        ``progress(done, total)`` is called after each inference batch."""
        if isinstance(texts, str):
            raise TypeError("embed_batch() takes a sequence of str, not a str; use embed()")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"embed_batch(): item {i} is {type(t).__name__}, not str")
        if not texts:
            return np.empty((0, self._dim), dtype=np.float32)
        return self._run(texts, progress)

    def __repr__(self) -> str:
        return f"OnnxEmbedder({self.model_id!r}, dim={self._dim}, threads={self._threads})"

    # -- internals -----------------------------------------------------------------------

    def _load_session(self, path: Path, threads: int, reinstall: str) -> Any:
        ort = self._ort
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3  # errors only: no optimizer chatter on stderr
        # Worker threads sleep instead of spinning between calls: measured on a busy
        # 2-core machine, spinning doubled the query latency and burnt the CPU that
        # the rest of the process (SQLite, the vector scan) needs.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own unrelated exception classes
            raise EmbeddingError(f"cannot load {path}: {exc}; {reinstall}") from exc

    def _fp32(self) -> Any:
        """The model's own graph on :attr:`threads` threads, loaded on first use."""
        if self._session is None:
            with self._bulk_lock:
                if self._session is None:
                    self._session = self._load_session(
                        self._located.onnx.path, self._threads, self._reinstall
                    )
        return self._session

    def _bulk(self) -> Any:
        """The session for large batches (every usable core), loaded on first use."""
        if self._bulk_threads == self._threads:
            return self._fp32()
        if self._bulk_session is None:
            with self._bulk_lock:
                if self._bulk_session is None:
                    self._bulk_session = self._load_session(
                        self._located.onnx.path, self._bulk_threads, self._reinstall
                    )
        return self._bulk_session

    def _int8(self) -> Any:
        """The int8 query session: the recorded int8 graph of this model's fp32 graph,
        made first when missing or stale (cortex.query_int8), loaded once."""
        if self._query_session is None:
            with self._bulk_lock:
                if self._query_session is None:
                    from cortex.query_int8 import ensure_int8

                    made = ensure_int8(self._located.path, self._located.onnx)
                    self._query_session = self._load_session(
                        made.path, self._threads, self._reinstall
                    )
        return self._query_session

    def _token_ids(self, texts: list[str]) -> list[list[int]]:
        """Token ids, truncated to max_tokens, exactly as for the whole text.

        Tokenizing a megabyte takes seconds, almost all of it past the
        truncation point. A long text is first tried on a prefix: when the last
        kept token ends over 100 characters before the cut, the cut word is not
        among the kept tokens (a word that long would be one [UNK] token reaching
        the cut), so the ids equal those of the whole text. Otherwise the prefix
        doubles, up to the whole text.
        """
        texts = [_fix_surrogates(t) for t in texts]
        window = self._max_tokens * 16
        encs = self._tokenizer.encode_batch([t[:window] for t in texts])
        ids = []
        for text, enc in zip(texts, encs, strict=True):
            cut = window
            while len(text) > cut and not self._prefix_is_exact(enc, cut):
                cut *= 2
                enc = self._tokenizer.encode(text[:cut])
            ids.append(enc.ids)
        return ids

    def _prefix_is_exact(self, enc: Any, cut: int) -> bool:
        if len(enc.ids) < self._max_tokens:
            return False  # the prefix did not fill the window: more text may add tokens
        # Special tokens ([CLS], [SEP]) have offsets (0, 0): the max is the last kept word's.
        return bool(max(end for _, end in enc.offsets) <= cut - 101)

    def _run(
        self,
        texts: list[str],
        progress: Callable[[int, int], None] | None = None,
        *,
        session: Any = None,
    ) -> np.ndarray:
        ids = self._token_ids(texts)
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        order = np.argsort(lengths, kind="stable")
        if session is None:
            session = self._bulk() if len(texts) >= BULK_MIN_TEXTS else self._fp32()
        out = np.empty((len(ids), self._dim or 1), dtype=np.float32)
        start = 0
        while start < len(order):
            # Sorted ascending, so the last row of a batch sets its width: grow the batch
            # while rows x width stays within the token budget (one row at least).
            end = start + 1
            while (
                end < len(order)
                and end - start < self._batch_size
                and (end - start + 1) * int(lengths[order[end]]) <= self._token_budget
            ):
                end += 1
            rows = order[start:end]
            width = int(lengths[rows[-1]])
            input_ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, j in enumerate(rows):
                input_ids[r, : lengths[j]] = ids[j]
                mask[r, : lengths[j]] = 1
            part = self._infer(input_ids, mask, session)
            if out.shape[1] != part.shape[1]:  # the first call, asking the model its dim
                out = np.empty((len(ids), part.shape[1]), dtype=np.float32)
            out[rows] = part
            start = end
            if progress is not None:
                progress(start, len(order))
        return self._normalise(out, texts)

    def _infer(self, input_ids: np.ndarray, mask: np.ndarray, session: Any) -> np.ndarray:
        feed = {}
        for name, dtype in self._inputs.items():
            if name == "input_ids":
                arr = input_ids
            elif name == "attention_mask":
                arr = mask
            else:
                arr = np.zeros_like(input_ids)
            feed[name] = arr.astype(dtype, copy=False)
        try:
            (hidden,) = session.run([self._output], feed)
        except Exception as exc:  # onnxruntime's own exception classes
            raise EmbeddingError(f"the embedding model failed: {exc}; {self._reinstall}") from exc
        hidden = np.asarray(hidden, dtype=np.float32)
        if not self._pool_here:
            return hidden
        if self._pooling == "cls":
            first: np.ndarray = hidden[:, 0, :]
            return first
        m = mask.astype(np.float32)[:, :, None]
        pooled: np.ndarray = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return pooled

    def _normalise(self, vecs: np.ndarray, texts: list[str]) -> np.ndarray:
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        bad = ~np.isfinite(norms[:, 0]) | (norms[:, 0] == 0.0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise EmbeddingError(
                f"the embedding model returned {'a zero vector' if norms[i, 0] == 0 else 'NaN'}"
                f" for text #{i} ({texts[i][:40]!r}); the model files may be damaged: "
                f"{self._reinstall}"
            )
        return np.ascontiguousarray(vecs / norms, dtype=np.float32)


_LOADED: dict[tuple[str, str, int | None, str, bool], OnnxEmbedder] = {}
_LOADED_LOCK = threading.Lock()


def load_default_embedder(
    threads: int | None = None, query_encoder: str | None = None
) -> OnnxEmbedder:
    """The active model (``$CORTEX_MODEL_DIR``, else the installed default), loaded once
    per process: every Engine of the process shares it (a load reads 90 MB and takes
    ~0.4 s; onnxruntime sessions are safe to run from several threads). Changed files
    have another model id, so they are loaded afresh.

    Raises :class:`EmbeddingError` naming the fix when the model or onnxruntime
    is missing: "no embedding model found at X; run `cortex model install` or
    use mode='keyword'".
    """
    from cortex.query_int8 import query_encoder_asked, query_encoder_choice

    located = _locate(None)
    # Keyed on whether the encoder was asked for: the default falls back to fp32 where
    # the int8 graph is missing, an asked-for int8 makes it.
    encoder = query_encoder_choice(query_encoder)
    key = (
        str(located.path),
        located.model_id,
        threads,
        encoder,
        query_encoder_asked(query_encoder),
    )
    with _LOADED_LOCK:
        embedder = _LOADED.get(key)
        if embedder is None:
            embedder = _LOADED[key] = OnnxEmbedder(
                None, threads=threads, query_encoder=query_encoder
            )
    return embedder
