"""The int8 query encoder (cortex.query_int8): built by cortex's own ONNX writer at
install (or, when asked for, from the fp32 graph's weights), pinned by its sha256, used
for queries only; the default where it is installed, fp32 with a notice where not."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import cortex
from cortex.embed import OnnxEmbedder
from cortex.errors import EmbeddingError
from cortex.model import EXPECTED_INT8_ONNX_SHA256, EXPECTED_ONNX_SHA256
from cortex.model_dir import default_model_dir
from cortex.query_int8 import ENCODER_ENV, INT8_DIR, installed_int8, int8_graph

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


def test_int8_is_the_default_where_it_is_installed() -> None:
    """The installed model has its int8 graph (written by `cortex model install`), so a
    default embedder runs it for queries; fp32 stays a choice, by argument or env."""
    emb = OnnxEmbedder(MODEL_DIR, threads=1)
    assert emb.query_encoder == "int8"
    assert emb.query_id == emb.model_id + "+int8"
    assert (MODEL_DIR / INT8_DIR / "model.onnx").is_file()
    fp32 = OnnxEmbedder(MODEL_DIR, threads=1, query_encoder="fp32")
    assert fp32.query_encoder == "fp32" and fp32.query_id == fp32.model_id
    for s in SENTENCES:
        assert np.array_equal(fp32.embed_query(s), fp32.embed(s))


def test_fp32_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENCODER_ENV, "fp32")
    emb = OnnxEmbedder(MODEL_DIR, threads=1)
    assert emb.query_encoder == "fp32"
    assert np.array_equal(emb.embed_query(SENTENCES[0]), emb.embed(SENTENCES[0]))


def test_without_the_int8_graph_the_default_falls_back_to_fp32_with_one_notice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = _copy_model(tmp_path / "m")  # an install by an older cortex: no int8/
    with caplog.at_level(logging.WARNING, logger="cortex"):
        first = OnnxEmbedder(model, threads=1)
        again = OnnxEmbedder(model, threads=1)
    notices = [r for r in caplog.records if "int8 query encoder is not installed" in r.message]
    assert len(notices) == 1, "one notice per model dir and process"
    assert "cortex model install" in notices[0].getMessage()
    for emb in (first, again):
        assert emb.query_encoder == "fp32" and emb.query_id == emb.model_id
        assert np.array_equal(emb.embed_query(SENTENCES[1]), emb.embed(SENTENCES[1]))
    assert not (model / INT8_DIR).exists(), "the default never builds it inside a search"


def test_the_int8_graph_bytes_are_pinned_and_rebuilt_identically(tmp_path: Path) -> None:
    fp32_graph = (MODEL_DIR / "model.onnx").read_bytes()
    assert hashlib.sha256(fp32_graph).hexdigest() == EXPECTED_ONNX_SHA256
    graph = int8_graph(fp32_graph)
    assert hashlib.sha256(graph).hexdigest() == EXPECTED_INT8_ONNX_SHA256
    assert int8_graph(fp32_graph) == graph, "the build is deterministic"
    # the graph `cortex model install` wrote is those bytes
    assert (MODEL_DIR / INT8_DIR / "model.onnx").read_bytes() == graph


def test_the_int8_graph_is_what_onnx_would_serialize() -> None:
    """cortex.onnx_proto writes it without the onnx package; where onnx is installed
    (not a dependency), its checker accepts the graph and re-serializes the same bytes."""
    onnx = pytest.importorskip("onnx")
    graph = (MODEL_DIR / INT8_DIR / "model.onnx").read_bytes()
    model = onnx.load_from_string(graph)
    onnx.checker.check_model(model)
    assert model.SerializeToString() == graph
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("MatMulInteger") == 36  # every Linear of the 6 layers
    assert ops.count("DynamicQuantizeLinear") == 24  # q, k and v share their input's


def test_an_asked_int8_is_made_without_extra_packages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = _copy_model(tmp_path / "m")
    for name in ("onnx", "onnxruntime.quantization"):
        monkeypatch.setitem(sys.modules, name, None)  # importing either would fail
    emb = OnnxEmbedder(model, threads=1, query_encoder="int8")
    assert emb.query_encoder == "int8"
    emb.embed_query(SENTENCES[0])
    made = (model / INT8_DIR / "model.onnx").read_bytes()
    assert hashlib.sha256(made).hexdigest() == EXPECTED_INT8_ONNX_SHA256
    # from now on the default runs it too
    assert OnnxEmbedder(model, threads=1).query_encoder == "int8"


def test_int8_is_not_made_for_a_model_cortex_did_not_build(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = _copy_model(tmp_path / "m")
    data = bytearray((model / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0x01  # another weight: another graph, not cortex's
    (model / "model.onnx").write_bytes(bytes(data))
    emb = OnnxEmbedder(model, threads=1, query_encoder="fp32")
    assert installed_int8(model, emb._located.onnx) is None
    asked = OnnxEmbedder(model, threads=1, query_encoder="int8")
    with pytest.raises(EmbeddingError, match=r"only for the model cortex installs.*fp32"):
        asked.embed_query(SENTENCES[0])
    with caplog.at_level(logging.WARNING, logger="cortex"):
        assert OnnxEmbedder(model, threads=1).query_encoder == "fp32"  # the default falls back
    assert any("only for the model it installs" in r.getMessage() for r in caplog.records)


def test_int8_encodes_queries_only_and_is_close_to_fp32(model_copy: Path) -> None:
    fp32 = OnnxEmbedder(model_copy, threads=1, query_encoder="fp32")
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
    assert cosines.min() > 0.98
    # each query still finds its own sentence first among the others
    assert ((queries @ docs.T).argmax(axis=1) == np.arange(len(SENTENCES))).all()


def test_the_int8_graph_is_recorded_with_its_checksum(model_copy: Path) -> None:
    OnnxEmbedder(model_copy, threads=1, query_encoder="int8").embed_query("warm")
    folder = model_copy / INT8_DIR
    record = json.loads((folder / "manifest.json").read_text())
    fp32_sha = hashlib.sha256((model_copy / "model.onnx").read_bytes()).hexdigest()
    assert record["source_sha256"] == fp32_sha
    made = hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest()
    assert record["files"]["model.onnx"]["sha256"] == made == EXPECTED_INT8_ONNX_SHA256


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
    fp32 = OnnxEmbedder(model_copy, threads=1, query_encoder="fp32")
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


def test_model_install_adds_the_int8_graph_to_an_older_install(tmp_path: Path) -> None:
    from cortex.model import install_model

    model = _copy_model(tmp_path / "m")  # an intact fp32 install without int8/
    steps: list[str] = []
    install_model(model, progress=steps.append)
    assert any("int8 query graph" in step for step in steps)
    made = (model / INT8_DIR / "model.onnx").read_bytes()
    assert hashlib.sha256(made).hexdigest() == EXPECTED_INT8_ONNX_SHA256
    assert OnnxEmbedder(model, threads=1).query_encoder == "int8"


def test_a_damaged_int8_graph_is_not_run_by_default(tmp_path: Path) -> None:
    model = _copy_model(tmp_path / "m")
    OnnxEmbedder(model, threads=1, query_encoder="int8").embed_query("make it")
    graph = model / INT8_DIR / "model.onnx"
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF
    graph.write_bytes(bytes(data))
    emb = OnnxEmbedder(model, threads=1)  # verified at load: not the pinned bytes
    assert emb.query_encoder == "fp32"
    assert np.array_equal(emb.embed_query(SENTENCES[3]), emb.embed(SENTENCES[3]))


def test_cortex_model_says_what_queries_run_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from cortex.cli import main

    model = _copy_model(tmp_path / "m")
    monkeypatch.setenv("CORTEX_MODEL_DIR", str(model))
    assert main(["model", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["query_encoder"] == "fp32" and shown["query_graph"] is None  # not installed
    OnnxEmbedder(model, threads=1, query_encoder="int8").embed_query("make it")
    assert main(["model", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["query_encoder"] == "int8"
    assert shown["query_graph"]["sha256"] == EXPECTED_INT8_ONNX_SHA256
    monkeypatch.setenv(ENCODER_ENV, "fp32")
    assert main(["model"]) == 0
    assert "   queries: fp32" in capsys.readouterr().out
