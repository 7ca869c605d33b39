"""Stubs for the Rust extension ``cortex._native`` (see rust/)."""

import os
from pathlib import Path
from typing import final

import numpy as np
import numpy.typing as npt

__all__ = [
    "AnnIndex",
    "FileLock",
    "KeywordIndex",
    "NativeIndex",
    "__version__",
    "default_threads",
    "linear",
    "replace_file",
    "rrf",
    "simd_level",
]

__version__: str

def simd_level() -> str: ...
def replace_file(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None: ...
def default_threads() -> int: ...
def rrf(
    lists: list[npt.NDArray[np.int64]],
    weights: list[float],
    k: float = 60.0,
    scores: list[npt.NDArray[np.float64]] | None = None,
) -> dict[str, np.ndarray]: ...
def linear(
    lists: list[npt.NDArray[np.int64]],
    scores: list[npt.NDArray[np.float64]],
    weights: list[float],
) -> dict[str, np.ndarray]: ...

@final
class FileLock:
    def __new__(cls, path: str | os.PathLike[str]) -> FileLock: ...
    def acquire(self, blocking: bool = True) -> bool: ...
    def release(self) -> None: ...
    def close(self) -> None: ...
    @property
    def locked(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> Path: ...
    def __enter__(self) -> FileLock: ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> None: ...

@final
class NativeIndex:
    @staticmethod
    def create(path: str | os.PathLike[str], dim: int, model_id: str) -> NativeIndex: ...
    @staticmethod
    def open(
        path: str | os.PathLike[str], writable: bool = False, upto: int | None = None
    ) -> NativeIndex: ...
    @property
    def dim(self) -> int: ...
    @property
    def model_id(self) -> str: ...
    @property
    def rows(self) -> int: ...
    @property
    def quantized_rows(self) -> int: ...
    @property
    def writable(self) -> bool: ...
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def live_count(self) -> int: ...
    def ids_and_live(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]: ...
    def append(self, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None: ...
    def mask(self, ids: npt.NDArray[np.int64]) -> int: ...
    def refresh(self, upto: int | None = None) -> None: ...
    def rebuild_quantized(self) -> None: ...
    def verify(self, from_row: int = 0) -> None: ...
    @property
    def uuid(self) -> str: ...
    def sync(self) -> None: ...
    def close(self) -> None: ...
    def search(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        allowed: npt.NDArray[np.int64] | None = None,
        quantized: bool | None = None,
        threads: int | None = None,
        candidates: int | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]: ...
    def search_batch(
        self,
        queries: npt.NDArray[np.float32],
        k: int,
        quantized: bool | None = None,
        threads: int | None = None,
        candidates: int | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]: ...
    def read_floor(self, part: str, threads: int = 1) -> int: ...

@final
class AnnIndex:
    @staticmethod
    def build(
        index: NativeIndex,
        path: str | os.PathLike[str],
        nlist: int,
        sample: int,
        iters: int = 10,
        seed: int = 0,
        threads: int | None = None,
    ) -> tuple[int, int]: ...
    @staticmethod
    def open(path: str | os.PathLike[str]) -> AnnIndex: ...
    @property
    def nlist(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def rows(self) -> int: ...
    @property
    def uuid(self) -> str: ...
    @property
    def seed(self) -> int: ...
    def search(
        self,
        index: NativeIndex,
        query: npt.NDArray[np.float32],
        k: int,
        nprobe: int,
        allowed: npt.NDArray[np.int64] | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32], int, bool]: ...

@final
class KeywordIndex:
    def __init__(self) -> None: ...
    def add(
        self,
        ids: npt.NDArray[np.int64],
        texts: list[str],
        projects: list[str] | None = None,
    ) -> None: ...
    def stats(self, projects: list[str] | None = None) -> tuple[int, int]: ...
    def remove(self, ids: npt.NDArray[np.int64]) -> int: ...
    def __len__(self) -> int: ...
    def __contains__(self, memory_id: int, /) -> bool: ...
    @property
    def total_tokens(self) -> int: ...
    def df(self, term: str, projects: list[str] | None = None) -> int: ...
    def holding(self, words: list[str], ids: list[int]) -> list[bool | None]: ...
    def keep_ranks(
        self,
        rows: list[
            tuple[
                int,
                tuple[float, float, float, str | None, bool, bool, str | None, bool] | None,
            ]
        ],
    ) -> None: ...
    def drop_ranks(self, ids: list[int] | None = None) -> None: ...
    def rank_page(
        self,
        terms: list[str],
        pool: int,
        *,
        then_any: bool,
        allowed: npt.NDArray[np.int64] | None = None,
        projects: list[str] | None = None,
        wall: list[str] | None = None,
        include_superseded: bool = False,
        bound: float,
        now: float,
        day: float,
        ln2: float,
        slope: float,
        recency_weight: float,
        half_life_days: float,
        decay_floor: float,
        salience_weight: float,
        superseded_factor: float,
        min_confidence: float,
        threshold: float,
        sectors: dict[str, float],
        ascending: bool = False,
        prefilter: int = 4,
        max_fetch: int = 8192,
    ) -> (
        tuple[list[int], bool, list[int], list[int], list[float], list[float], int, bool] | None
    ): ...
    def memory_bytes(self) -> int: ...
    def to_bytes(self, tag: int) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> tuple[KeywordIndex, int]: ...
    @staticmethod
    def load(path: str | os.PathLike[str]) -> tuple[KeywordIndex, int]: ...
    @staticmethod
    def tokenize(text: str) -> list[str]: ...
    @staticmethod
    def query_terms(words: list[str]) -> list[str] | None: ...
    def search(
        self,
        terms: list[str],
        k: int,
        require_all: bool = False,
        allowed: npt.NDArray[np.int64] | None = None,
        projects: list[str] | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]: ...
