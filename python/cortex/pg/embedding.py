"""The embedding side of an Engine on PostgreSQL: the embedder (loaded as on SQLite), and
vectors reused from pgvector when the same text was embedded by the same model. There is
no vector file to keep in step: pgvector is the index (cortex.pg.vectors)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cortex.pg.store import EmbeddingBatch, PgStore
from cortex.semantic import Semantic, _embed_sorted
from cortex.store import MemoryInput, content_hash

__all__ = ["PgSemantic"]


class PgSemantic(Semantic):
    """:class:`cortex.semantic.Semantic`'s embedder half over a :class:`PgStore`."""

    def __init__(self, store: PgStore, embedder: Any = "auto") -> None:
        super().__init__(store, embedder)  # type: ignore[arg-type]
        self._pg = store

    def vectors_for(
        self, contents: Sequence[str], progress: Any = None, *, reuse: bool = True
    ) -> dict[str, Any]:
        """f32 vectors by content hash for `contents`: reused from pgvector when this model
        already embedded the same text, embedded in batches otherwise."""
        embedder = self.embedder()
        hashes = {content_hash(c): c for c in contents}
        known: dict[str, Any] = self._pg.known_vectors(str(embedder.model_id), list(hashes))
        missing = [h for h in hashes if h not in known]
        if missing:
            vecs = _embed_sorted(embedder, [hashes[h] for h in missing], progress)
            for h, v in zip(missing, vecs, strict=True):
                known[h] = np.asarray(v, dtype=np.float32)
        return known

    def batch(self, vectors: Any) -> EmbeddingBatch:
        """The vectors by content hash as one model's batch, for the store's writes."""
        embedder = self.embedder()
        return EmbeddingBatch(str(embedder.model_id), int(embedder.dim), vectors)

    def embed_batch(self, items: Sequence[MemoryInput], progress: Any = None) -> EmbeddingBatch:
        return self.batch(self.vectors_for([i.content for i in items], progress))

    def backlog(self) -> list[tuple[int, str]]:
        return self._pg.backlog(self.model_id)

    def index(self) -> Any:
        return None

    def rebuild(self) -> int:
        """pgvector is the index: the live vectors of the active model."""
        return self._pg.embedding_count(self.model_id)

    def close(self) -> None:
        pass
