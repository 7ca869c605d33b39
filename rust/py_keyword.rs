//! Thin pyo3 wrapper of the in-memory keyword index (`crate::keyword`): validate and
//! copy arguments with the GIL held, tokenize and search with it released.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use crate::errors::{Error, Result};
use crate::keyword::rank::{self, Admit, Params, RankRow};
use crate::keyword::{tokenize, FxMap, Hit, Index, Scope};

/// Threads that tokenize one `add` (when it holds enough text to pay for a second).
const ADD_THREADS: usize = 2;

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// Copy a 1-d int64 array out (contiguous or not).
fn i64_array(obj: &Bound<'_, PyAny>, name: &str) -> Result<Vec<i64>> {
    let a = obj.cast::<PyArray1<i64>>().map_err(|_| {
        Error::Type(format!(
            "{name} must be a 1-d numpy int64 array, got {}; use np.asarray({name}, dtype=np.int64)",
            type_name(obj)
        ))
    })?;
    let ro = a
        .try_readonly()
        .map_err(|_| Error::Invalid(format!("{name} is being written to")))?;
    Ok(ro.as_array().iter().copied().collect())
}

/// Copy a list of str out.
fn str_list(obj: &Bound<'_, PyAny>, name: &str) -> Result<Vec<String>> {
    let list = obj.cast::<PyList>().map_err(|_| {
        Error::Type(format!(
            "{name} must be a list of str, got {}",
            type_name(obj)
        ))
    })?;
    list.iter()
        .enumerate()
        .map(|(i, item)| {
            let s = item.cast::<PyString>().map_err(|_| {
                Error::Type(format!(
                    "{name}[{i}] must be a str, got {}",
                    type_name(&item)
                ))
            })?;
            s.to_str()
                .map(str::to_owned)
                .map_err(|e| Error::Invalid(format!("{name}[{i}] is not valid Unicode: {e}")))
        })
        .collect()
}

/// The one index term of each query word, or the first word that has not exactly one.
fn query_terms_of(words: &[String]) -> std::result::Result<Vec<Vec<u8>>, (usize, usize)> {
    let mut tok = tokenize::Tokenizer::new();
    words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let mut t = tok.terms(w);
            if t.len() == 1 {
                Ok(t.pop().unwrap_or_default())
            } else {
                Err((i, t.len()))
            }
        })
        .collect()
}

fn lossy(t: &[u8]) -> String {
    String::from_utf8_lossy(t).into_owned()
}

fn scope_of(ix: &Index, names: Option<&[String]>) -> Option<Scope> {
    names.map(|n| {
        let refs: Vec<&str> = n.iter().map(String::as_str).collect();
        ix.scope(&refs)
    })
}

type Pair<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<f64>>);

/// In-memory BM25 keyword index that ranks exactly as SQLite FTS5 does with
/// `tokenize='porter unicode61 remove_diacritics 2'` and `bm25()`, for queries of
/// quoted terms joined by AND or OR.
#[pyclass(module = "cortex._native", frozen)]
pub struct KeywordIndex {
    inner: RwLock<Index>,
    /// The ranking columns kept for memories searches returned (None: deleted or
    /// missing), in step with cortex.keyword_index.KeywordIndexer's own copy; not saved.
    ranks: RwLock<FxMap<i64, Option<RankRow>>>,
    /// Bumped by every change of the postings: a `Tier` kept under an older one is stale.
    generation: AtomicU64,
    /// The hits of rank_page's last tier that stopped at rows whose columns were not
    /// kept: the caller keeps them and asks again, and the same search is not run twice.
    pending: Mutex<Option<Tier>>,
}

/// One tier search of rank_page and its hits (see `KeywordIndex::pending`).
struct Tier {
    generation: u64,
    phrases: Vec<Vec<u8>>,
    k: usize,
    require_all: bool,
    allowed: Option<Vec<i64>>,
    projects: Option<Vec<String>>,
    hits: Vec<Hit>,
}

/// The columns of one kept row as Python passes them: (created, confidence, salience,
/// sector, dated, superseded, project, ok), or None for a deleted memory.
type RowArg = Option<(
    f64,
    f64,
    f64,
    Option<String>,
    bool,
    bool,
    Option<String>,
    bool,
)>;

/// What rank_page ranks with, positionally (one tuple: keyword arguments cost ~0.3 us
/// each to match): (now, day, ln2, recency weight, half-life in days, decay floor,
/// salience weight, superseded factor, min confidence, threshold, ascending).
type Weights = (f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, bool);

/// What rank_page answers: (memories whose columns are not kept, whether the AND of
/// the terms answered, the admitted hits' ids in BM25 order, their BM25, their
/// calibrated keyword scores, ranked ids, their scores, their calibrated keyword
/// scores, hidden, damaged).
type PageOut = (
    Vec<i64>,
    bool,
    Vec<i64>,
    Vec<f64>,
    Vec<f64>,
    Vec<i64>,
    Vec<f64>,
    Vec<f64>,
    usize,
    bool,
);

/// The admitted hits of one search, or the ids whose columns must be read first (with
/// the search's hits, kept for the next call: `KeywordIndex::pending`).
enum Admitted {
    Missing(Vec<i64>, Vec<Hit>),
    Hits(Vec<Hit>),
}

impl KeywordIndex {
    fn read<T>(&self, f: impl FnOnce(&Index) -> T) -> Result<T> {
        let g = self
            .inner
            .read()
            .map_err(|_| Error::State("keyword index lock poisoned".into()))?;
        Ok(f(&g))
    }
    fn new_with(ix: Index) -> Self {
        KeywordIndex {
            inner: RwLock::new(ix),
            ranks: RwLock::new(FxMap::default()),
            generation: AtomicU64::new(0),
            pending: Mutex::new(None),
        }
    }
    fn ranks_write<T>(&self, f: impl FnOnce(&mut FxMap<i64, Option<RankRow>>) -> T) -> Result<T> {
        let mut g = self
            .ranks
            .write()
            .map_err(|_| Error::State("keyword index lock poisoned".into()))?;
        Ok(f(&mut g))
    }
    /// Of `hits` (best first), those whose kept columns `admit` passes; or the hits
    /// whose columns are not kept.
    fn admitted(&self, hits: Vec<Hit>, admit: &Admit<'_>) -> Result<Admitted> {
        let g = self
            .ranks
            .read()
            .map_err(|_| Error::State("keyword index lock poisoned".into()))?;
        let mut missing = Vec::new();
        let mut kept = Vec::with_capacity(hits.len());
        for h in &hits {
            match g.get(&h.id) {
                None => missing.push(h.id),
                Some(Some(row)) if missing.is_empty() && admit.admits(row) => kept.push(*h),
                Some(_) => {}
            }
        }
        Ok(if missing.is_empty() {
            Admitted::Hits(kept)
        } else {
            Admitted::Missing(missing, hits)
        })
    }
    /// The hits `pending` holds for this very search (taken), else None.
    fn take_pending(
        &self,
        phrases: &[Vec<u8>],
        k: usize,
        require_all: bool,
        allowed: Option<&[i64]>,
        projects: Option<&[String]>,
    ) -> Result<Option<Vec<Hit>>> {
        let mut g = self
            .pending
            .lock()
            .map_err(|_| Error::State("keyword index lock poisoned".into()))?;
        let same = g.as_ref().is_some_and(|t| {
            t.generation == self.generation.load(Ordering::Acquire)
                && t.k == k
                && t.require_all == require_all
                && t.phrases == phrases
                && t.allowed.as_deref() == allowed
                && t.projects.as_deref() == projects
        });
        Ok(if same { g.take().map(|t| t.hits) } else { None })
    }
    fn keep_pending(&self, tier: Tier) -> Result<()> {
        *self
            .pending
            .lock()
            .map_err(|_| Error::State("keyword index lock poisoned".into()))? = Some(tier);
        Ok(())
    }
    /// `rank::rank` of admitted `hits` over their kept columns (None: a row is damaged
    /// or no longer kept; rank in Python).
    fn ranked(&self, hits: &[Hit], params: &Params) -> Result<Option<rank::Page>> {
        let g = self
            .ranks
            .read()
            .map_err(|_| Error::State("keyword index lock poisoned".into()))?;
        let mut rows = Vec::with_capacity(hits.len());
        for h in hits {
            match g.get(&h.id) {
                Some(Some(row)) if row.ok => rows.push(row),
                _ => return Ok(None),
            }
        }
        Ok(Some(rank::rank(hits, &rows, params)))
    }
    fn write<T>(&self, f: impl FnOnce(&mut Index) -> T) -> Result<T> {
        let mut g = self
            .inner
            .write()
            .map_err(|_| Error::State("keyword index lock poisoned".into()))?;
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(f(&mut g))
    }
}

#[pymethods]
impl KeywordIndex {
    #[new]
    fn new() -> Self {
        KeywordIndex::new_with(Index::new())
    }

    /// Insert documents: `ids` int64 (n,), `texts` a list of n str, `projects` a list
    /// of n project names (None: every document without a project, "\0"). An id
    /// already present is replaced (its old postings and project stop counting); of an
    /// id given twice, the last text wins. Tokenizes with the GIL released.
    #[pyo3(signature = (ids, texts, projects = None))]
    fn add(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyAny>,
        texts: &Bound<'_, PyAny>,
        projects: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let ids = i64_array(ids, "ids")?;
        let texts = str_list(texts, "texts")?;
        if ids.len() != texts.len() {
            return Err(Error::Invalid(format!(
                "{} ids for {} texts; pass one id per text",
                ids.len(),
                texts.len()
            ))
            .into());
        }
        let projects = projects.map(|p| str_list(p, "projects")).transpose()?;
        if let Some(p) = &projects {
            if p.len() != ids.len() {
                return Err(Error::Invalid(format!(
                    "{} projects for {} ids; pass one project per id",
                    p.len(),
                    ids.len()
                ))
                .into());
            }
        }
        py.detach(|| {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let prefs: Option<Vec<&str>> = projects
                .as_ref()
                .map(|p| p.iter().map(String::as_str).collect());
            self.write(|ix| ix.add_in(&ids, &refs, prefs.as_deref(), ADD_THREADS))
        })?;
        Ok(())
    }

    /// (live documents, their tokens) of `projects` (a list of names; None: all).
    #[pyo3(signature = (projects = None))]
    fn stats(&self, projects: Option<&Bound<'_, PyAny>>) -> PyResult<(u64, u64)> {
        let names = projects.map(|p| str_list(p, "projects")).transpose()?;
        Ok(self.read(|ix| {
            let scope = scope_of(ix, names.as_deref());
            ix.totals(scope.as_ref())
        })?)
    }

    /// Remove documents; returns how many were live. Unknown ids are ignored.
    fn remove(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<usize> {
        let ids = i64_array(ids, "ids")?;
        Ok(py.detach(|| self.write(|ix| ix.remove(&ids)))?)
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.read(Index::len)?)
    }

    fn __contains__(&self, memory_id: i64) -> PyResult<bool> {
        Ok(self.read(|ix| ix.contains(memory_id))?)
    }

    /// Tokens of all live documents (FTS5's per-column total).
    #[getter]
    fn total_tokens(&self) -> PyResult<u64> {
        Ok(self.read(Index::total_tokens)?)
    }

    /// Live documents holding `term`, an index term (already stemmed), in `projects`
    /// (a list of names; None: all).
    #[pyo3(signature = (term, projects = None))]
    fn df(&self, term: &str, projects: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
        let names = projects.map(|p| str_list(p, "projects")).transpose()?;
        Ok(self.read(|ix| {
            let scope = scope_of(ix, names.as_deref());
            ix.df_in(term.as_bytes(), scope.as_ref())
        })?)
    }

    /// For each of `words` (query words as typed, stemmed here as `search` stems them),
    /// whether one of the memories `ids` holds it; None for a word that gives no index
    /// term or several (FTS5 reads it as a phrase).
    fn holding(&self, words: &Bound<'_, PyAny>, ids: Vec<i64>) -> PyResult<Vec<Option<bool>>> {
        let words = str_list(words, "words")?;
        let mut tok = tokenize::Tokenizer::new();
        let terms: Vec<Option<Vec<u8>>> = words
            .iter()
            .map(|w| {
                let mut t = tok.terms(w);
                (t.len() == 1).then(|| t.pop().unwrap_or_default())
            })
            .collect();
        let single: Vec<&[u8]> = terms.iter().flatten().map(Vec::as_slice).collect();
        let held = self.read(|ix| ix.holding(&single, &ids))?;
        let mut held = held.into_iter();
        Ok(terms
            .iter()
            .map(|t| t.as_ref().and_then(|_| held.next()))
            .collect())
    }

    /// The surface words (folded as FTS5's unstemmed `unicode61 remove_diacritics 2`
    /// index stores them, before stemming) that start with `prefix`, in code point order,
    /// each with how many live memories hold it: exact while no memory was removed or
    /// replaced, an upper bound after (capped by its index term's live count; a word
    /// whose index term no live memory holds is left out). For ordering candidates,
    /// which the caller then counts within its filters.
    fn words_starting(&self, py: Python<'_>, prefix: &str) -> PyResult<Vec<(String, u32)>> {
        Ok(py.detach(|| {
            self.read(|ix| {
                ix.words_starting(prefix.as_bytes())
                    .into_iter()
                    .map(|(w, n)| (lossy(w), n))
                    .collect::<Vec<_>>()
            })
        })?)
    }

    /// The surface words that start with `prefix` (counted as `words_starting` counts
    /// them) within `limit` edits of `word` (optimal string alignment distance over code
    /// points, as cortex.suggest.edit_distance), `word` itself left out:
    /// (word, documents, distance), in code point order.
    fn words_near(
        &self,
        py: Python<'_>,
        prefix: &str,
        word: &str,
        limit: usize,
    ) -> PyResult<Vec<(String, u32, u8)>> {
        Ok(py.detach(|| {
            self.read(|ix| {
                ix.words_near(prefix.as_bytes(), word, limit)
                    .into_iter()
                    .map(|(w, n, d)| (lossy(w), n, d))
                    .collect::<Vec<_>>()
            })
        })?)
    }

    /// Approximate heap use in bytes.
    fn memory_bytes(&self) -> PyResult<usize> {
        Ok(self.read(Index::memory_bytes)?)
    }

    /// The index as bytes (a derived file's content), checksummed, with `tag` (an
    /// unsigned 64-bit number the caller chooses) stored beside it; see `from_bytes`.
    fn to_bytes<'py>(&self, py: Python<'py>, tag: u64) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = py.detach(|| self.read(|ix| ix.to_bytes(tag)))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// (index, tag) from `to_bytes`'s output. Raises IndexFormatError when the bytes are
    /// truncated, damaged (checksum, counts, references) or of another format.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<(KeywordIndex, u64)> {
        let (ix, tag) = py
            .detach(|| Index::from_bytes(data))
            .map_err(|e| Error::Format(format!("keyword index: {e}")))?;
        Ok((KeywordIndex::new_with(ix), tag))
    }

    /// (index, tag) from a file `to_bytes` wrote, read through a memory map (no copy of
    /// the file into a bytes object first). Raises IndexFormatError as `from_bytes` does,
    /// StorageError when the file cannot be opened or mapped.
    #[staticmethod]
    fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<(KeywordIndex, u64)> {
        let (ix, tag) = py.detach(|| -> Result<(Index, u64)> {
            let file = std::fs::File::open(&path).map_err(|e| Error::io("open", &path, e))?;
            // SAFETY: the file is mapped read-only for this call only; cortex replaces it
            // by renaming a new file over it, never by writing into it, so its bytes do not
            // change under the map (a foreign writer could; the checksum and the
            // structural checks then fail the load, never a later search).
            let map =
                unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io("map", &path, e))?;
            Index::from_bytes(&map).map_err(|e| Error::Format(format!("keyword index: {e}")))
        })?;
        Ok((KeywordIndex::new_with(ix), tag))
    }

    /// The index terms of `text`, in order, exactly as FTS5 `porter unicode61
    /// remove_diacritics 2` indexes them.
    #[staticmethod]
    fn tokenize(py: Python<'_>, text: &str) -> Vec<String> {
        let text = text.to_owned();
        py.detach(|| tokenize::terms(&text).iter().map(|t| lossy(t)).collect())
    }

    /// The index term of each query word, or None when a word has no token or more
    /// than one (FTS5 would read that quoted word as a phrase; search it with FTS5).
    #[staticmethod]
    fn query_terms(words: &Bound<'_, PyAny>) -> PyResult<Option<Vec<String>>> {
        let words = str_list(words, "words")?;
        Ok(query_terms_of(&words)
            .ok()
            .map(|t| t.iter().map(|x| lossy(x)).collect()))
    }

    /// Top `k` (memory ids int64, BM25 scores float64 = -FTS5 bm25()), best first, ties
    /// to the lower id, of the live documents that hold any of `terms` (every one with
    /// `require_all`). `terms`: query words as typed (tokenized and stemmed here; each
    /// must give exactly one index term, else ValueError: run the query on FTS5).
    /// A repeated term counts once per occurrence, as in FTS5. `allowed`: sorted int64
    /// memory ids the result is restricted to; the statistics stay those of all docs of
    /// `projects`. `projects`: the names of the projects searched (None: all); only their
    /// documents are returned, ranked with their documents' N, avgdl and df alone.
    #[pyo3(signature = (terms, k, require_all = false, allowed = None, projects = None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        terms: &Bound<'py, PyAny>,
        k: i64,
        require_all: bool,
        allowed: Option<&Bound<'py, PyAny>>,
        projects: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Pair<'py>> {
        if k <= 0 {
            return Err(Error::Invalid(format!("k must be >= 1, got {k}")).into());
        }
        let k = usize::try_from(k).unwrap_or(usize::MAX);
        let words = str_list(terms, "terms")?;
        if words.is_empty() {
            return Err(
                Error::Invalid("terms is empty; pass at least one query word".into()).into(),
            );
        }
        let allowed = allowed.map(|a| i64_array(a, "allowed")).transpose()?;
        let names = projects.map(|p| str_list(p, "projects")).transpose()?;
        if let Some(a) = &allowed {
            if let Some(i) = a.windows(2).position(|w| w[0] > w[1]) {
                return Err(Error::Invalid(format!(
                    "allowed must be sorted ascending (allowed[{i}] = {} > allowed[{}] = {}); use np.unique(allowed)",
                    a[i],
                    i + 1,
                    a[i + 1]
                ))
                .into());
            }
        }
        let phrases = query_terms_of(&words).map_err(|(i, n)| {
            Error::Invalid(format!(
                "query word {:?} gives {n} index terms, not one; FTS5 reads it as {}: run this query on FTS5",
                words[i],
                if n == 0 { "nothing" } else { "a phrase" }
            ))
        })?;
        let hits = py.detach(|| {
            let refs: Vec<&[u8]> = phrases.iter().map(Vec::as_slice).collect();
            self.read(|ix| {
                let scope = scope_of(ix, names.as_deref());
                ix.search(&refs, k, require_all, allowed.as_deref(), scope.as_ref())
            })
        })?;
        let ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
        let scores: Vec<f64> = hits.iter().map(|h| h.score).collect();
        Ok((PyArray1::from_vec(py, ids), PyArray1::from_vec(py, scores)))
    }

    /// Keep the ranking columns of memories: `rows` a list of (memory id, columns or
    /// None for a deleted or missing memory); see `RowArg` for the columns' order.
    fn keep_ranks(&self, rows: Vec<(i64, RowArg)>) -> PyResult<()> {
        Ok(self.ranks_write(|g| {
            for (id, cols) in rows {
                let row = cols.map(
                    |(created, confidence, salience, sector, dated, superseded, project, ok)| {
                        RankRow {
                            created,
                            confidence,
                            salience,
                            sector,
                            dated,
                            superseded,
                            project,
                            ok,
                        }
                    },
                );
                g.insert(id, row);
            }
        })?)
    }

    /// Forget the kept columns of `ids` (they changed), or of every memory (None).
    #[pyo3(signature = (ids = None))]
    fn drop_ranks(&self, ids: Option<Vec<i64>>) -> PyResult<()> {
        Ok(self.ranks_write(|g| match ids {
            Some(ids) => {
                for i in ids {
                    g.remove(&i);
                }
            }
            None => g.clear(),
        })?)
    }

    /// The ranked page of a keyword-only search (keyword._latin's plain tiers and
    /// pipeline._rank, in Rust): the top `pool` memories holding every one of `terms`
    /// (then, with `then_any`, when none is admitted, any of them) that the kept columns
    /// admit (not superseded unless `include_superseded`, in `wall` when given),
    /// restricted to `allowed` (sorted ids) when given, else fetched `prefilter` times
    /// deeper while filters leave the pool short; calibrated against `bound` with
    /// `slope` (hits.keyword_score of BM25 / `bound`), boosted with `weights` (see
    /// `Weights`) and the `sectors`' weights, held to the threshold and the minimum
    /// confidence, ordered by score then id (reversed when ascending). Without `weights`
    /// (a hybrid search's keyword leg, which the fusion ranks) nothing is ranked.
    ///
    /// Returns (missing, all_terms, hits, raw, calibrated, ids, scores, bm25, hidden,
    /// damaged): `missing` the hits whose columns are not kept (keep them and ask
    /// again: the search that found them is kept for that call, not run again; the rest
    /// is empty then), `all_terms` whether the AND answered, `hits` the admitted hits'
    /// ids in BM25 order with their BM25 (`raw`) and calibrated keyword score,
    /// `ids`/`scores`/`bm25` the ranked memories (`bm25`: the calibrated keyword score),
    /// `hidden` how many missed a floor, `damaged` whether an admitted hit's columns
    /// failed validation (rank in Python, which names it). None when the filters reject
    /// so many hits that FTS5 should answer (deeper than `max_fetch`).
    #[pyo3(signature = (terms, pool, then_any, bound, slope, weights = None, sectors = None,
        allowed = None, projects = None, wall = None, include_superseded = false,
        prefilter = 4, max_fetch = 8192))]
    #[allow(clippy::too_many_arguments)]
    fn rank_page(
        &self,
        py: Python<'_>,
        terms: &Bound<'_, PyAny>,
        pool: usize,
        then_any: bool,
        bound: f64,
        slope: f64,
        weights: Option<Weights>,
        sectors: Option<HashMap<String, f64>>,
        allowed: Option<&Bound<'_, PyAny>>,
        projects: Option<&Bound<'_, PyAny>>,
        wall: Option<Vec<String>>,
        include_superseded: bool,
        prefilter: usize,
        max_fetch: usize,
    ) -> PyResult<Option<PageOut>> {
        if pool == 0 || prefilter < 2 {
            return Err(Error::Invalid(format!(
                "pool must be >= 1 and prefilter >= 2, got {pool} and {prefilter}"
            ))
            .into());
        }
        let words = str_list(terms, "terms")?;
        let phrases = query_terms_of(&words).map_err(|(i, n)| {
            Error::Invalid(format!(
                "query word {:?} gives {n} index terms, not one: run this query on FTS5",
                words[i]
            ))
        })?;
        let allowed = allowed.map(|a| i64_array(a, "allowed")).transpose()?;
        let names = projects.map(|p| str_list(p, "projects")).transpose()?;
        let params = weights.map(
            |(
                now,
                day,
                ln2,
                recency_weight,
                half_life_days,
                decay_floor,
                salience_weight,
                superseded_factor,
                min_confidence,
                threshold,
                ascending,
            )| Params {
                now,
                day,
                ln2,
                slope,
                bound,
                recency_weight,
                half_life_days,
                decay_floor,
                salience_weight,
                superseded_factor,
                min_confidence,
                threshold,
                sectors: sectors.unwrap_or_default(),
                ascending,
            },
        );
        let admit = Admit {
            include_superseded,
            projects: wall.as_deref(),
        };
        let out = py.detach(|| -> Result<Option<(bool, Admitted, Option<rank::Page>)>> {
            let refs: Vec<&[u8]> = phrases.iter().map(Vec::as_slice).collect();
            let tier = |require_all: bool| -> Result<Option<Admitted>> {
                // the search, unless the last call stopped at its missing columns
                // (the admitted hits, how many the search found)
                let admitted = |k: usize, allowed: Option<&[i64]>| -> Result<(Admitted, usize)> {
                    let kept =
                        self.take_pending(&phrases, k, require_all, allowed, names.as_deref())?;
                    let (hits, generation) = match kept {
                        Some(hits) => (hits, None),
                        None => self.read(|ix| {
                            let scope = scope_of(ix, names.as_deref());
                            let hits = ix.search(&refs, k, require_all, allowed, scope.as_ref());
                            (hits, Some(self.generation.load(Ordering::Acquire)))
                        })?,
                    };
                    let fetched = hits.len();
                    let found = match (self.admitted(hits, &admit)?, generation) {
                        (Admitted::Missing(ids, hits), Some(generation)) => {
                            self.keep_pending(Tier {
                                generation,
                                phrases: phrases.clone(),
                                k,
                                require_all,
                                allowed: allowed.map(<[i64]>::to_vec),
                                projects: names.clone(),
                                hits,
                            })?;
                            Admitted::Missing(ids, Vec::new())
                        }
                        (found, _) => found,
                    };
                    Ok((found, fetched))
                };
                if let Some(a) = allowed.as_deref() {
                    if a.is_empty() {
                        return Ok(Some(Admitted::Hits(Vec::new())));
                    }
                    return admitted(pool, Some(a)).map(|(found, _)| Some(found));
                }
                // keyword._native: the pool, then deeper while the filters leave it short
                let mut fetch = pool;
                while fetch <= max_fetch {
                    match admitted(fetch, None)? {
                        (Admitted::Hits(mut kept), fetched) => {
                            if kept.len() >= pool || fetched < fetch {
                                kept.truncate(pool);
                                return Ok(Some(Admitted::Hits(kept)));
                            }
                        }
                        (missing, _) => return Ok(Some(missing)),
                    }
                    fetch = fetch.saturating_mul(prefilter);
                }
                Ok(None)
            };
            let found = match tier(true)? {
                Some(Admitted::Hits(h)) if h.is_empty() && then_any => {
                    tier(false)?.map(|a| (false, a))
                }
                other => other.map(|a| (true, a)),
            };
            Ok(match found {
                Some((all, Admitted::Hits(hits))) => {
                    let page = match &params {
                        Some(p) => self.ranked(&hits, p)?,
                        None => None,
                    };
                    Some((all, Admitted::Hits(hits), page))
                }
                Some((all, missing)) => Some((all, missing, None)),
                None => None,
            })
        })?;
        Ok(out.map(|(all_terms, admitted, page)| match admitted {
            Admitted::Missing(ids, _) => (
                ids,
                all_terms,
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                0,
                false,
            ),
            Admitted::Hits(hits) => {
                let ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
                // the hits' BM25 and calibrated scores: for the unranked call (a hybrid
                // leg); a page's scores are its ranked rows'
                let (raw, calibrated): (Vec<f64>, Vec<f64>) = if params.is_none() {
                    hits.iter()
                        .map(|h| (h.score, rank::keyword_score(h.score, bound, slope)))
                        .unzip()
                } else {
                    (Vec::new(), Vec::new())
                };
                // no page where one was asked for: an admitted row failed validation
                let damaged = page.is_none() && params.is_some();
                let page = page.unwrap_or_default();
                (
                    Vec::new(),
                    all_terms,
                    ids,
                    raw,
                    calibrated,
                    page.ranked.iter().map(|r| r.id).collect(),
                    page.ranked.iter().map(|r| r.score).collect(),
                    page.ranked.iter().map(|r| r.base).collect(),
                    page.hidden,
                    damaged,
                )
            }
        }))
    }

    fn __repr__(&self) -> String {
        self.read(|ix| {
            format!(
                "KeywordIndex(docs={}, terms={}, tokens={})",
                ix.len(),
                ix.vocabulary(),
                ix.total_tokens()
            )
        })
        .unwrap_or_else(|_| "KeywordIndex(poisoned)".to_owned())
    }
}
