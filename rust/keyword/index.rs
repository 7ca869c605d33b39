//! The in-memory inverted index: BM25 exactly as FTS5's `bm25()` computes it.
//!
//! Documents get dense internal numbers in the order they are added; a replaced or
//! removed document keeps its number, marked dead, until [`Index::compact`] renumbers
//! the live ones (lazily, once dead postings outweigh live ones). Postings of a term
//! are therefore always sorted by document number. Each document keeps the ids of its
//! distinct terms, so removal keeps every `df`, the live count and the token total
//! exact, as FTS5's are.
//!
//! Scores are bit-identical to FTS5's: the same f64 expression, evaluated in the same
//! order, phrase by phrase in query order (a repeated phrase counts again, as in FTS5).
//!
//! Each document belongs to one project, and the index keeps per project its live
//! documents, their tokens and each term's document frequency. A search scoped to a set
//! of projects takes N, avgdl and df from those projects alone (summed at query time), so
//! what other projects hold never changes its ranking: the scores are those FTS5 would
//! give over a table of the scoped projects' documents only.
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

use super::tokenize::{stem, Tokenizer, MAX_TERM_BYTES};

#[path = "persist.rs"]
mod persist;

/// BM25 parameters of FTS5's built-in `bm25()`.
pub const K1: f64 = 1.2;
pub const B: f64 = 0.75;

/// Below this many bytes of text an `add` tokenizes on the calling thread only.
const PARALLEL_MIN_BYTES: usize = 256 * 1024;

/// FxHash (rustc's hasher) with a final mix: fast on short keys; the keys are words
/// and memory ids of a local store, not adversarial input.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b));
        }
        self.add(bytes.len() as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        let h = self.0;
        (h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (h >> 32)
    }
}

pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// The postings of one term: document numbers (ascending) and term frequencies.
#[derive(Default)]
struct Postings {
    docs: Vec<u32>,
    tfs: Vec<u32>,
    /// Live documents holding the term.
    df: u32,
    /// (project, live documents of that project holding the term), sorted by project;
    /// entries at 0 stay until compaction.
    by_project: Vec<(u32, u32)>,
}

impl Postings {
    fn project_df_add(&mut self, project: u32, delta: i64) {
        match self.by_project.binary_search_by_key(&project, |e| e.0) {
            Ok(i) => {
                let v = &mut self.by_project[i].1;
                *v = u32::try_from(i64::from(*v) + delta).unwrap_or(0);
            }
            Err(i) => {
                if delta > 0 {
                    self.by_project
                        .insert(i, (project, u32::try_from(delta).unwrap_or(u32::MAX)));
                }
            }
        }
    }
    fn project_df(&self, project: u32) -> u32 {
        self.by_project
            .binary_search_by_key(&project, |e| e.0)
            .map_or(0, |i| self.by_project[i].1)
    }
}

/// The project of documents added without one (a project name never holds NUL).
pub const NO_PROJECT: &str = "\0";

/// A set of projects a search is scoped to (by internal project number).
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// Project numbers, sorted, without repeats.
    ids: Vec<u32>,
    /// Indexed by project number: whether it is in the scope.
    mask: Vec<bool>,
}

impl Scope {
    #[inline]
    fn holds(&self, project: u32) -> bool {
        self.mask.get(project as usize).copied().unwrap_or(false)
    }
}

/// A chunk of documents, tokenized on one thread: terms are numbered in the chunk
/// (hashing every token happens here, in parallel), so that the sequential part looks
/// each distinct term of the chunk up once.
#[derive(Default)]
struct Tokenized {
    /// The chunk's distinct terms, by local id.
    terms: Vec<Box<[u8]>>,
    /// (local term id, tf) of each document, documents one after the other.
    postings: Vec<(u32, u32)>,
    /// per document: (end in `postings`, token count)
    docs: Vec<(usize, u64)>,
    /// The chunk's distinct surface words: (word, documents holding it, local term id of
    /// its index term).
    words: Vec<(Box<[u8]>, u32, u32)>,
}

fn tokenize_docs(texts: &[&str]) -> Tokenized {
    let mut out = Tokenized::default();
    let mut local: FxMap<Box<[u8]>, u32> = FxMap::default();
    // Keyed by surface word (one hash per token): each distinct word of the chunk is
    // stemmed once, where stemming every token cost more than the second look-up saves.
    // surface word (whole) -> its slot in `out.words`; per slot, the last document counted
    let mut surface: FxMap<Box<[u8]>, u32> = FxMap::default();
    let mut last_doc: Vec<u32> = Vec::new();
    let mut tok = Tokenizer::new();
    let mut stemmed: Vec<u8> = Vec::new();
    let mut ids: Vec<u32> = Vec::new();
    for (doc, text) in texts.iter().enumerate() {
        let doc = doc as u32;
        ids.clear();
        tok.for_each_raw(text, |w| {
            let slot = match surface.get(w) {
                Some(&slot) => slot as usize,
                None => {
                    stem(w, &mut stemmed);
                    let id = match local.get(&stemmed[..]) {
                        Some(&id) => id,
                        None => {
                            let id = out.terms.len() as u32;
                            out.terms.push(stemmed[..].into());
                            local.insert(stemmed[..].into(), id);
                            id
                        }
                    };
                    let slot = out.words.len();
                    surface.insert(w.into(), slot as u32);
                    out.words
                        .push((w[..w.len().min(MAX_TERM_BYTES)].into(), 0, id));
                    last_doc.push(u32::MAX);
                    slot
                }
            };
            if last_doc[slot] != doc {
                last_doc[slot] = doc;
                out.words[slot].1 += 1;
            }
            ids.push(out.words[slot].2);
        });
        let count = ids.len() as u64;
        ids.sort_unstable();
        let mut i = 0;
        while i < ids.len() {
            let mut j = i + 1;
            while j < ids.len() && ids[j] == ids[i] {
                j += 1;
            }
            out.postings.push((ids[i], (j - i) as u32));
            i = j;
        }
        out.docs.push((out.postings.len(), count));
    }
    out
}

/// A hit: memory id and BM25 score (positive, higher is better; FTS5 returns -score).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub id: i64,
    pub score: f64,
}

/// Best first: higher score, then lower memory id (FTS5's `ORDER BY bm25, rowid`).
fn better(a: &Hit, b: &Hit) -> Ordering {
    b.score
        .partial_cmp(&a.score)
        .unwrap_or(Ordering::Equal)
        .then(a.id.cmp(&b.id))
}

/// Keeps the best `k` hits seen.
struct TopK {
    k: usize,
    heap: std::collections::BinaryHeap<Worst>,
}

/// Heap order: the worst hit on top.
struct Worst(Hit);
impl PartialEq for Worst {
    fn eq(&self, o: &Self) -> bool {
        better(&self.0, &o.0) == Ordering::Equal
    }
}
impl Eq for Worst {}
impl PartialOrd for Worst {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Worst {
    fn cmp(&self, o: &Self) -> Ordering {
        better(&self.0, &o.0)
    }
}

impl TopK {
    fn new(k: usize) -> Self {
        TopK {
            k,
            heap: std::collections::BinaryHeap::with_capacity(k.min(1 << 16) + 1),
        }
    }
    #[inline]
    fn push(&mut self, h: Hit) {
        if self.heap.len() < self.k {
            self.heap.push(Worst(h));
        } else if let Some(mut top) = self.heap.peek_mut() {
            if better(&h, &top.0) == Ordering::Less {
                *top = Worst(h);
            }
        }
    }
    fn into_sorted(self) -> Vec<Hit> {
        let mut v: Vec<Hit> = self.heap.into_iter().map(|w| w.0).collect();
        v.sort_by(better);
        v
    }
}

/// BM25 statistics of one query: per phrase (in query order) the term id, if the term
/// is indexed, and its idf.
struct Stats<'a> {
    phrases: Vec<(Option<u32>, f64)>,
    avgdl: f64,
    /// The projects searched (None: all).
    scope: Option<&'a Scope>,
}

/// The in-memory inverted index.
#[derive(Default)]
pub struct Index {
    dict: FxMap<Box<[u8]>, u32>,
    terms: Vec<Postings>,
    /// per document number: memory id, token count, live, start of its terms in `fwd`
    ids: Vec<i64>,
    lens: Vec<u32>,
    live: Vec<bool>,
    fwd_start: Vec<usize>,
    fwd: Vec<u32>,
    /// `fwd` and `fwd_start` are empty until `ensure_fwd` (an index loaded from bytes).
    fwd_pending: bool,
    by_id: FxMap<i64, u32>,
    /// per document number: its project number
    proj: Vec<u32>,
    /// project name -> project number; per project number: live documents, their tokens
    projects: FxMap<Box<str>, u32>,
    project_docs: Vec<u64>,
    project_tokens: Vec<u64>,
    n_live: usize,
    total_tokens: u64,
    /// Postings that belong to dead documents (dropped by `compact`).
    dead_postings: usize,
    /// Score accumulators for searches, reused (zeroed after each use).
    scratch: Mutex<Vec<Vec<f64>>>,
    /// The surface words (before stemming) of every document ever added, sorted: word ->
    /// (documents added that held it, its index term). The count is not lowered when a
    /// document is removed or replaced (that would take each document's surface words,
    /// as much memory again as `fwd`): [`Index::words_starting`] caps it by its index
    /// term's live count, so it is an upper bound, exact while nothing was removed.
    words: BTreeMap<Box<[u8]>, (u32, u32)>,
}

impl Index {
    pub fn new() -> Self {
        let mut ix = Self::default();
        ix.fwd_start.push(0);
        ix
    }

    /// Live documents.
    pub fn len(&self) -> usize {
        self.n_live
    }
    pub fn is_empty(&self) -> bool {
        self.n_live == 0
    }
    pub fn contains(&self, id: i64) -> bool {
        self.by_id.contains_key(&id)
    }
    /// Tokens of all live documents.
    pub fn total_tokens(&self) -> u64 {
        self.total_tokens
    }
    /// Live documents holding `term` (an index term, already stemmed).
    pub fn df(&self, term: &[u8]) -> u32 {
        self.dict
            .get(term)
            .map_or(0, |&t| self.terms[t as usize].df)
    }
    /// For each of `terms` (index terms), whether one of the live documents `ids` (memory
    /// ids; unknown ones are left out) holds it: a binary search of the term's postings
    /// per document, no scoring.
    pub fn holding(&self, terms: &[&[u8]], ids: &[i64]) -> Vec<bool> {
        let docs: Vec<u32> = ids
            .iter()
            .filter_map(|id| self.by_id.get(id).copied())
            .filter(|&d| self.live.get(d as usize).copied().unwrap_or(false))
            .collect();
        terms
            .iter()
            .map(|term| {
                self.dict.get(*term).is_some_and(|&t| {
                    let postings = &self.terms[t as usize].docs;
                    docs.iter().any(|d| postings.binary_search(d).is_ok())
                })
            })
            .collect()
    }

    /// The scope of the projects `names` (names never added are left out: they hold
    /// nothing).
    pub fn scope(&self, names: &[&str]) -> Scope {
        let mut ids: Vec<u32> = names
            .iter()
            .filter_map(|n| self.projects.get(*n).copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let mut mask = vec![false; self.project_docs.len()];
        for &p in &ids {
            mask[p as usize] = true;
        }
        Scope { ids, mask }
    }

    /// Live documents and their tokens in `scope` (every project when None).
    pub fn totals(&self, scope: Option<&Scope>) -> (u64, u64) {
        match scope {
            None => (self.n_live as u64, self.total_tokens),
            Some(s) => s.ids.iter().fold((0, 0), |(d, t), &p| {
                (
                    d + self.project_docs[p as usize],
                    t + self.project_tokens[p as usize],
                )
            }),
        }
    }

    /// Live documents of `scope` (every project when None) holding `term`.
    pub fn df_in(&self, term: &[u8], scope: Option<&Scope>) -> u64 {
        let Some(&t) = self.dict.get(term) else {
            return 0;
        };
        let p = &self.terms[t as usize];
        match scope {
            None => u64::from(p.df),
            Some(s) => s.ids.iter().map(|&j| u64::from(p.project_df(j))).sum(),
        }
    }

    /// Distinct terms ever indexed (terms of removed documents stay until compaction).
    pub fn vocabulary(&self) -> usize {
        self.dict.len()
    }

    /// The surface words (see [`Tokenizer::for_each_word`]) that start with `prefix`, in
    /// byte order, each with how many documents hold it: at most its index term's live
    /// documents, so a word whose every document was removed is left out (when its index
    /// term went with it), and its count is exact while no document was removed or
    /// replaced, an upper bound after (good to order candidates, not to report).
    pub fn words_starting(&self, prefix: &[u8]) -> Vec<(&[u8], u32)> {
        self.words
            .range::<[u8], _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(w, _)| w.starts_with(prefix))
            .filter_map(|(w, &(n, term))| {
                let live = self.terms[term as usize].df;
                (live > 0).then_some((&w[..], n.min(live)))
            })
            .collect()
    }

    /// The surface words that start with `prefix` (as [`Index::words_starting`], with its
    /// counts) within `limit` edits of `word` (optimal string alignment distance over
    /// code points: a substitution, insertion, deletion or swap of adjacent characters
    /// costs 1), `word` itself left out: (word, documents, distance). A word cut inside
    /// a UTF-8 sequence (over [`super::tokenize::MAX_TERM_BYTES`]) is never near.
    pub fn words_near(&self, prefix: &[u8], word: &str, limit: usize) -> Vec<(&[u8], u32, u8)> {
        let q: Vec<char> = word.chars().collect();
        let mut t: Vec<char> = Vec::new();
        let mut rows: [Vec<usize>; 3] = Default::default();
        self.words_starting(prefix)
            .into_iter()
            .filter_map(|(w, n)| {
                let s = std::str::from_utf8(w).ok()?;
                if s == word {
                    return None;
                }
                t.clear();
                t.extend(s.chars());
                let d = osa_distance(&q, &t, limit, &mut rows);
                (d <= limit).then_some((w, n, d as u8))
            })
            .collect()
    }

    /// Distinct surface words ever indexed.
    pub fn surface_words(&self) -> usize {
        self.words.len()
    }

    /// Approximate heap use in bytes.
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        let dict = self.dict.capacity() * (size_of::<Box<[u8]>>() + size_of::<u32>() + 1)
            + self.dict.keys().map(|k| k.len()).sum::<usize>();
        let postings: usize = self
            .terms
            .iter()
            .map(|p| p.docs.capacity() * 4 + p.tfs.capacity() * 4 + p.by_project.capacity() * 8)
            .sum::<usize>()
            + self.terms.capacity() * size_of::<Postings>();
        let docs = self.ids.capacity() * 8
            + self.lens.capacity() * 4
            + self.live.capacity()
            + self.fwd_start.capacity() * 8
            + self.fwd.capacity() * 4
            + self.proj.capacity() * 4
            + self.by_id.capacity() * (8 + 4 + 1);
        let scratch = self
            .scratch
            .lock()
            .map_or(0, |s| s.iter().map(|v| v.capacity() * 8).sum());
        // a B-tree entry: the boxed key, its bytes, the value, about a third of a node spare
        let words = self.words.len() * (size_of::<Box<[u8]>>() + 8) * 4 / 3
            + self.words.keys().map(|k| k.len()).sum::<usize>();
        dict + postings + docs + scratch + words
    }

    /// Insert documents without a project (see [`Index::add_in`]).
    pub fn add(&mut self, ids: &[i64], texts: &[&str], threads: usize) {
        self.add_in(ids, texts, None, threads);
    }

    fn project_id(&mut self, name: &str) -> u32 {
        if let Some(&p) = self.projects.get(name) {
            return p;
        }
        let p = self.project_docs.len() as u32;
        self.projects.insert(name.into(), p);
        self.project_docs.push(0);
        self.project_tokens.push(0);
        p
    }

    /// Insert documents, each in its project (`projects`: one name per document, or None
    /// for [`NO_PROJECT`]); an id already present is replaced (its project too), and of
    /// an id given twice the last text wins. Tokenizes on `threads` threads (at most 2
    /// pay off; the interning into the dictionary is sequential).
    pub fn add_in(
        &mut self,
        ids: &[i64],
        texts: &[&str],
        projects: Option<&[&str]>,
        threads: usize,
    ) {
        debug_assert_eq!(ids.len(), texts.len());
        self.ensure_fwd();
        let proj_ids: Vec<u32> = match projects {
            Some(names) => {
                debug_assert_eq!(names.len(), ids.len());
                names.iter().map(|n| self.project_id(n)).collect()
            }
            None => {
                let p = self.project_id(NO_PROJECT);
                vec![p; ids.len()]
            }
        };
        let bytes: usize = texts.iter().map(|t| t.len()).sum();
        let threads = if bytes < PARALLEL_MIN_BYTES {
            1
        } else {
            threads.clamp(1, 8)
        };
        let parts: Vec<Tokenized> = if threads == 1 {
            vec![tokenize_docs(texts)]
        } else {
            // Split by bytes so that each thread gets about the same work.
            let per = bytes.div_ceil(threads);
            let mut bounds = vec![0usize];
            let mut acc = 0;
            for (i, t) in texts.iter().enumerate() {
                acc += t.len();
                if acc >= per * bounds.len() && bounds.len() < threads {
                    bounds.push(i + 1);
                }
            }
            bounds.push(texts.len());
            bounds.dedup();
            std::thread::scope(|s| {
                let handles: Vec<_> = bounds
                    .windows(2)
                    .map(|w| {
                        let chunk = &texts[w[0]..w[1]];
                        s.spawn(move || tokenize_docs(chunk))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_default())
                    .collect()
            })
        };
        let mut next = 0usize;
        for part in &parts {
            let global: Vec<u32> = part.terms.iter().map(|t| self.term_id(t)).collect();
            for (word, n, local) in &part.words {
                let term = global[*local as usize];
                match self.words.get_mut(word) {
                    Some(e) => e.0 = e.0.saturating_add(*n),
                    None => {
                        self.words.insert(word.clone(), (*n, term));
                    }
                }
            }
            let mut p0 = 0usize;
            for &(p1, count) in &part.docs {
                self.insert(
                    ids[next],
                    proj_ids[next],
                    count,
                    &global,
                    &part.postings[p0..p1],
                );
                next += 1;
                p0 = p1;
            }
        }
        self.ensure_scratch_len();
    }

    fn term_id(&mut self, term: &[u8]) -> u32 {
        if let Some(&t) = self.dict.get(term) {
            return t;
        }
        let t = self.terms.len() as u32;
        self.dict.insert(term.into(), t);
        self.terms.push(Postings::default());
        t
    }

    /// Insert one document; `postings`: (local term id, tf), `global` maps local ids.
    fn insert(
        &mut self,
        id: i64,
        project: u32,
        count: u64,
        global: &[u32],
        postings: &[(u32, u32)],
    ) {
        self.remove_one(id);
        let doc = self.ids.len() as u32;
        self.ids.push(id);
        self.proj.push(project);
        self.lens.push(u32::try_from(count).unwrap_or(u32::MAX));
        self.live.push(true);
        for &(local, tf) in postings {
            let tid = global[local as usize];
            let p = &mut self.terms[tid as usize];
            p.docs.push(doc);
            p.tfs.push(tf);
            p.df += 1;
            p.project_df_add(project, 1);
            self.fwd.push(tid);
        }
        self.fwd_start.push(self.fwd.len());
        self.by_id.insert(id, doc);
        self.n_live += 1;
        self.total_tokens += count;
        self.project_docs[project as usize] += 1;
        self.project_tokens[project as usize] +=
            u64::from(u32::try_from(count).unwrap_or(u32::MAX));
    }

    fn remove_one(&mut self, id: i64) -> bool {
        let Some(doc) = self.by_id.remove(&id) else {
            return false;
        };
        let d = doc as usize;
        self.live[d] = false;
        self.n_live -= 1;
        self.total_tokens -= u64::from(self.lens[d]);
        let project = self.proj[d];
        self.project_docs[project as usize] -= 1;
        self.project_tokens[project as usize] -= u64::from(self.lens[d]);
        let (a, b) = (self.fwd_start[d], self.fwd_start[d + 1]);
        for &t in &self.fwd[a..b] {
            let p = &mut self.terms[t as usize];
            p.df -= 1;
            p.project_df_add(project, -1);
        }
        self.dead_postings += b - a;
        true
    }

    /// Remove documents; returns how many were live. Unknown ids are ignored.
    pub fn remove(&mut self, ids: &[i64]) -> usize {
        self.ensure_fwd();
        let n = ids.iter().filter(|&&id| self.remove_one(id)).count();
        self.maybe_compact();
        n
    }

    fn maybe_compact(&mut self) {
        let live_postings = self.fwd.len() - self.dead_postings;
        if self.dead_postings > 4096 && self.dead_postings > live_postings {
            self.compact();
        }
    }

    /// Drop dead documents and their postings, renumbering the live documents in order.
    pub fn compact(&mut self) {
        self.ensure_fwd();
        let n = self.ids.len();
        let mut map = vec![u32::MAX; n];
        let mut m = 0u32;
        for (slot, &live) in map.iter_mut().zip(&self.live) {
            if live {
                *slot = m;
                m += 1;
            }
        }
        for p in &mut self.terms {
            let mut w = 0;
            for r in 0..p.docs.len() {
                let nd = map[p.docs[r] as usize];
                if nd != u32::MAX {
                    p.docs[w] = nd;
                    p.tfs[w] = p.tfs[r];
                    w += 1;
                }
            }
            p.docs.truncate(w);
            p.tfs.truncate(w);
            p.docs.shrink_to_fit();
            p.tfs.shrink_to_fit();
            p.by_project.retain(|e| e.1 > 0);
            p.by_project.shrink_to_fit();
        }
        let mut ids = Vec::with_capacity(m as usize);
        let mut lens = Vec::with_capacity(m as usize);
        let mut proj = Vec::with_capacity(m as usize);
        let mut fwd_start = Vec::with_capacity(m as usize + 1);
        let mut fwd = Vec::with_capacity(self.fwd.len() - self.dead_postings);
        fwd_start.push(0);
        for d in 0..n {
            if self.live[d] {
                ids.push(self.ids[d]);
                lens.push(self.lens[d]);
                proj.push(self.proj[d]);
                fwd.extend_from_slice(&self.fwd[self.fwd_start[d]..self.fwd_start[d + 1]]);
                fwd_start.push(fwd.len());
            }
        }
        for (d, &id) in ids.iter().enumerate() {
            self.by_id.insert(id, d as u32);
        }
        self.ids = ids;
        self.lens = lens;
        self.proj = proj;
        self.live = vec![true; m as usize];
        self.fwd_start = fwd_start;
        self.fwd = fwd;
        self.dead_postings = 0;
        if let Ok(mut s) = self.scratch.lock() {
            s.clear();
        }
    }

    fn ensure_scratch_len(&mut self) {
        let n = self.ids.len();
        if let Ok(s) = self.scratch.get_mut() {
            for v in s.iter_mut() {
                v.resize(n, 0.0);
            }
        }
    }

    /// idf per phrase and avgdl, as FTS5's bm25() computes them over the documents of
    /// `scope` (every document when None).
    fn stats<'a>(&self, phrases: &[&[u8]], scope: Option<&'a Scope>) -> Stats<'a> {
        let (docs, tokens) = self.totals(scope);
        let n_row = i64::try_from(docs).unwrap_or(i64::MAX);
        let avgdl = tokens as f64 / n_row as f64;
        let phrases = phrases
            .iter()
            .map(|t| {
                let tid = self.dict.get(*t).copied();
                let n_hit = i64::try_from(self.df_in(t, scope)).unwrap_or(i64::MAX);
                let mut idf = (((n_row - n_hit) as f64 + 0.5) / (n_hit as f64 + 0.5)).ln();
                if idf <= 0.0 {
                    idf = 1e-6;
                }
                (tid.filter(|_| n_hit > 0), idf)
            })
            .collect();
        Stats {
            phrases,
            avgdl,
            scope,
        }
    }

    /// BM25 contribution of one phrase with frequency `tf` in a document of `dl` tokens
    /// (the expression of FTS5's fts5Bm25Function, term for term).
    #[inline]
    fn term_score(idf: f64, tf: f64, dl: f64, avgdl: f64) -> f64 {
        idf * ((tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * dl / avgdl)))
    }

    /// Top `k` live documents holding any phrase (`require_all`: every phrase), best
    /// first, ties to the lower memory id. `phrases`: index terms in query order.
    /// `allowed`: memory ids, sorted ascending, the result is restricted to; the BM25
    /// statistics stay those of every live document of `scope`.
    /// `scope`: the projects searched (None: all); only their documents are returned,
    /// and N, avgdl and df are theirs alone.
    pub fn search(
        &self,
        phrases: &[&[u8]],
        k: usize,
        require_all: bool,
        allowed: Option<&[i64]>,
        scope: Option<&Scope>,
    ) -> Vec<Hit> {
        if phrases.is_empty() || k == 0 || self.totals(scope).0 == 0 {
            return Vec::new();
        }
        let st = self.stats(phrases, scope);
        if require_all && st.phrases.iter().any(|p| p.0.is_none()) {
            return Vec::new();
        }
        // Distinct terms of the query; each phrase points at one.
        let mut uniq: Vec<u32> = st.phrases.iter().filter_map(|p| p.0).collect();
        uniq.sort_unstable();
        uniq.dedup();
        if uniq.is_empty() {
            return Vec::new();
        }
        let allowed_docs: Option<Vec<u32>> = allowed.map(|a| {
            let mut v: Vec<u32> = a
                .iter()
                .filter_map(|id| self.by_id.get(id).copied())
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        });
        let postings: usize = uniq
            .iter()
            .map(|&t| self.terms[t as usize].docs.len())
            .sum();
        if require_all {
            let driver = match &allowed_docs {
                Some(a)
                    if a.len() < self.terms[uniq[0] as usize].docs.len()
                        || a.len() * 4 < postings =>
                {
                    Driver::Docs(a)
                }
                _ => Driver::Rarest,
            };
            self.search_docs(&st, &uniq, k, true, driver, allowed_docs.as_deref())
        } else {
            match &allowed_docs {
                Some(a) if a.len() * 16 < postings => {
                    self.search_docs(&st, &uniq, k, false, Driver::Docs(a), None)
                }
                _ => self.search_taat(&st, k, allowed_docs.as_deref()),
            }
        }
    }

    /// Term at a time into a dense accumulator: for OR queries.
    fn search_taat(&self, st: &Stats<'_>, k: usize, allowed: Option<&[u32]>) -> Vec<Hit> {
        let scope = st.scope;
        let n = self.ids.len();
        let mut acc = self
            .scratch
            .lock()
            .ok()
            .and_then(|mut s| s.pop())
            .filter(|v| v.len() == n)
            .unwrap_or_else(|| vec![0.0; n]);
        let mut touched: Vec<u32> = Vec::new();
        let check_live = self.dead_postings > 0;
        for &(tid, idf) in &st.phrases {
            let Some(tid) = tid else { continue };
            let p = &self.terms[tid as usize];
            for (&d, &tf) in p.docs.iter().zip(&p.tfs) {
                let du = d as usize;
                if check_live && !self.live[du] {
                    continue;
                }
                if let Some(s) = scope {
                    if !s.holds(self.proj[du]) {
                        continue;
                    }
                }
                let s = Self::term_score(idf, f64::from(tf), f64::from(self.lens[du]), st.avgdl);
                let a = &mut acc[du];
                if *a == 0.0 {
                    touched.push(d);
                }
                *a += s;
            }
        }
        let mut top = TopK::new(k);
        let mut allow = allowed.map(|a| a.iter().peekable());
        if allow.is_some() {
            touched.sort_unstable();
        }
        for &d in &touched {
            let du = d as usize;
            let s = acc[du];
            acc[du] = 0.0;
            if let Some(it) = allow.as_mut() {
                while it.next_if(|&&x| x < d).is_some() {}
                if it.peek().copied() != Some(&d) {
                    continue;
                }
            }
            top.push(Hit {
                id: self.ids[du],
                score: s,
            });
        }
        if let Ok(mut s) = self.scratch.lock() {
            if s.len() < 4 {
                s.push(acc);
            }
        }
        top.into_sorted()
    }

    /// Document at a time over the documents of `driver`, looking the terms up in each
    /// posting list with a galloping cursor: for AND queries and small `allowed` sets.
    fn search_docs(
        &self,
        st: &Stats<'_>,
        uniq: &[u32],
        k: usize,
        require_all: bool,
        driver: Driver<'_>,
        filter: Option<&[u32]>,
    ) -> Vec<Hit> {
        let scope = st.scope;
        let lists: Vec<&Postings> = uniq.iter().map(|&t| &self.terms[t as usize]).collect();
        let rarest;
        let docs: &[u32] = match driver {
            Driver::Docs(d) => d,
            Driver::Rarest => {
                rarest = lists
                    .iter()
                    .min_by_key(|p| p.docs.len())
                    .map_or(&[][..], |p| &p.docs[..]);
                rarest
            }
        };
        let mut cursors = vec![0usize; lists.len()];
        let mut tfs = vec![0u32; lists.len()];
        let mut fpos = 0usize;
        let mut top = TopK::new(k);
        'docs: for &d in docs {
            let du = d as usize;
            if !self.live[du] || scope.is_some_and(|s| !s.holds(self.proj[du])) {
                continue;
            }
            if let Some(f) = filter {
                fpos += gallop(&f[fpos..], d);
                if f.get(fpos) != Some(&d) {
                    continue;
                }
            }
            let mut any = false;
            for (j, p) in lists.iter().enumerate() {
                cursors[j] += gallop(&p.docs[cursors[j]..], d);
                let c = cursors[j];
                if p.docs.get(c) == Some(&d) {
                    tfs[j] = p.tfs[c];
                    any = true;
                } else if require_all {
                    continue 'docs;
                } else {
                    tfs[j] = 0;
                }
            }
            if !any {
                continue;
            }
            let dl = f64::from(self.lens[du]);
            let mut score = 0.0;
            for &(tid, idf) in &st.phrases {
                let Some(tid) = tid else { continue };
                let j = uniq.partition_point(|&u| u < tid);
                let tf = tfs[j];
                if tf > 0 {
                    score += Self::term_score(idf, f64::from(tf), dl, st.avgdl);
                }
            }
            top.push(Hit {
                id: self.ids[du],
                score,
            });
        }
        top.into_sorted()
    }

    /// Check the invariants (tests): df, live count and token total match the postings.
    pub fn check(&self) -> Result<(), String> {
        let live_docs = self.live.iter().filter(|&&l| l).count();
        if live_docs != self.n_live || self.by_id.len() != self.n_live {
            return Err(format!(
                "live {} vs {} vs {}",
                live_docs,
                self.n_live,
                self.by_id.len()
            ));
        }
        let tokens: u64 = (0..self.ids.len())
            .filter(|&d| self.live[d])
            .map(|d| u64::from(self.lens[d]))
            .sum();
        if tokens != self.total_tokens {
            return Err(format!("tokens {tokens} vs {}", self.total_tokens));
        }
        let np = self.project_docs.len();
        let (mut docs, mut toks) = (vec![0u64; np], vec![0u64; np]);
        for d in (0..self.ids.len()).filter(|&d| self.live[d]) {
            docs[self.proj[d] as usize] += 1;
            toks[self.proj[d] as usize] += u64::from(self.lens[d]);
        }
        if docs != self.project_docs || toks != self.project_tokens {
            return Err("per-project documents or tokens do not match".into());
        }
        for (t, p) in self.terms.iter().enumerate() {
            let df = p.docs.iter().filter(|&&d| self.live[d as usize]).count();
            if df != p.df as usize {
                return Err(format!("term {t}: df {df} vs {}", p.df));
            }
            let mut per = vec![0u32; np];
            for &d in p.docs.iter().filter(|&&d| self.live[d as usize]) {
                per[self.proj[d as usize] as usize] += 1;
            }
            for (j, &n) in per.iter().enumerate() {
                if p.project_df(j as u32) != n {
                    return Err(format!(
                        "term {t}: df in project {j} {n} vs {}",
                        p.project_df(j as u32)
                    ));
                }
            }
            if !p.docs.windows(2).all(|w| w[0] < w[1]) {
                return Err(format!("term {t}: postings not sorted"));
            }
        }
        Ok(())
    }
}

enum Driver<'a> {
    Docs(&'a [u32]),
    Rarest,
}

/// The optimal string alignment distance of `a` and `b` (adjacent swaps count 1), or
/// `limit + 1` as soon as it is known to exceed `limit` (cortex.suggest.edit_distance,
/// the same table row by row); `rows`: reused buffers.
fn osa_distance(a: &[char], b: &[char], limit: usize, rows: &mut [Vec<usize>; 3]) -> usize {
    if a.len().abs_diff(b.len()) > limit {
        return limit + 1;
    }
    let [prev2, prev, cur] = rows;
    prev2.clear();
    prev.clear();
    prev.extend(0..=b.len());
    for i in 1..=a.len() {
        cur.clear();
        cur.push(i);
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(prev2[j - 2] + 1);
            }
            cur.push(v);
        }
        if cur.iter().min().is_some_and(|&m| m > limit) {
            return limit + 1;
        }
        std::mem::swap(prev2, prev);
        std::mem::swap(prev, cur);
    }
    prev[b.len()]
}

/// The index of the first element >= `x` in sorted `v` (v.len() if none), galloping.
#[inline]
fn gallop(v: &[u32], x: u32) -> usize {
    if v.first().is_none_or(|&f| f >= x) {
        return 0;
    }
    let mut hi = 1;
    while hi < v.len() && v[hi] < x {
        hi *= 2;
    }
    let lo = hi / 2;
    let hi = hi.min(v.len());
    lo + v[lo..hi].partition_point(|&y| y < x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ix(docs: &[(i64, &str)]) -> Index {
        let mut ix = Index::new();
        let ids: Vec<i64> = docs.iter().map(|d| d.0).collect();
        let texts: Vec<&str> = docs.iter().map(|d| d.1).collect();
        ix.add(&ids, &texts, 1);
        ix
    }

    #[test]
    fn holding_says_which_terms_the_given_live_documents_hold() {
        let mut ix = Index::new();
        ix.add(&[1, 2, 3], &["alpha beta", "beta gamma", "delta"], 1);
        let (alpha, beta, delta) = (b"alpha".as_slice(), b"beta".as_slice(), b"delta".as_slice());
        assert_eq!(
            ix.holding(&[alpha, beta, delta], &[2, 9]),
            vec![false, true, false]
        );
        assert_eq!(ix.holding(&[alpha, delta], &[1, 3]), vec![true, true]);
        ix.remove(&[3]);
        ix.add(&[1], &["gamma"], 1); // replaced: its old postings are dead
        assert_eq!(
            ix.holding(&[alpha, delta, b"gamma"], &[1, 3]),
            vec![false, false, true]
        );
        assert_eq!(ix.holding(&[alpha], &[]), vec![false]);
    }

    #[test]
    fn surface_words_by_prefix_with_counts_capped_by_their_terms() {
        let mut ix = ix(&[
            (1, "Deploying the Café"),
            (2, "deploys deploying"),
            (3, "deployment day"),
            (4, "unique zebra"),
        ]);
        let got = |ix: &Index, p: &str| -> Vec<(String, u32)> {
            ix.words_starting(p.as_bytes())
                .into_iter()
                .map(|(w, n)| (String::from_utf8_lossy(w).into_owned(), n))
                .collect()
        };
        // surface words, folded but not stemmed, sorted, each with its documents
        assert_eq!(
            got(&ix, "d"),
            [
                ("day".to_string(), 1),
                ("deploying".to_string(), 2),
                ("deployment".to_string(), 1),
                ("deploys".to_string(), 1)
            ]
        );
        assert_eq!(got(&ix, "caf"), [("cafe".to_string(), 1)]);
        assert!(got(&ix, "x").is_empty());
        // a removal: "zebra" (its term gone) is left out; "deploying" keeps an upper bound
        // (2: documents 1 and 2 held it) capped by its index term's live documents
        // ("deploi", of "deploys" too: documents 2 and 5)
        ix.add(&[5], &["deploys"], 1);
        ix.remove(&[1, 4]);
        assert!(got(&ix, "z").is_empty());
        assert_eq!(got(&ix, "deploying"), [("deploying".to_string(), 2)]);
        ix.remove(&[5]);
        assert_eq!(got(&ix, "deploying"), [("deploying".to_string(), 1)]);
    }

    #[test]
    fn words_near_are_those_within_the_distance() {
        let ix = ix(&[(1, "fluorescent fluorescence flourescent florist москва")]);
        let near = |p: &str, w: &str, l: usize| -> Vec<(String, u8)> {
            ix.words_near(p.as_bytes(), w, l)
                .into_iter()
                .map(|(t, _, d)| (String::from_utf8_lossy(t).into_owned(), d))
                .collect()
        };
        let pair = |w: &str, d: u8| (w.to_string(), d);
        assert_eq!(
            near("f", "florescent", 1),
            [pair("flourescent", 1), pair("fluorescent", 1)]
        );
        assert_eq!(
            near("f", "flourescence", 2),
            [pair("flourescent", 2), pair("fluorescence", 1)]
        );
        // a swap of adjacent letters is one edit; the word itself is left out
        assert_eq!(near("f", "fluoresecnt", 1), [pair("fluorescent", 1)]);
        assert_eq!(near("f", "fluorescent", 1), [pair("flourescent", 1)]);
        // code points, not bytes: a Cyrillic letter dropped is one edit (two bytes)
        assert_eq!(near("м", "моска", 1), [pair("москва", 1)]);
        assert!(near("f", "xyzzyxyzzy", 2).is_empty());
    }

    #[test]
    fn add_replace_remove_keep_counts_exact() {
        let mut x = ix(&[(10, "apples and pears"), (20, "apple pie"), (30, "")]);
        assert_eq!(x.len(), 3);
        assert_eq!(x.total_tokens(), 5);
        assert_eq!(x.df(b"appl"), 2);
        x.add(&[20], &["pears only"], 1);
        assert_eq!(x.len(), 3);
        assert_eq!(x.df(b"appl"), 1);
        assert_eq!(x.df(b"pear"), 2);
        assert_eq!(x.total_tokens(), 5);
        assert_eq!(x.remove(&[10, 99, 10]), 1);
        assert_eq!(x.df(b"pear"), 1);
        assert!(!x.contains(10) && x.contains(30));
        x.check().unwrap();
        x.compact();
        x.check().unwrap();
        assert_eq!(x.df(b"pear"), 1);
        let hits = x.search(&[b"pear"], 10, false, None, None);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].id, 20);
    }

    #[test]
    fn duplicate_ids_in_one_add_keep_the_last() {
        let x = ix(&[(1, "red"), (1, "blue")]);
        assert_eq!(x.len(), 1);
        assert_eq!(x.df(b"red"), 0);
        assert_eq!(x.df(b"blue"), 1);
        x.check().unwrap();
    }

    #[test]
    fn or_and_and_allowed_agree_across_strategies() {
        let texts: Vec<String> = (0..3000)
            .map(|i| format!("w{} w{} common{} x", i % 7, i % 11, i % 3))
            .collect();
        let ids: Vec<i64> = (0..3000).map(|i| i * 3 + 1).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut x = Index::new();
        x.add(&ids, &refs, 2);
        x.remove(&ids[..500]);
        x.check().unwrap();
        let q: [&[u8]; 3] = [b"w3", b"w5", b"common1"];
        for require_all in [false, true] {
            let full = x.search(&q, 5000, require_all, None, None);
            let allowed: Vec<i64> = ids.iter().copied().filter(|i| i % 2 == 0).collect();
            let want: Vec<Hit> = full.iter().copied().filter(|h| h.id % 2 == 0).collect();
            // large allowed set: accumulator path; small one: document path
            assert_eq!(x.search(&q, 5000, require_all, Some(&allowed), None), want);
            let few: Vec<i64> = allowed.iter().copied().take(40).collect();
            let want_few: Vec<Hit> = full
                .iter()
                .copied()
                .filter(|h| few.contains(&h.id))
                .collect();
            assert_eq!(x.search(&q, 5000, require_all, Some(&few), None), want_few);
            let top = x.search(&q, 7, require_all, None, None);
            assert_eq!(&top[..], &full[..7]);
        }
    }

    #[test]
    fn a_scoped_search_ranks_as_if_other_projects_were_absent() {
        let a: Vec<(i64, &str)> = vec![
            (1, "quokka island"),
            (2, "island ferry"),
            (3, "quokka quokka"),
        ];
        let mut alone = Index::new();
        let ids: Vec<i64> = a.iter().map(|d| d.0).collect();
        let texts: Vec<&str> = a.iter().map(|d| d.1).collect();
        alone.add_in(&ids, &texts, Some(&["A"; 3]), 1);
        let mut mixed = Index::new();
        mixed.add_in(&ids, &texts, Some(&["A"; 3]), 1);
        let b_ids: Vec<i64> = (100..300).collect();
        let b_texts: Vec<String> = (0..200)
            .map(|i| format!("quokka number {i} and more words"))
            .collect();
        let b_refs: Vec<&str> = b_texts.iter().map(String::as_str).collect();
        mixed.add_in(&b_ids, &b_refs, Some(&vec!["B"; 200]), 1);
        mixed.remove(&[150]);
        mixed.check().unwrap();
        let sa = alone.scope(&["A"]);
        let sm = mixed.scope(&["A"]);
        assert_eq!(alone.totals(Some(&sa)), mixed.totals(Some(&sm)));
        assert_eq!(mixed.df_in(b"quokka", Some(&sm)), 2);
        assert_eq!(mixed.df_in(b"quokka", None), 201);
        for require_all in [false, true] {
            let q: [&[u8]; 2] = [b"quokka", b"island"];
            let want = alone.search(&q, 10, require_all, None, None);
            assert!(!want.is_empty());
            assert_eq!(mixed.search(&q, 10, require_all, None, Some(&sm)), want);
            assert_eq!(
                mixed.search(&q, 10, require_all, Some(&[1, 3, 150]), Some(&sm)),
                want.iter()
                    .copied()
                    .filter(|h| h.id != 2)
                    .collect::<Vec<_>>()
            );
        }
        // Moving a document to another project moves its counts.
        mixed.add_in(&[3], &["quokka quokka"], Some(&["B"]), 1);
        mixed.check().unwrap();
        assert_eq!(mixed.df_in(b"quokka", Some(&mixed.scope(&["A"]))), 1);
        assert!(mixed
            .search(&[b"quokka"], 10, false, None, Some(&mixed.scope(&["C"])))
            .is_empty());
        mixed.compact();
        mixed.check().unwrap();
    }

    mod scoped {
        use super::*;
        use proptest::prelude::*;

        const WORDS: [&str; 6] = ["quokka", "island", "ferry", "noon", "sand", "boat"];

        fn text(words: &[usize]) -> String {
            words
                .iter()
                .map(|&w| WORDS[w])
                .collect::<Vec<_>>()
                .join(" ")
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
            /// A search scoped to project 0 equals the search of an index holding only
            /// project 0's documents, whatever the other projects hold and however
            /// documents were replaced, moved and removed on the way.
            #[test]
            fn scoped_equals_alone(
                docs in proptest::collection::vec(
                    (0u8..3, proptest::collection::vec(0usize..6, 0..6)), 1..40),
                moves in proptest::collection::vec((0usize..40, 0u8..3), 0..10),
                removed in proptest::collection::vec(0usize..40, 0..8),
                query in proptest::collection::vec(0usize..6, 1..4),
                require_all: bool,
            ) {
                let mut mixed = Index::new();
                let mut state: Vec<Option<(u8, String)>> = Vec::new();
                for (i, (p, words)) in docs.iter().enumerate() {
                    let t = text(words);
                    mixed.add_in(&[i as i64], &[t.as_str()], Some(&[&format!("p{p}")]), 1);
                    state.push(Some((*p, t)));
                }
                for &(i, p) in &moves {
                    if let Some(Some((q, t))) = state.get_mut(i) {
                        *q = p;
                        mixed.add_in(&[i as i64], &[t.as_str()], Some(&[&format!("p{p}")]), 1);
                    }
                }
                for &i in &removed {
                    if i < state.len() {
                        state[i] = None;
                        mixed.remove(&[i as i64]);
                    }
                }
                mixed.check().map_err(TestCaseError::fail)?;
                let mut alone = Index::new();
                for (i, d) in state.iter().enumerate() {
                    if let Some((0, t)) = d {
                        alone.add_in(&[i as i64], &[t.as_str()], Some(&["p0"]), 1);
                    }
                }
                let q: Vec<&[u8]> = query.iter().map(|&w| WORDS[w].as_bytes()).collect();
                let scope = mixed.scope(&["p0", "nowhere"]);
                let stemmed: Vec<Vec<u8>> = q
                    .iter()
                    .map(|w| crate::keyword::tokenize::terms(std::str::from_utf8(w).unwrap_or(""))
                        .pop()
                        .unwrap_or_default())
                    .collect();
                let refs: Vec<&[u8]> = stemmed.iter().map(Vec::as_slice).collect();
                let want = alone.search(&refs, 50, require_all, None, None);
                prop_assert_eq!(mixed.search(&refs, 50, require_all, None, Some(&scope)), want);
                prop_assert_eq!(mixed.totals(Some(&scope)), alone.totals(None));
            }
        }
    }

    #[test]
    fn gallop_finds_lower_bound() {
        let v = [1, 3, 5, 7, 9, 11, 13];
        for x in 0..15 {
            assert_eq!(gallop(&v, x), v.partition_point(|&y| y < x), "{x}");
        }
    }
}
