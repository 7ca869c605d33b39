"""The int8 query encoder (cortex.query_int8): made from the verified fp32 graph and
recorded with its own sha256, used for queries only, and only when chosen."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import cortex
from cortex.embed import OnnxEmbedder
from cortex.errors import EmbeddingError
from cortex.model_dir import default_model_dir
from cortex.query_int8 import ENCODER_ENV, INT8_DIR

MODEL_DIR = default_model_dir()
SENTENCES = [
    "the deploy failed because the migration locked the users table",
    "Priya moved the standup to Friday",
    "albendazole treats intestinal worms in children",
    "how do I rotate the API keys of the billing service?",
]


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORTEX_MODEL_DIR", raising=False)
    monkeypatch.delenv(ENCODER_ENV, raising=False)


def _copy_model(dest: Path) -> Path:
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.fail(f"the embedding model is not installed at {MODEL_DIR}", pytrace=False)
    dest.mkdir()
    for name in ("model.onnx", "tokenizer.json", "manifest.json", "sentence_bert_config.json"):
        shutil.copy2(MODEL_DIR / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def model_copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of the installed model dir (the int8 graph is made inside it)."""
    path = _copy_model(tmp_path_factory.mktemp("model") / "all-MiniLM-L6-v2")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_fp32_is_the_default_and_makes_no_int8_graph(tmp_path: Path) -> None:
    model = _copy_model(tmp_path / "m")
    emb = OnnxEmbedder(model, threads=1)
    assert emb.query_encoder == "fp32"
    assert emb.query_id == emb.model_id
    for s in SENTENCES:
        assert np.array_equal(emb.embed_query(s), emb.embed(s))
    assert not (model / INT8_DIR).exists()


def test_int8_encodes_queries_only_and_is_close_to_fp32(model_copy: Path) -> None:
    fp32 = OnnxEmbedder(model_copy, threads=1)
    int8 = OnnxEmbedder(model_copy, threads=1, query_encoder="int8")
    assert int8.query_encoder == "int8"
    assert int8.model_id == fp32.model_id  # the stored vectors are the fp32 graph's
    assert int8.query_id == fp32.model_id + "+int8"
    docs = fp32.embed_batch(SENTENCES)
    # documents: the model's own graph, bit for bit
    assert np.array_equal(int8.embed_batch(SENTENCES), docs)
    assert np.array_equal(int8.embed(SENTENCES[0]), fp32.embed(SENTENCES[0]))
    queries = np.stack([int8.embed_query(s) for s in SENTENCES])
    assert queries.dtype == np.float32 and queries.shape == docs.shape
    assert np.allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)
    assert not np.array_equal(queries, docs)  # another graph ran
    cosines = (queries * docs).sum(axis=1)
    assert cosines.min() > 0.95
    # each query still finds its own sentence first among the others
    assert ((queries @ docs.T).argmax(axis=1) == np.arange(len(SENTENCES))).all()


def test_the_int8_graph_is_recorded_with_its_checksum(model_copy: Path) -> None:
    OnnxEmbedder(model_copy, threads=1, query_encoder="int8").embed_query("warm")
    folder = model_copy / INT8_DIR
    record = json.loads((folder / "manifest.json").read_text())
    import hashlib

    fp32_sha = hashlib.sha256((model_copy / "model.onnx").read_bytes()).hexdigest()
    assert record["source_sha256"] == fp32_sha
    made = hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest()
    assert record["files"]["model.onnx"]["sha256"] == made


def test_a_damaged_int8_graph_is_made_again(tmp_path: Path) -> None:
    model = _copy_model(tmp_path / "m")
    first = OnnxEmbedder(model, threads=1, query_encoder="int8")
    want = first.embed_query(SENTENCES[2])
    graph = model / INT8_DIR / "model.onnx"
    good = graph.read_bytes()
    data = bytearray(good)
    data[len(data) // 2] ^= 0xFF
    graph.write_bytes(bytes(data))  # another mtime: the checksum is read again
    again = OnnxEmbedder(model, threads=1, query_encoder="int8")
    assert np.array_equal(again.embed_query(SENTENCES[2]), want)
    assert graph.read_bytes() == good


def test_the_environment_chooses_and_bad_choices_raise(
    monkeypatch: pytest.MonkeyPatch, model_copy: Path
) -> None:
    monkeypatch.setenv(ENCODER_ENV, "int8")
    assert OnnxEmbedder(model_copy, threads=1).query_encoder == "int8"
    # the argument wins over the environment
    assert OnnxEmbedder(model_copy, threads=1, query_encoder="fp32").query_encoder == "fp32"
    monkeypatch.setenv(ENCODER_ENV, "int4")
    with pytest.raises(EmbeddingError, match=ENCODER_ENV):
        OnnxEmbedder(model_copy, threads=1)
    monkeypatch.delenv(ENCODER_ENV)
    with pytest.raises(ValueError, match="query_encoder"):
        OnnxEmbedder(model_copy, threads=1, query_encoder="fp16")


def test_a_search_embeds_its_query_with_the_chosen_encoder(
    tmp_path: Path, model_copy: Path
) -> None:
    fp32 = OnnxEmbedder(model_copy, threads=1)
    int8 = OnnxEmbedder(model_copy, threads=1, query_encoder="int8")
    db = tmp_path / "c.db"
    with cortex.open(db, embedder=fp32) as e:
        e.add_many({"content": s} for s in SENTENCES)
    for emb, key in ((fp32, fp32.model_id), (int8, int8.query_id)):
        with cortex.open(db, embedder=emb) as e:
            got = e.search("worms in children", cortex.Options(mode="semantic", record=False))
            assert got[0].memory.content == SENTENCES[2]
            assert [k[0] for k in e.query_cache._entries] == [key]
            # the cosine is the chosen encoder's query against the stored fp32 vector
            want = float(emb.embed_query("worms in children") @ fp32.embed(SENTENCES[2]))
            assert got[0].semantic_score is not None
            assert abs(_cosine(e, got[0]) - want) < 1e-5


def _cosine(engine: cortex.Engine, result: cortex.Result) -> float:
    explained = engine.search(
        "worms in children", cortex.Options(mode="semantic", record=False, explain=True)
    )
    for r in explained:
        if r.memory.id == result.memory.id:
            assert r.explain is not None
            return float(r.explain["cosine"])
    raise AssertionError("not found again")


def test_without_the_onnx_package_int8_says_how_to_fix_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The quantizer imports onnx, which cortex does not depend on: choosing int8 where
    it is missing raises EmbeddingError naming both ways out, and fp32 still works."""
    import sys

    model = _copy_model(tmp_path / "m")
    monkeypatch.setitem(sys.modules, "onnxruntime.quantization", None)  # import fails
    emb = OnnxEmbedder(model, threads=1, query_encoder="int8")
    with pytest.raises(EmbeddingError, match=r"pip install onnx.*query_encoder='fp32'"):
        emb.embed_query(SENTENCES[0])
    assert not (model / INT8_DIR / "model.onnx").exists()
    fp32 = OnnxEmbedder(model, threads=1)
    assert np.array_equal(fp32.embed_query(SENTENCES[0]), fp32.embed(SENTENCES[0]))
