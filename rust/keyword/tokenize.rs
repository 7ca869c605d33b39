//! FTS5's `porter unicode61 remove_diacritics 2` tokenizer, reproduced.
//!
//! unicode61 splits text into runs of token characters: a run starts at a character of
//! class 1 (by default Unicode categories L*, N*, Co, as SQLite's own tables have them)
//! and goes on over class 1 characters and the diacritics of class 2 (which never start
//! one). Each character is folded: lower case, diacritics removed (mode 2: also from
//! characters with several), a bare diacritic dropped. The tables are read back from
//! SQLite itself by `scripts/gen_unicode61_tables.py`, so they are the SQLite's, not Rust's Unicode.
//! Then every token goes through the [`porter`](super::porter) stemmer, and FTS5 stores
//! at most [`MAX_TERM_BYTES`] bytes of it.
use std::sync::OnceLock;

use super::porter;
use super::unicode61_tables::{FOLD, TOKEN_RANGES};

/// FTS5 keeps at most this many bytes of a term (`FTS5_MAX_TOKEN_SIZE`), in the index
/// and in queries alike; longer terms are cut here, even inside a UTF-8 sequence.
pub const MAX_TERM_BYTES: usize = 32768;

/// Per code point of the BMP: class (0 separator, 1 token, 2 continues only) and fold.
struct Bmp {
    class: Vec<u8>,
    fold: Vec<u32>,
}

fn bmp() -> &'static Bmp {
    static BMP: OnceLock<Bmp> = OnceLock::new();
    BMP.get_or_init(|| {
        let mut class = vec![0u8; 0x10000];
        let mut fold: Vec<u32> = (0..0x10000).collect();
        for &(a, b, k) in TOKEN_RANGES.iter() {
            for c in a..=b.min(0xFFFF) {
                class[c as usize] = k;
            }
        }
        for &(c, f) in FOLD.iter() {
            if c < 0x10000 {
                fold[c as usize] = f;
            }
        }
        Bmp { class, fold }
    })
}

/// Class of code point `c`: 0 separates, 1 starts or continues a token, 2 continues one.
pub fn class(c: u32) -> u8 {
    if c < 0x10000 {
        return bmp().class[c as usize];
    }
    match TOKEN_RANGES.binary_search_by(|&(a, b, _)| {
        if b < c {
            std::cmp::Ordering::Less
        } else if a > c {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    }) {
        Ok(i) => TOKEN_RANGES[i].2,
        Err(_) => 0,
    }
}

/// What token character `c` folds to (0: dropped).
pub fn fold(c: u32) -> u32 {
    if c < 0x10000 {
        return bmp().fold[c as usize];
    }
    match FOLD.binary_search_by_key(&c, |&(a, _)| a) {
        Ok(i) => FOLD[i].1,
        Err(_) => c,
    }
}

/// Decode the UTF-8 sequence of valid `s` at `i`: (code point, length).
#[inline]
fn decode(s: &[u8], i: usize) -> (u32, usize) {
    let b0 = u32::from(s[i]);
    if b0 < 0xE0 {
        (((b0 & 0x1F) << 6) | (u32::from(s[i + 1]) & 0x3F), 2)
    } else if b0 < 0xF0 {
        (
            ((b0 & 0x0F) << 12)
                | ((u32::from(s[i + 1]) & 0x3F) << 6)
                | (u32::from(s[i + 2]) & 0x3F),
            3,
        )
    } else {
        (
            ((b0 & 0x07) << 18)
                | ((u32::from(s[i + 1]) & 0x3F) << 12)
                | ((u32::from(s[i + 2]) & 0x3F) << 6)
                | (u32::from(s[i + 3]) & 0x3F),
            4,
        )
    }
}

#[inline]
fn push_utf8(out: &mut Vec<u8>, c: u32) {
    match char::from_u32(c) {
        Some(ch) => {
            let mut b = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
        }
        // Folding never yields a surrogate; keep the bytes FTS5 would write anyway.
        None => {
            out.push(0xE0 | ((c >> 12) & 0x0F) as u8);
            out.push(0x80 | ((c >> 6) & 0x3F) as u8);
            out.push(0x80 | (c & 0x3F) as u8);
        }
    }
}

#[inline]
fn ascii_token(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// Reusable buffers of one tokenizing thread.
#[derive(Default)]
pub struct Tokenizer {
    raw: Vec<u8>,
    stemmed: Vec<u8>,
}

impl Tokenizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Call `emit` with each index term of `text`, in order, as FTS5 stores it.
    pub fn for_each(&mut self, text: &str, mut emit: impl FnMut(&[u8])) {
        let stemmed = &mut self.stemmed;
        scan(text, &mut self.raw, |raw| {
            stem(raw, stemmed);
            emit(stemmed);
        });
    }

    /// Call `emit` with each surface word of `text`, in order: the token folded by
    /// unicode61 `remove_diacritics 2`, before stemming (what FTS5's unstemmed index
    /// stores, once cut at [`MAX_TERM_BYTES`]); [`stem`] makes its index term.
    pub fn for_each_raw(&mut self, text: &str, emit: impl FnMut(&[u8])) {
        scan(text, &mut self.raw, emit);
    }

    /// The index terms of `text`, in order.
    pub fn terms(&mut self, text: &str) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.for_each(text, |t| out.push(t.to_vec()));
        out
    }
}

/// The index term of the surface word `raw` into `out`: stemmed, cut at
/// [`MAX_TERM_BYTES`].
pub fn stem(raw: &[u8], out: &mut Vec<u8>) {
    porter::stem_into(raw, out);
    out.truncate(MAX_TERM_BYTES);
}

/// The tokens of `text`, each folded into `raw` (whole, not cut), then given to `emit`.
fn scan(text: &str, raw: &mut Vec<u8>, mut emit: impl FnMut(&[u8])) {
    let s = text.as_bytes();
    let n = s.len();
    let mut i = 0;
    loop {
        raw.clear();
        // Skip separators up to the first character that starts a token.
        loop {
            if i >= n {
                return;
            }
            let b = s[i];
            if b < 0x80 {
                if ascii_token(b) {
                    break;
                }
                i += 1;
            } else {
                let (c, l) = decode(s, i);
                i += l;
                if class(c) == 1 {
                    let f = fold(c);
                    if f != 0 {
                        push_utf8(raw, f);
                    }
                    break;
                }
            }
        }
        // Gather the token.
        while i < n {
            let b = s[i];
            if b < 0x80 {
                if !ascii_token(b) {
                    break;
                }
                raw.push(b.to_ascii_lowercase());
                i += 1;
            } else {
                let (c, l) = decode(s, i);
                if class(c) == 0 {
                    break;
                }
                i += l;
                let f = fold(c);
                if f != 0 {
                    push_utf8(raw, f);
                }
            }
        }
        emit(raw);
    }
}

/// The index terms of `text`, in order (allocates a tokenizer; for tests and queries).
pub fn terms(text: &str) -> Vec<Vec<u8>> {
    Tokenizer::new().terms(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Vec<String> {
        terms(s)
            .into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect()
    }

    #[test]
    fn ascii_splits_on_anything_but_letters_and_digits() {
        assert_eq!(
            t("Hello, World! foo_bar x1y2"),
            ["hello", "world", "foo", "bar", "x1y2"]
        );
        assert_eq!(t("don't"), ["don", "t"]);
        assert!(t("  ,,; _ ").is_empty());
        assert_eq!(t("Running RUNS"), ["run", "run"]);
    }

    #[test]
    fn diacritics_are_removed_and_case_folded() {
        assert_eq!(t("Café NAÏVE Ångström"), ["cafe", "naiv", "angstrom"]);
        // SQLite removes no Greek tonos: its tables only decompose Latin letters
        assert_eq!(t("ΑΘΉΝΑ"), ["αθήνα"]);
        assert_eq!(t("Москва"), ["москва"]);
        // a combining mark continues a token and is dropped, but never starts one
        // (then porter's step 5a drops the final e of "ete")
        assert_eq!(t("e\u{301}te\u{301}"), ["et"]);
        assert_eq!(t("\u{301}abc"), ["abc"]);
    }

    #[test]
    fn separators_outside_ascii() {
        assert_eq!(t("a\u{2014}b"), ["a", "b"]); // em dash
        assert_eq!(t("x😀y"), ["x", "y"]);
        assert_eq!(t("東京タワー"), ["東京タワー"]);
    }

    #[test]
    fn long_terms_are_cut_like_fts5() {
        let long = "a".repeat(40_000);
        assert_eq!(terms(&long)[0].len(), MAX_TERM_BYTES);
    }

    #[test]
    fn tables_are_sorted() {
        assert!(TOKEN_RANGES.windows(2).all(|w| w[0].1 < w[1].0));
        assert!(FOLD.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
