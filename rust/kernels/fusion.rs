//! Rank fusion over ranked id lists: Reciprocal Rank Fusion (seed 002) and
//! linear fusion of min-max normalised scores (seed 001).
//!
//! Both keep, for every fused id, its rank (1-based, -1 when absent) and its
//! input score (NaN when absent or not given) in each list, so that callers
//! can explain a result. Scores are accumulated in f64 in list order, so the
//! pure-Python twin in `cortex/fusion.py` gives the same bits.
//!
//! Order: higher fused score first; ties go to the id with the best (lowest)
//! rank in any list, then to the earlier list holding that rank, then to the
//! lower id. Within one list a repeated id keeps its first (best) rank.
use std::collections::HashMap;

use crate::errors::{Error, Result};

/// The fused result; per-input arrays are list-major (`ranks[l * n + i]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub ids: Vec<i64>,
    pub scores: Vec<f64>,
    /// 1-based rank of `ids[i]` in list `l`, -1 when absent.
    pub ranks: Vec<i64>,
    /// Input score of `ids[i]` in list `l`, NaN when absent or not given.
    pub input_scores: Vec<f64>,
    pub lists: usize,
}

struct Entry {
    id: i64,
    score: f64,
    best_rank: i64,
    best_list: usize,
}

fn check_weights(weights: &[f64], lists: usize) -> Result<()> {
    if weights.len() != lists {
        return Err(Error::Invalid(format!(
            "got {lists} lists but {} weights; pass one weight per list",
            weights.len()
        )));
    }
    if let Some(w) = weights.iter().find(|w| !w.is_finite() || **w < 0.0) {
        return Err(Error::Invalid(format!(
            "weights must be finite and >= 0, got {w}"
        )));
    }
    Ok(())
}

/// Collect ids in first-seen order, their per-list rank and input score.
fn gather(lists: &[&[i64]], scores: Option<&[&[f64]]>) -> (Vec<i64>, Vec<i64>, Vec<f64>) {
    let mut index: HashMap<i64, usize> = HashMap::new();
    let mut ids = Vec::new();
    for list in lists {
        for id in *list {
            index.entry(*id).or_insert_with(|| {
                ids.push(*id);
                ids.len() - 1
            });
        }
    }
    let n = ids.len();
    let mut ranks = vec![0i64; lists.len() * n];
    let mut input = vec![f64::NAN; lists.len() * n];
    for (l, list) in lists.iter().enumerate() {
        for (pos, id) in list.iter().enumerate() {
            let i = index[id];
            if ranks[l * n + i] == 0 {
                ranks[l * n + i] = pos as i64 + 1;
                if let Some(s) = scores {
                    input[l * n + i] = s[l][pos];
                }
            }
        }
    }
    (ids, ranks, input)
}

fn finish(
    ids: Vec<i64>,
    ranks: Vec<i64>,
    input: Vec<f64>,
    lists: usize,
    score: impl Fn(usize) -> f64,
) -> Fused {
    let n = ids.len();
    let mut entries: Vec<Entry> = (0..n)
        .map(|i| {
            let (mut best_rank, mut best_list) = (i64::MAX, usize::MAX);
            for l in 0..lists {
                let r = ranks[l * n + i];
                if r > 0 && r < best_rank {
                    best_rank = r;
                    best_list = l;
                }
            }
            Entry {
                id: ids[i],
                score: score(i),
                best_rank,
                best_list,
            }
        })
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|a, b| {
        let (x, y) = (&entries[*a], &entries[*b]);
        y.score
            .total_cmp(&x.score)
            .then(x.best_rank.cmp(&y.best_rank))
            .then(x.best_list.cmp(&y.best_list))
            .then(x.id.cmp(&y.id))
    });
    let mut out = Fused {
        ids: Vec::with_capacity(n),
        scores: Vec::with_capacity(n),
        ranks: vec![0; lists * n],
        input_scores: vec![f64::NAN; lists * n],
        lists,
    };
    for (j, &i) in order.iter().enumerate() {
        out.ids.push(entries[i].id);
        out.scores.push(entries[i].score);
        for l in 0..lists {
            let r = ranks[l * n + i];
            out.ranks[l * n + j] = if r > 0 { r } else { -1 };
            out.input_scores[l * n + j] = input[l * n + i];
        }
    }
    entries.clear();
    out
}

/// Reciprocal Rank Fusion: `score(d) = sum_i w_i / (k + rank_i(d))`, rank from 1.
pub fn rrf(lists: &[&[i64]], weights: &[f64], k: f64, scores: Option<&[&[f64]]>) -> Result<Fused> {
    check_weights(weights, lists.len())?;
    if !k.is_finite() || k < 0.0 {
        return Err(Error::Invalid(format!(
            "k must be finite and >= 0 (default 60), got {k}"
        )));
    }
    if let Some(s) = scores {
        check_scores(lists, s, false)?;
    }
    let (ids, ranks, input) = gather(lists, scores);
    let n = ids.len();
    let l = lists.len();
    let score = |i: usize| {
        let mut s = 0.0f64;
        for (li, w) in weights.iter().enumerate() {
            let r = ranks[li * n + i];
            if r > 0 {
                s += w / (k + r as f64);
            }
        }
        s
    };
    let scores_v: Vec<f64> = (0..n).map(score).collect();
    Ok(finish(ids, ranks, input, l, |i| scores_v[i]))
}

fn check_scores(lists: &[&[i64]], scores: &[&[f64]], need_finite: bool) -> Result<()> {
    if scores.len() != lists.len() {
        return Err(Error::Invalid(format!(
            "got {} id lists but {} score lists; pass one score list per id list",
            lists.len(),
            scores.len()
        )));
    }
    for (l, (ids, s)) in lists.iter().zip(scores).enumerate() {
        if ids.len() != s.len() {
            return Err(Error::Invalid(format!(
                "list {l} has {} ids but {} scores; they must be the same length",
                ids.len(),
                s.len()
            )));
        }
        if need_finite && s.iter().any(|v| !v.is_finite()) {
            return Err(Error::Invalid(format!(
                "list {l} has a NaN or infinite score"
            )));
        }
    }
    Ok(())
}

/// Min-max normalise: `(s - min) / (max - min)`; a list whose scores are all
/// equal maps to 1.0 (every member fully credited: there is nothing to rank).
pub fn minmax(s: &[f64]) -> Vec<f64> {
    let lo = s.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = hi - lo;
    s.iter()
        .map(|v| if span > 0.0 { (v - lo) / span } else { 1.0 })
        .collect()
}

/// Linear fusion: `score(d) = sum_i w_i * minmax_i(d)`, absent = 0.
pub fn linear(lists: &[&[i64]], scores: &[&[f64]], weights: &[f64]) -> Result<Fused> {
    check_weights(weights, lists.len())?;
    check_scores(lists, scores, true)?;
    let (ids, ranks, input) = gather(lists, Some(scores));
    let n = ids.len();
    let l = lists.len();
    // Normalised score of each id in each list (from its first occurrence).
    let norms: Vec<Vec<f64>> = scores.iter().map(|s| minmax(s)).collect();
    let mut norm_at = vec![0.0f64; l * n];
    let pos: HashMap<i64, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    for (li, list) in lists.iter().enumerate() {
        for (p, id) in list.iter().enumerate().rev() {
            norm_at[li * n + pos[id]] = norms[li][p];
        }
    }
    let fused: Vec<f64> = (0..n)
        .map(|i| {
            let mut s = 0.0f64;
            for (li, w) in weights.iter().enumerate() {
                if ranks[li * n + i] > 0 {
                    s += w * norm_at[li * n + i];
                }
            }
            s
        })
        .collect();
    Ok(finish(ids, ranks, input, l, |i| fused[i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_matches_the_formula_and_breaks_ties_by_best_rank() {
        let a: &[i64] = &[1, 2, 3];
        let b: &[i64] = &[3, 4];
        let f = rrf(&[a, b], &[1.0, 1.0], 60.0, None).unwrap();
        // 3: 1/63 + 1/61; 1: 1/61; 4: 1/62; 2: 1/62 (tie with 4: rank 2 each, list 0 first)
        assert_eq!(f.ids, vec![3, 1, 2, 4]);
        assert!((f.scores[0] - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-15);
        let n = f.ids.len();
        assert_eq!(&f.ranks[..n], &[3, 1, 2, -1]);
        assert_eq!(&f.ranks[n..], &[1, -1, -1, 2]);
    }

    #[test]
    fn rrf_weight_zero_ignores_a_list_and_duplicates_keep_first_rank() {
        let a: &[i64] = &[5, 6, 5];
        let b: &[i64] = &[7];
        let f = rrf(&[a, b], &[1.0, 0.0], 60.0, None).unwrap();
        assert_eq!(f.ids, vec![5, 6, 7]);
        assert_eq!(f.scores[2], 0.0);
        assert_eq!(f.ranks[0], 1);
    }

    #[test]
    fn linear_normalises_each_list() {
        let a: &[i64] = &[1, 2, 3];
        let sa: &[f64] = &[0.9, 0.5, 0.1];
        let b: &[i64] = &[3, 1];
        let sb: &[f64] = &[10.0, 5.0];
        let f = linear(&[a, b], &[sa, sb], &[0.7, 0.3]).unwrap();
        // 1: 0.7*1 + 0.3*0 = 0.7; 3: 0 + 0.3 = 0.3; 2: 0.7*0.5 = 0.35
        assert_eq!(f.ids, vec![1, 2, 3]);
        assert!((f.scores[0] - 0.7).abs() < 1e-12);
        let n = f.ids.len();
        assert_eq!(f.input_scores[n + 2], 10.0);
        assert!(f.input_scores[n + 1].is_nan());
    }

    #[test]
    fn bad_arguments_are_errors() {
        let a: &[i64] = &[1];
        assert!(rrf(&[a], &[f64::NAN], 60.0, None).is_err());
        assert!(rrf(&[a], &[1.0, 1.0], 60.0, None).is_err());
        assert!(rrf(&[a], &[1.0], -1.0, None).is_err());
        let s: &[f64] = &[f64::INFINITY];
        assert!(linear(&[a], &[s], &[1.0]).is_err());
        let empty = rrf(&[], &[], 60.0, None).unwrap();
        assert!(empty.ids.is_empty());
    }
}
