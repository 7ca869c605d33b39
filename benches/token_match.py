"""Does a token-level match separate the agent set's answered nothing-relevant queries from
answerable ones? For each query of a split that holds words no memory holds (as
benches/ignored_features.py finds them) and that the hybrid search answers, the largest
cosine between each such word's vector (its WordPiece tokens' last-layer states of
all-MiniLM-L6-v2, averaged) and any token of the best note (ColBERT's max-sim): a note
that answers the question should hold something near the word.

    CORTEX_EVAL_CACHE=... python benches/token_match.py [--split tune]

BENCHMARKS.md, "Ranking: a larger agent set, abstention chosen again", quotes what it
printed (it did not separate them: paraphrases' rare words match no token either).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import cortex
from cortex import agent_eval as ae

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ignored_features import features

#: The last layer's normalised token states in cortex's fp32 graph (before its pooling).
TOKENS = "l5/out_ln"


def token_session(embedder: object) -> ort.InferenceSession:
    """cortex's fp32 graph with the token states as a second output."""
    model = onnx.load(str(embedder._located.onnx.path))  # type: ignore[attr-defined]
    model.graph.output.append(
        onnx.helper.make_tensor_value_info(TOKENS, onnx.TensorProto.FLOAT, ["b", "s", None])
    )
    path = Path(tempfile.mkdtemp()) / "tokens.onnx"
    onnx.save(model, str(path))
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def token_vecs(
    session: ort.InferenceSession, embedder: object, text: str
) -> tuple[object, np.ndarray]:
    enc = embedder._tokenizer.encode(text)  # type: ignore[attr-defined]
    ids = np.array([enc.ids], dtype=np.int64)
    feed = {}
    for name, dtype in embedder._inputs.items():  # type: ignore[attr-defined]
        arr = (
            ids
            if name == "input_ids"
            else (np.ones_like(ids) if name == "attention_mask" else np.zeros_like(ids))
        )
        feed[name] = arr.astype(dtype, copy=False)
    (hidden,) = session.run([TOKENS], feed)
    h = np.asarray(hidden[0], dtype=np.float64)
    return enc, h / np.linalg.norm(h, axis=1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="tune")
    args = ap.parse_args()
    s = ae.load_set("agent")
    now = datetime.fromisoformat(s.meta["now"])
    rows = []
    session = None
    for store in s.stores:
        db, _ = ae.build_store(s, store)
        with cortex.open(db) as engine:
            embedder = engine._pipeline._semantic._semantic.embedder()
            session = session or token_session(embedder)
            for q in s.queries:
                if str(q["store"]) != store or ae.split_of(q["id"]) != args.split:
                    continue
                opts = cortex.Options(**{**q.get("options", {}), "now": now, "mode": "hybrid",
                                         "limit": 10, "record": False})  # fmt: skip
                f = features(engine, q["query"], opts)
                found = list(engine.search(q["query"], opts)) if f is not None else []
                if f is None or not found:
                    continue
                missing = {w.lower() for w in f["words"]}
                qe, qh = token_vecs(session, embedder, q["query"])
                _, nh = token_vecs(session, embedder, found[0].memory.content)
                sims = []
                for w in {x for x in qe.word_ids if x is not None}:
                    a, b = qe.word_to_chars(w)
                    if q["query"][a:b].lower() in missing:
                        v = qh[[t for t, x in enumerate(qe.word_ids) if x == w]].mean(axis=0)
                        sims.append(float((nh[1:-1] @ (v / np.linalg.norm(v))).max()))
                if sims:
                    rows.append((min(sims), q["kind"], ",".join(sorted(missing)), q["query"]))
    for best, kind, words, query in sorted(rows):
        print(f"{kind:11} max-sim {best:.3f} {words[:30]:30} | {query[:64]}")


if __name__ == "__main__":
    main()
