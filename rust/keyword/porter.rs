//! The Porter (1980) stemmer exactly as SQLite's FTS5 `porter` tokenizer applies it.
//!
//! Written from the algorithm, with FTS5's boundary rules reproduced on purpose:
//! - a token shorter than 3 bytes or longer than [`MAX_TOKEN`] bytes passes unchanged;
//! - it works on bytes: only ASCII `a e i o u` (and `y` after a consonant) are vowels,
//!   every other byte, UTF-8 continuation bytes included, is a consonant;
//! - a rule fires on the first suffix of its step that matches (longest first within a
//!   step, as FTS5 orders them) only if the stem before it is non-empty, and when that
//!   suffix's condition fails the step ends (no shorter suffix is tried);
//! - step 1b's `*v*` counts `y` as a vowel anywhere but the first byte.
//!
//! It is not Snowball's "english" (Porter2) stemmer, which differs on many words.

/// Tokens longer than this many bytes are not stemmed (`FTS5_PORTER_MAX_TOKEN`).
pub const MAX_TOKEN: usize = 64;

fn is_vowel(c: u8, y_is_vowel: bool) -> bool {
    matches!(c, b'a' | b'e' | b'i' | b'o' | b'u') || (y_is_vowel && c == b'y')
}

/// Skip one `[C]V+C` run: the index after the first consonant that follows a vowel,
/// or `None` when there is no such consonant. `prev_cons`: was the byte before a consonant.
fn gobble_vc(stem: &[u8], prev_cons: bool) -> Option<usize> {
    let mut cons = prev_cons;
    let mut i = 0;
    while i < stem.len() {
        cons = !is_vowel(stem[i], cons);
        if !cons {
            break;
        }
        i += 1;
    }
    i += 1;
    while i < stem.len() {
        cons = !is_vowel(stem[i], cons);
        if cons {
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

/// m > 0
fn m_gt0(stem: &[u8]) -> bool {
    gobble_vc(stem, false).is_some()
}

/// m > 1
fn m_gt1(stem: &[u8]) -> bool {
    match gobble_vc(stem, false) {
        Some(n) => gobble_vc(&stem[n..], true).is_some(),
        None => false,
    }
}

/// m == 1
fn m_eq1(stem: &[u8]) -> bool {
    match gobble_vc(stem, false) {
        Some(n) => gobble_vc(&stem[n..], true).is_none(),
        None => false,
    }
}

/// *o: the stem ends consonant-vowel-consonant, the last not w, x or y.
fn o_star(stem: &[u8]) -> bool {
    let Some(&last) = stem.last() else {
        return false;
    };
    if matches!(last, b'w' | b'x' | b'y') {
        return false;
    }
    let mut mask = 0u32;
    let mut cons = false;
    for &c in stem {
        cons = !is_vowel(c, cons);
        mask = (mask << 1) | u32::from(cons);
    }
    mask & 7 == 5
}

/// m > 1 and (*s or *t)
fn m_gt1_s_or_t(stem: &[u8]) -> bool {
    matches!(stem.last(), Some(b's' | b't')) && m_gt1(stem)
}

/// *v*: the stem holds a vowel (`y` counts except as the first byte).
fn has_vowel(stem: &[u8]) -> bool {
    stem.iter().enumerate().any(|(i, &c)| is_vowel(c, i > 0))
}

type Cond = fn(&[u8]) -> bool;

/// One rule: suffix, condition on the stem before it (None = always), replacement.
struct Rule(&'static [u8], Option<Cond>, &'static [u8]);

// The rules of each step, grouped the way FTS5 dispatches them: on the second-last byte
// of the token, then in this order. A suffix found under another second-last byte is
// never tried, which matters only for the order within a group.
const STEP1B: &[Rule] = &[
    Rule(b"eed", Some(m_gt0), b"ee"),
    Rule(b"ed", Some(has_vowel), b""),
    Rule(b"ing", Some(has_vowel), b""),
];
const STEP1B2: &[Rule] = &[
    Rule(b"at", None, b"ate"),
    Rule(b"bl", None, b"ble"),
    Rule(b"iz", None, b"ize"),
];
const STEP2: &[Rule] = &[
    Rule(b"ational", Some(m_gt0), b"ate"),
    Rule(b"tional", Some(m_gt0), b"tion"),
    Rule(b"enci", Some(m_gt0), b"ence"),
    Rule(b"anci", Some(m_gt0), b"ance"),
    Rule(b"izer", Some(m_gt0), b"ize"),
    Rule(b"logi", Some(m_gt0), b"log"),
    Rule(b"bli", Some(m_gt0), b"ble"),
    Rule(b"alli", Some(m_gt0), b"al"),
    Rule(b"entli", Some(m_gt0), b"ent"),
    Rule(b"eli", Some(m_gt0), b"e"),
    Rule(b"ousli", Some(m_gt0), b"ous"),
    Rule(b"ization", Some(m_gt0), b"ize"),
    Rule(b"ation", Some(m_gt0), b"ate"),
    Rule(b"ator", Some(m_gt0), b"ate"),
    Rule(b"alism", Some(m_gt0), b"al"),
    Rule(b"iveness", Some(m_gt0), b"ive"),
    Rule(b"fulness", Some(m_gt0), b"ful"),
    Rule(b"ousness", Some(m_gt0), b"ous"),
    Rule(b"aliti", Some(m_gt0), b"al"),
    Rule(b"iviti", Some(m_gt0), b"ive"),
    Rule(b"biliti", Some(m_gt0), b"ble"),
];
const STEP3: &[Rule] = &[
    Rule(b"ical", Some(m_gt0), b"ic"),
    Rule(b"ness", Some(m_gt0), b""),
    Rule(b"icate", Some(m_gt0), b"ic"),
    Rule(b"iciti", Some(m_gt0), b"ic"),
    Rule(b"ful", Some(m_gt0), b""),
    Rule(b"ative", Some(m_gt0), b""),
    Rule(b"alize", Some(m_gt0), b"al"),
];
const STEP4: &[Rule] = &[
    Rule(b"al", Some(m_gt1), b""),
    Rule(b"ance", Some(m_gt1), b""),
    Rule(b"ence", Some(m_gt1), b""),
    Rule(b"er", Some(m_gt1), b""),
    Rule(b"ic", Some(m_gt1), b""),
    Rule(b"able", Some(m_gt1), b""),
    Rule(b"ible", Some(m_gt1), b""),
    Rule(b"ant", Some(m_gt1), b""),
    Rule(b"ement", Some(m_gt1), b""),
    Rule(b"ment", Some(m_gt1), b""),
    Rule(b"ent", Some(m_gt1), b""),
    Rule(b"ion", Some(m_gt1_s_or_t), b""),
    Rule(b"ou", Some(m_gt1), b""),
    Rule(b"ism", Some(m_gt1), b""),
    Rule(b"ate", Some(m_gt1), b""),
    Rule(b"iti", Some(m_gt1), b""),
    Rule(b"ous", Some(m_gt1), b""),
    Rule(b"ive", Some(m_gt1), b""),
    Rule(b"ize", Some(m_gt1), b""),
];

/// Per second-last byte, the range of `rules` in its group (rules of a group are listed
/// together): FTS5 switches on that byte, so only that group competes.
const fn groups(rules: &[Rule]) -> [(u8, u8); 256] {
    let mut g = [(0u8, 0u8); 256];
    let mut i = 0;
    while i < rules.len() {
        let s = rules[i].0;
        let key = s[s.len() - 2] as usize;
        if g[key].1 == 0 {
            g[key].0 = i as u8;
        }
        g[key].1 = i as u8 + 1;
        i += 1;
    }
    g
}

const G1B: [(u8, u8); 256] = groups(STEP1B);
const G1B2: [(u8, u8); 256] = groups(STEP1B2);
const G2: [(u8, u8); 256] = groups(STEP2);
const G3: [(u8, u8); 256] = groups(STEP3);
const G4: [(u8, u8); 256] = groups(STEP4);

/// Apply one step. FTS5 switches on the token's second-last byte, then tries the suffixes
/// of that group in the order listed; the first that matches with a non-empty stem
/// before it decides the step: its condition holds and it is replaced, or the step ends.
/// Returns the index of the rule applied.
fn step(buf: &mut [u8], n: &mut usize, rules: &[Rule], groups: &[(u8, u8); 256]) -> Option<usize> {
    // A one-byte token: FTS5 reads the byte before its buffer here, which is never an
    // ASCII letter, so no rule applies.
    if *n < 2 {
        return None;
    }
    let len = *n;
    let (a, b) = groups[buf[len - 2] as usize];
    let group = rules.iter().enumerate().take(b as usize).skip(a as usize);
    for (i, Rule(suffix, cond, out)) in group {
        if suffix[suffix.len() - 1] != buf[len - 1] {
            continue;
        }
        if len > suffix.len() && buf[len - suffix.len()..len] == **suffix {
            let stem = len - suffix.len();
            if cond.is_none_or(|c| c(&buf[..stem])) {
                buf[stem..stem + out.len()].copy_from_slice(out);
                *n = stem + out.len();
                return Some(i);
            }
            return None;
        }
    }
    None
}

/// Step 1a: sses -> ss, ies -> i, ss -> ss, s -> "".
fn step1a(buf: &[u8], n: &mut usize) {
    let len = *n;
    if buf[len - 1] != b's' {
        return;
    }
    if buf[len - 2] == b'e' {
        if (len > 4 && buf[len - 4] == b's' && buf[len - 3] == b's')
            || (len > 3 && buf[len - 3] == b'i')
        {
            *n = len - 2;
        } else {
            *n = len - 1;
        }
    } else if buf[len - 2] != b's' {
        *n = len - 1;
    }
}

/// Stem `token` into `out` (cleared first), as FTS5's porter tokenizer does.
pub fn stem_into(token: &[u8], out: &mut Vec<u8>) {
    out.clear();
    if token.len() > MAX_TOKEN || token.len() < 3 {
        out.extend_from_slice(token);
        return;
    }
    // Room for the longest growth (a step replaces a suffix by at most one more byte).
    let mut buf = [0u8; MAX_TOKEN + 8];
    buf[..token.len()].copy_from_slice(token);
    let mut n = token.len();

    step1a(&buf, &mut n);
    // Step 1b: only "ed" and "ing" (rules 1 and 2) go on to the clean-up.
    if matches!(step(&mut buf, &mut n, STEP1B, &G1B), Some(1 | 2))
        && step(&mut buf, &mut n, STEP1B2, &G1B2).is_none()
    {
        let c = buf[n - 1];
        let prev = if n >= 2 { buf[n - 2] } else { 0 };
        if !is_vowel(c, false) && c != b'l' && c != b's' && c != b'z' && c == prev {
            n -= 1;
        } else if m_eq1(&buf[..n]) && o_star(&buf[..n]) {
            buf[n] = b'e';
            n += 1;
        }
    }
    // Step 1c: y -> i when the stem before holds a vowel.
    if buf[n - 1] == b'y' && has_vowel(&buf[..n - 1]) {
        buf[n - 1] = b'i';
    }
    step(&mut buf, &mut n, STEP2, &G2);
    step(&mut buf, &mut n, STEP3, &G3);
    step(&mut buf, &mut n, STEP4, &G4);
    // Step 5a: drop a final e when m > 1, or m == 1 and not *o.
    if buf[n - 1] == b'e' {
        let s = &buf[..n - 1];
        if m_gt1(s) || (m_eq1(s) && !o_star(s)) {
            n -= 1;
        }
    }
    // Step 5b: ll -> l when m > 1.
    if n > 1 && buf[n - 1] == b'l' && buf[n - 2] == b'l' && m_gt1(&buf[..n - 1]) {
        n -= 1;
    }
    out.extend_from_slice(&buf[..n]);
}

/// The stem of `token` (convenience for tests and single words).
pub fn stem(token: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(token.len());
    stem_into(token, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::stem;

    fn s(w: &str) -> String {
        String::from_utf8(stem(w.as_bytes())).unwrap()
    }

    #[test]
    fn classic_examples_of_the_paper() {
        let cases = [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("ties", "ti"),
            ("caress", "caress"),
            ("cats", "cat"),
            ("feed", "feed"),
            ("agreed", "agre"),
            ("plastered", "plaster"),
            ("bled", "bled"),
            ("motoring", "motor"),
            ("sing", "sing"),
            ("conflated", "conflat"),
            ("troubled", "troubl"),
            ("sized", "size"),
            ("hopping", "hop"),
            ("tanned", "tan"),
            ("falling", "fall"),
            ("hissing", "hiss"),
            ("fizzed", "fizz"),
            ("failing", "fail"),
            ("filing", "file"),
            ("happy", "happi"),
            ("sky", "sky"),
            ("relational", "relat"),
            ("conditional", "condit"),
            ("rational", "ration"),
            ("valenci", "valenc"),
            ("digitizer", "digit"),
            ("conformabli", "conform"),
            ("radicalli", "radic"),
            ("differentli", "differ"),
            ("vileli", "vile"),
            ("analogousli", "analog"),
            ("vietnamization", "vietnam"),
            ("predication", "predic"),
            ("operator", "oper"),
            ("feudalism", "feudal"),
            ("decisiveness", "decis"),
            ("hopefulness", "hope"),
            ("callousness", "callous"),
            ("formaliti", "formal"),
            ("sensitiviti", "sensit"),
            ("sensibiliti", "sensibl"),
            ("triplicate", "triplic"),
            ("formative", "form"),
            ("formalize", "formal"),
            ("electriciti", "electr"),
            ("electrical", "electr"),
            ("hopeful", "hope"),
            ("goodness", "good"),
            ("revival", "reviv"),
            ("allowance", "allow"),
            ("inference", "infer"),
            ("airliner", "airlin"),
            ("gyroscopic", "gyroscop"),
            ("adjustable", "adjust"),
            ("defensible", "defens"),
            ("irritant", "irrit"),
            ("replacement", "replac"),
            ("adjustment", "adjust"),
            ("dependent", "depend"),
            ("adoption", "adopt"),
            ("homologou", "homolog"),
            ("communism", "commun"),
            ("activate", "activ"),
            ("angulariti", "angular"),
            ("homologous", "homolog"),
            ("effective", "effect"),
            ("bowdlerize", "bowdler"),
            ("probate", "probat"),
            ("rate", "rate"),
            ("cease", "ceas"),
            ("controll", "control"),
            ("roll", "roll"),
            ("generalizations", "gener"),
            ("oscillators", "oscil"),
        ];
        for (w, want) in cases {
            assert_eq!(s(w), want, "{w}");
        }
    }

    #[test]
    fn boundaries_follow_fts5() {
        // shorter than 3 bytes or longer than 64 bytes: unchanged
        assert_eq!(s("is"), "is");
        assert_eq!(s("as"), "as");
        let long = "a".repeat(60) + "ings"; // 64 bytes: stemmed
        assert_eq!(s(&long), "a".repeat(60));
        let longer = "a".repeat(61) + "ings"; // 65 bytes: unchanged
        assert_eq!(s(&longer), longer);
        // non-ASCII bytes are consonants; the token is otherwise stemmed
        assert_eq!(s("straße"), "straß");
        assert_eq!(s("aing"), "a");
        assert_eq!(s("ying"), "ying");
        assert_eq!(s("syed"), "sy");
    }
}
