//! The keyword index as bytes: a derived file, so that a fresh process loads it instead
//! of tokenizing every memory again (issue 16, item 4).
//!
//! Layout (little-endian): magic `CXKWIX01`, a caller's tag (u64: cortex stores the
//! change-log position the index reflects), then the sections below, then a 64-bit
//! checksum of everything before it. Loading checks the checksum first, then every
//! count and every cross-reference (document numbers, term numbers, project numbers)
//! against the sizes read, so that no damaged or foreign file can make
//! a later search index out of bounds; a file that fails any check is an error, and the
//! caller rebuilds from SQLite.
use std::collections::BTreeMap;
use std::sync::Mutex;

use super::{FxMap, Index, Postings};

/// The magic of the files this version writes: version 3, checksummed in four lanes, with
/// the surface words after the terms.
const MAGIC: &[u8; 8] = b"CXKWIX03";
/// Versions 1 and 2 lack the surface words: refused, so the caller rebuilds (a load of a
/// version 2 file would leave corrections without a vocabulary).
#[cfg(test)]
const MAGIC_V2: &[u8; 8] = b"CXKWIX02";

/// The checksum of versions 2 and 3: FxHash's step (with a final mix; it detects
/// damage, it is not a defence against a crafted file) in four independent lanes over 32-byte
/// blocks (the serial step's multiply latency bound it to ~2.5 GB/s, a tenth of a
/// second of a 1M-memory file's load), the lanes then folded in, the tail
/// eight bytes at a time.
pub fn checksum4(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let n = bytes.len() as u64;
    let mut h = [
        n,
        n ^ 0x9e37_79b9_7f4a_7c15,
        n ^ 0xc2b2_ae3d_27d4_eb4f,
        n ^ 0x1656_67b1_9e37_79f9,
    ];
    let mut blocks = bytes.chunks_exact(32);
    for b in &mut blocks {
        for (l, h) in h.iter_mut().enumerate() {
            let w = u64::from_le_bytes(b[l * 8..l * 8 + 8].try_into().unwrap_or([0; 8]));
            *h = (h.rotate_left(5) ^ w).wrapping_mul(K);
        }
    }
    let mut x = n;
    for v in h {
        x = (x.rotate_left(5) ^ v).wrapping_mul(K);
    }
    let tail = blocks.remainder();
    let mut words = tail.chunks_exact(8);
    for c in &mut words {
        let w = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        x = (x.rotate_left(5) ^ w).wrapping_mul(K);
    }
    for &b in words.remainder() {
        x = (x.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
    }
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 33)
}

struct W(Vec<u8>);

impl W {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32s(&mut self, v: &[u32]) {
        self.u64(v.len() as u64);
        for &x in v {
            self.u32(x);
        }
    }
    fn u64s(&mut self, v: impl ExactSizeIterator<Item = u64>) {
        self.u64(v.len() as u64);
        for x in v {
            self.u64(x);
        }
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

struct R<'a> {
    b: &'a [u8],
    at: usize,
}

type Res<T> = Result<T, String>;

impl<'a> R<'a> {
    fn take(&mut self, n: usize) -> Res<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or("truncated")?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Res<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().map_err(|_| "truncated")?,
        ))
    }
    fn u64(&mut self) -> Res<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().map_err(|_| "truncated")?,
        ))
    }
    fn len(&mut self, width: usize) -> Res<usize> {
        let n = usize::try_from(self.u64()?).map_err(|_| "a count out of range")?;
        // Every element takes `width` bytes at least: a count the rest cannot hold is damage.
        if n.saturating_mul(width.max(1)) > self.b.len() - self.at {
            return Err("a count larger than the file".into());
        }
        Ok(n)
    }
    fn u32s(&mut self) -> Res<Vec<u32>> {
        let n = self.len(4)?;
        let raw = self.take(n * 4)?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
    fn u64s(&mut self) -> Res<Vec<u64>> {
        let n = self.len(8)?;
        let raw = self.take(n * 8)?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect())
    }
    fn bytes(&mut self) -> Res<&'a [u8]> {
        let n = self.len(1)?;
        self.take(n)
    }
}

impl Index {
    /// Each document's terms (`fwd`, `fwd_start`), rebuilt from the postings after a
    /// load, by a counting sort on the document number; writes call this first.
    pub(super) fn ensure_fwd(&mut self) {
        if !self.fwd_pending {
            return;
        }
        let n = self.ids.len();
        let mut fwd_start = vec![0usize; n + 1];
        for p in &self.terms {
            for &d in &p.docs {
                fwd_start[d as usize + 1] += 1;
            }
        }
        for d in 0..n {
            fwd_start[d + 1] += fwd_start[d];
        }
        let mut fwd = vec![0u32; fwd_start[n]];
        let mut fill = fwd_start.clone();
        for (t, p) in self.terms.iter().enumerate() {
            for &d in &p.docs {
                fwd[fill[d as usize]] = t as u32;
                fill[d as usize] += 1;
            }
        }
        self.fwd_start = fwd_start;
        self.fwd = fwd;
        self.fwd_pending = false;
    }

    /// The index as bytes (see the module's layout), with `tag` stored beside it.
    pub fn to_bytes(&self, tag: u64) -> Vec<u8> {
        let mut w = W(Vec::with_capacity(self.memory_bytes() / 2 + 64));
        w.0.extend_from_slice(MAGIC);
        w.u64(tag);
        // documents
        w.u64s(self.ids.iter().map(|&i| i as u64));
        w.u32s(&self.lens);
        w.bytes(&self.live.iter().map(|&l| u8::from(l)).collect::<Vec<u8>>());
        w.u32s(&self.proj);
        // The forward lists (each document's terms) are not written: rebuilt from the
        // postings at load, they would be a third of the file.
        // projects, by number
        let mut names: Vec<&str> = vec![""; self.project_docs.len()];
        for (name, &p) in &self.projects {
            names[p as usize] = name;
        }
        w.u64(names.len() as u64);
        for n in names {
            w.bytes(n.as_bytes());
        }
        w.u64s(self.project_docs.iter().copied());
        w.u64s(self.project_tokens.iter().copied());
        // terms, by number
        let mut words: Vec<&[u8]> = vec![&[]; self.terms.len()];
        for (word, &t) in &self.dict {
            words[t as usize] = word;
        }
        w.u64(words.len() as u64);
        for (word, p) in words.iter().zip(&self.terms) {
            w.bytes(word);
            w.u32s(&p.docs);
            w.u32s(&p.tfs);
            w.u32(p.df);
            w.u64(p.by_project.len() as u64);
            for &(a, b) in &p.by_project {
                w.u32(a);
                w.u32(b);
            }
        }
        // surface words, in byte order
        w.u64(self.words.len() as u64);
        for (word, &(n, term)) in &self.words {
            w.bytes(word);
            w.u32(n);
            w.u32(term);
        }
        w.u64(self.n_live as u64);
        w.u64(self.total_tokens);
        w.u64(self.dead_postings as u64);
        let sum = checksum4(&w.0);
        w.u64(sum);
        w.0
    }

    /// An index and its tag from [`Index::to_bytes`]'s output; an error names what is
    /// wrong with the bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<(Index, u64), String> {
        if bytes.len() < 24 || &bytes[..8] != MAGIC {
            return Err("not a cortex keyword index of this version".into());
        }
        let (body, sum) = bytes.split_at(bytes.len() - 8);
        if checksum4(body) != u64::from_le_bytes(sum.try_into().map_err(|_| "truncated")?) {
            return Err("checksum mismatch".into());
        }
        let mut r = R { b: body, at: 8 };
        let tag = r.u64()?;
        let ids: Vec<i64> = r.u64s()?.into_iter().map(|x| x as i64).collect();
        let n = ids.len();
        let lens = r.u32s()?;
        let live: Vec<bool> = r.bytes()?.iter().map(|&b| b != 0).collect();
        let proj = r.u32s()?;
        if lens.len() != n || live.len() != n || proj.len() != n {
            return Err("per-document arrays of different lengths".into());
        }
        let np = r.len(8)?;
        let mut projects: FxMap<Box<str>, u32> = FxMap::default();
        for p in 0..np {
            let name = std::str::from_utf8(r.bytes()?).map_err(|_| "a project name not UTF-8")?;
            if projects.insert(name.into(), p as u32).is_some() {
                return Err("a project named twice".into());
            }
        }
        let project_docs = r.u64s()?;
        let project_tokens = r.u64s()?;
        if project_docs.len() != np || project_tokens.len() != np {
            return Err("per-project arrays of different lengths".into());
        }
        if proj.iter().any(|&p| p as usize >= np) {
            return Err("a document of an unknown project".into());
        }
        let nt = r.len(8)?;
        let mut dict: FxMap<Box<[u8]>, u32> = FxMap::default();
        dict.reserve(nt);
        let mut terms = Vec::with_capacity(nt);
        for t in 0..nt {
            let word = r.bytes()?;
            if dict.insert(word.into(), t as u32).is_some() {
                return Err("a term stored twice".into());
            }
            let docs = r.u32s()?;
            let tfs = r.u32s()?;
            let df = r.u32()?;
            let nb = r.len(8)?;
            let mut by_project = Vec::with_capacity(nb);
            for _ in 0..nb {
                let (a, b) = (r.u32()?, r.u32()?);
                if a as usize >= np {
                    return Err("a term counted in an unknown project".into());
                }
                by_project.push((a, b));
            }
            if tfs.len() != docs.len()
                || docs.last().is_some_and(|&d| d as usize >= n)
                || !docs.windows(2).all(|w| w[0] < w[1])
                || !by_project.windows(2).all(|w| w[0].0 < w[1].0)
            {
                return Err(format!("the postings of term {t} are damaged"));
            }
            terms.push(Postings {
                docs,
                tfs,
                df,
                by_project,
            });
        }
        let nw = r.len(16)?;
        let mut words: BTreeMap<Box<[u8]>, (u32, u32)> = BTreeMap::new();
        let mut prev: Option<&[u8]> = None;
        for _ in 0..nw {
            let word = r.bytes()?;
            let (count, term) = (r.u32()?, r.u32()?);
            if term as usize >= nt || prev.is_some_and(|p| p >= word) {
                return Err("the surface words are damaged".into());
            }
            prev = Some(word);
            words.insert(word.into(), (count, term));
        }
        let n_live = usize::try_from(r.u64()?).map_err(|_| "a count out of range")?;
        let total_tokens = r.u64()?;
        let dead_postings = usize::try_from(r.u64()?).map_err(|_| "a count out of range")?;
        if r.at != body.len() {
            return Err("bytes after the index".into());
        }
        let mut by_id: FxMap<i64, u32> = FxMap::default();
        by_id.reserve(n_live);
        for (d, &id) in ids.iter().enumerate() {
            if live[d] && by_id.insert(id, d as u32).is_some() {
                return Err("a memory id live twice".into());
            }
        }
        let postings: usize = terms.iter().map(|p: &Postings| p.docs.len()).sum();
        if by_id.len() != n_live || dead_postings > postings {
            return Err("the live count does not match the documents".into());
        }
        let mut ix = Index {
            dict,
            terms,
            ids,
            lens,
            live,
            // Rebuilt from the postings before the first write (see `ensure_fwd`): a load
            // that only searches never pays for it (0.55 s at 1M documents).
            fwd_start: Vec::new(),
            fwd: Vec::new(),
            fwd_pending: true,
            by_id,
            proj,
            projects,
            project_docs,
            project_tokens,
            n_live,
            total_tokens,
            dead_postings,
            scratch: Mutex::new(Vec::new()),
            words,
        };
        ix.ensure_scratch_len();
        Ok((ix, tag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Index {
        let mut ix = Index::new();
        ix.add_in(
            &[1, 2, 3, 4],
            &[
                "the deployment of billing",
                "billing deploys on tuesday",
                "coffee with alice",
                "deploy deploy deploy",
            ],
            Some(&["a", "b", "a", "\0"]),
            1,
        );
        ix.remove(&[3]);
        ix.add_in(&[2], &["billing moved to friday"], Some(&["b"]), 1);
        ix
    }

    #[test]
    fn round_trip_keeps_every_answer() {
        let ix = sample();
        let bytes = ix.to_bytes(42);
        let (back, tag) = Index::from_bytes(&bytes).expect("loads");
        assert_eq!(tag, 42);
        back.check().expect("consistent");
        assert_eq!(back.len(), ix.len());
        assert_eq!(back.total_tokens(), ix.total_tokens());
        assert_eq!(back.to_bytes(42), bytes);
        for id in [1, 2, 3, 4, 5] {
            assert_eq!(back.contains(id), ix.contains(id));
        }
        // the rebuilt forward lists let removal keep every count exact
        let (mut a, mut b) = (ix, back);
        a.remove(&[1, 2]);
        b.remove(&[1, 2]);
        b.check().expect("consistent after removals");
        assert_eq!(a.len(), b.len());
        assert_eq!(a.total_tokens(), b.total_tokens());
        assert_eq!(a.to_bytes(1), b.to_bytes(1));
        // and a loaded index takes a replacing add as a fresh one does
        let (mut c, _) = Index::from_bytes(&bytes).expect("loads");
        let mut d = sample();
        c.add_in(&[4, 9], &["coffee at noon", "new text"], None, 1);
        d.add_in(&[4, 9], &["coffee at noon", "new text"], None, 1);
        c.check().expect("consistent after a replacing add");
        assert_eq!(c.to_bytes(3), d.to_bytes(3));
    }

    #[test]
    fn damage_is_an_error_never_a_panic() {
        let bytes = sample().to_bytes(7);
        for cut in [0, 8, 23, bytes.len() / 2, bytes.len() - 1] {
            assert!(Index::from_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in (0..bytes.len()).step_by(7) {
            let mut bad = bytes.clone();
            bad[at] ^= 0x5a;
            assert!(Index::from_bytes(&bad).is_err(), "flipped byte {at}");
        }
        // A structurally wrong body with a matching checksum is caught by the checks.
        let mut bad = bytes[..bytes.len() - 8].to_vec();
        bad[16..24].copy_from_slice(&u64::MAX.to_le_bytes()); // the document count
        let sum = checksum4(&bad);
        bad.extend_from_slice(&sum.to_le_bytes());
        assert!(Index::from_bytes(&bad).is_err());
    }

    #[test]
    fn older_versions_are_refused_so_the_caller_rebuilds() {
        // a version 2 file has no surface words: its body under either magic is refused
        let v3 = sample().to_bytes(5);
        assert_eq!(&v3[..8], MAGIC);
        let mut v2 = v3[..v3.len() - 8].to_vec();
        v2[..8].copy_from_slice(MAGIC_V2);
        let sum = checksum4(&v2);
        v2.extend_from_slice(&sum.to_le_bytes());
        let err = Index::from_bytes(&v2)
            .err()
            .expect("a version 2 file is refused");
        assert!(err.contains("version"), "{err}");
    }

    #[test]
    fn surface_words_survive_a_round_trip() {
        let ix = sample();
        let (back, _) = Index::from_bytes(&ix.to_bytes(1)).expect("loads");
        assert_eq!(back.words_starting(b"d"), ix.words_starting(b"d"));
        assert_eq!(back.surface_words(), ix.surface_words());
        assert!(!back.words_starting(b"deploy").is_empty());
    }

    #[test]
    fn the_four_lane_checksum_sees_every_byte() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [0, 1, 7, 8, 31, 32, 33, 64, 100, 1000] {
            let base = checksum4(&data[..len]);
            for at in 0..len {
                let mut bad = data[..len].to_vec();
                bad[at] ^= 1;
                assert_ne!(checksum4(&bad), base, "len {len}, byte {at}");
            }
        }
        assert_ne!(checksum4(&data[..32]), checksum4(&data[..33]));
    }
}
