//! The ranking of a keyword-only search beside the in-memory index: the keyword leg's
//! hits (BM25) filtered by the ranking columns kept for them, calibrated, boosted,
//! held to the thresholds and ordered, exactly as `cortex.search.pipeline.Pipeline._rank`
//! does in Python (the reference; tests/test_keyword_page.py holds the two equal).
//!
//! Every constant comes from the caller (`Params`): cortex's ranking constants live in
//! Python (ranking.py, pipeline.py) and are tuned there.
use std::cmp::Ordering;
use std::collections::HashMap;

use super::index::Hit;

/// The ranking columns of one live memory (cortex.ranking.RankInfo), as kept.
#[derive(Clone, Debug, PartialEq)]
pub struct RankRow {
    pub created: f64,
    pub confidence: f64,
    pub salience: f64,
    /// The sector's weight is looked up per search (the weights are an option).
    pub sector: Option<String>,
    /// Whether the source path is a dated note (ranking.is_dated).
    pub dated: bool,
    pub superseded: bool,
    pub project: Option<String>,
    /// Whether the columns passed validate.rank_info_ok (else the Python path, which
    /// names the memory as damaged, ranks the search).
    pub ok: bool,
}

/// What a search ranks with: the options' weights and floors, ranking.py's and the
/// pipeline's constants.
#[derive(Clone, Debug)]
pub struct Params {
    pub now: f64,
    pub day: f64,
    pub ln2: f64,
    /// The keyword calibration: `1 - exp(-slope * max(0, raw / bound))` (bound <= 0: 0).
    pub slope: f64,
    pub bound: f64,
    pub recency_weight: f64,
    pub half_life_days: f64,
    pub decay_floor: f64,
    pub salience_weight: f64,
    pub superseded_factor: f64,
    pub min_confidence: f64,
    pub threshold: f64,
    pub sectors: HashMap<String, f64>,
    /// Order ascending (the reverse of the relevance order).
    pub ascending: bool,
}

/// Whether a kept row passes the filters the kept columns judge.
pub struct Admit<'a> {
    pub include_superseded: bool,
    /// The project wall (None: every project); a memory without a project is in none.
    pub projects: Option<&'a [String]>,
}

impl Admit<'_> {
    pub fn admits(&self, row: &RankRow) -> bool {
        (self.include_superseded || !row.superseded)
            && self.projects.is_none_or(|ps| {
                row.project
                    .as_deref()
                    .is_some_and(|p| ps.iter().any(|x| x == p))
            })
    }
}

/// One ranked memory: its id, final score and calibrated keyword score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ranked {
    pub id: i64,
    pub score: f64,
    pub base: f64,
}

/// What `rank` answers: every candidate that cleared the floors, in order, and how
/// many did not.
#[derive(Debug, Default, PartialEq)]
pub struct Page {
    pub ranked: Vec<Ranked>,
    pub hidden: usize,
}

/// The keyword score of a BM25 `raw` against the leg's `bound`: hits.keyword_score of
/// `raw / bound` with `slope` (0 when the bound is not positive), Python's operations
/// in Python's order.
pub fn keyword_score(raw: f64, bound: f64, slope: f64) -> f64 {
    if bound > 0.0 {
        1.0 - (-slope * f64::max(0.0, raw / bound)).exp()
    } else {
        0.0
    }
}

/// ranking.recency_factor, temporal_decay, salience_factor: the same operations in the
/// same order, so that the floats are Python's.
fn score_of(base: f64, row: &RankRow, p: &Params) -> f64 {
    let mut recency = 1.0;
    if p.recency_weight != 0.0 {
        let days = f64::max(0.0, (p.now - row.created) / p.day);
        recency = 1.0 + p.recency_weight / (1.0 + days);
    }
    let mut decay = 1.0;
    if p.half_life_days != 0.0 && row.dated {
        let d = if p.half_life_days <= 0.0 {
            1.0
        } else {
            let age = f64::max(0.0, (p.now - row.created) / p.day);
            (-p.ln2 / p.half_life_days * age).exp()
        };
        decay = p.decay_floor + (1.0 - p.decay_floor) * d;
    }
    let salience = 1.0 + p.salience_weight * (row.salience - 0.5);
    let sector = match row.sector.as_deref() {
        Some(s) if !s.is_empty() => p.sectors.get(s).copied().unwrap_or(1.0),
        _ => 1.0,
    };
    let superseded = if row.superseded {
        p.superseded_factor
    } else {
        1.0
    };
    // score = base * recency * decay * salience * sector * confidence * superseded *
    // timeframe (1: no soft window on this path), left to right as Python multiplies
    base * recency * decay * salience * sector * row.confidence * superseded * 1.0
}

/// Rank `hits` (BM25 top of the index, admitted, at most the pool) whose kept columns
/// `rows` gives: boosts, floors, order (pipeline._rank for a keyword-only search
/// without facts, soft window or browse).
pub fn rank(hits: &[Hit], rows: &[&RankRow], p: &Params) -> Page {
    let mut ranked = Vec::with_capacity(hits.len());
    let mut hidden = 0;
    for (h, row) in hits.iter().zip(rows) {
        let base = keyword_score(h.score, p.bound, p.slope);
        let score = score_of(base, row, p);
        if row.confidence < p.min_confidence || base < p.threshold {
            hidden += 1;
            continue;
        }
        ranked.push(Ranked {
            id: h.id,
            score,
            base,
        });
    }
    // Python: kept.sort(key=(-score, id)) (stable), reversed for ascending order
    ranked.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(Ordering::Equal)
            .then(a.id.cmp(&b.id))
    });
    if p.ascending {
        ranked.reverse();
    }
    Page { ranked, hidden }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(created: f64) -> RankRow {
        RankRow {
            created,
            confidence: 1.0,
            salience: 0.5,
            sector: None,
            dated: false,
            superseded: false,
            project: None,
            ok: true,
        }
    }

    fn params() -> Params {
        Params {
            now: 1_000_000.0,
            day: 86_400.0,
            ln2: std::f64::consts::LN_2,
            slope: 1.6,
            bound: 4.0,
            recency_weight: 0.1,
            half_life_days: 0.0,
            decay_floor: 0.7,
            salience_weight: 0.2,
            superseded_factor: 0.5,
            min_confidence: 0.0,
            threshold: 0.1,
            sectors: HashMap::from([("semantic".to_owned(), 1.1)]),
            ascending: false,
        }
    }

    #[test]
    fn orders_by_score_then_id_and_counts_the_floor() {
        let hits = [
            Hit { id: 3, score: 2.0 },
            Hit { id: 1, score: 2.0 },
            Hit { id: 2, score: 0.01 },
        ];
        let a = row(1_000_000.0);
        let rows = [&a, &a, &a];
        let page = rank(&hits, &rows, &params());
        assert_eq!(page.hidden, 1); // 0.01 / 4 calibrates to 0.004, below 0.1
        let ids: Vec<i64> = page.ranked.iter().map(|r| r.id).collect();
        assert_eq!(ids, vec![1, 3]);
        let base = 1.0 - (-1.6f64 * 0.5).exp();
        assert_eq!(
            page.ranked[0].score,
            base * 1.1 * 1.0 * 1.0 * 1.0 * 1.0 * 1.0 * 1.0
        );
    }

    #[test]
    fn sector_superseded_and_the_project_wall() {
        let mut r = row(0.0);
        r.sector = Some("semantic".into());
        r.superseded = true;
        r.project = Some("a".into());
        let hits = [Hit { id: 7, score: 4.0 }];
        let page = rank(&hits, &[&r], &params());
        assert!(page.ranked[0].score < 1.0 - (-1.6f64).exp());
        let wall = ["b".to_owned()];
        let admit = Admit {
            include_superseded: true,
            projects: Some(&wall),
        };
        assert!(!admit.admits(&r));
        let admit = Admit {
            include_superseded: false,
            projects: None,
        };
        assert!(!admit.admits(&r));
    }
}
