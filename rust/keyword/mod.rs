//! Keyword search in memory: FTS5's tokenizer, Porter stemmer and BM25, reproduced so
//! that the top-k and the scores equal those of SQLite FTS5 (`porter unicode61
//! remove_diacritics 2`, `bm25()`), for queries of quoted terms joined by AND or OR.
//! Pure Rust, no pyo3; `py_keyword.rs` wraps it.
pub mod index;
pub mod porter;
pub mod rank;
pub mod tokenize;
mod unicode61_tables;

pub(crate) use index::FxMap;
pub use index::{Hit, Index, Scope, NO_PROJECT};
pub use tokenize::Tokenizer;
