//! The exactly-once and ordering checker of the crash and fault suites: given what was sent in
//! per session (in order) and what the platform fake recorded as sent out, it reports lost,
//! duplicated, reordered and unexpected answers per session. A duplicate whose earlier copies
//! have no receipt in the store (the platform took the send, the process died before the
//! receipt was committed) is the one known at-least-once window, reported apart.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, HashMap, HashSet};

/// One message the platform fake recorded as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// The message it answers (the token the fake LLM echoed), or the raw text when none.
    pub token: String,
    /// The platform's id for it.
    pub message_id: String,
}

/// What went wrong in one session.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SessionReport {
    /// Sent in, never answered.
    pub lost: Vec<String>,
    /// Answered more than once, the extra copies not explained by the send→receipt window.
    pub duplicated: Vec<String>,
    /// Answered more than once, every extra copy sent without a receipt (the known window).
    pub window_duplicates: Vec<String>,
    /// The platform ids of those extra copies: one per reply sent twice, however many
    /// messages (batched into one turn) it answers.
    pub window_copies: Vec<String>,
    /// (earlier, later) pairs whose answers came in the opposite order of their messages.
    pub reordered: Vec<(String, String)>,
    /// Answers to nothing that was sent in.
    pub unexpected: Vec<String>,
}

impl SessionReport {
    fn is_clean(&self) -> bool {
        self.lost.is_empty() && self.duplicated.is_empty() && self.reordered.is_empty() && self.unexpected.is_empty()
    }
}

/// The checker's verdict, per session.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Sessions with anything to report.
    pub sessions: BTreeMap<String, SessionReport>,
}

impl Report {
    /// Nothing lost, doubled (outside the window), reordered or unexpected.
    pub fn is_exactly_once(&self) -> bool {
        self.sessions.values().all(SessionReport::is_clean)
    }

    /// Replies sent twice inside the send→receipt window (each counted once, whatever number
    /// of batched messages it answers).
    pub fn window_sends(&self) -> usize {
        self.sessions.values().map(|r| r.window_copies.iter().collect::<HashSet<_>>().len()).sum()
    }

    /// Every duplicate inside the send→receipt window, as (session, token).
    pub fn window_duplicates(&self) -> Vec<(String, String)> {
        self.sessions
            .iter()
            .flat_map(|(s, r)| r.window_duplicates.iter().map(move |t| (s.clone(), t.clone())))
            .collect()
    }
}

/// Check `delivered` (per session, in the order the platform recorded it) against `sent`
/// (per session, in the order sent in); `receipts` are the platform message ids the store
/// recorded as delivered.
pub fn check(
    sent: &BTreeMap<String, Vec<String>>,
    delivered: &BTreeMap<String, Vec<Delivered>>,
    receipts: &HashSet<String>,
) -> Report {
    let mut report = Report::default();
    let sessions: HashSet<&String> = sent.keys().chain(delivered.keys()).collect();
    for session in sessions {
        let inputs = sent.get(session).map(Vec::as_slice).unwrap_or_default();
        let outputs = delivered.get(session).map(Vec::as_slice).unwrap_or_default();
        let position: HashMap<&str, usize> = inputs.iter().enumerate().map(|(i, t)| (t.as_str(), i)).collect();
        let mut found = SessionReport::default();
        let mut copies: BTreeMap<usize, Vec<&Delivered>> = BTreeMap::new();
        let mut first_seen = Vec::new();
        for out in outputs {
            match position.get(out.token.as_str()) {
                Some(&i) => {
                    let list = copies.entry(i).or_default();
                    if list.is_empty() {
                        first_seen.push(i);
                    }
                    list.push(out);
                }
                None => found.unexpected.push(out.token.clone()),
            }
        }
        for (i, token) in inputs.iter().enumerate() {
            match copies.get(&i).map(Vec::as_slice) {
                None | Some([]) => found.lost.push(token.clone()),
                Some([_]) => {}
                Some(all) => {
                    // The window: the platform took a copy, the receipt was never committed, and
                    // the resend after the restart is the one the store knows.
                    let (last, earlier) = all.split_last().expect("two or more copies");
                    let in_window = earlier.iter().all(|c| !receipts.contains(&c.message_id));
                    if in_window && receipts.contains(&last.message_id) {
                        found.window_duplicates.push(token.clone());
                        found.window_copies.extend(earlier.iter().map(|c| c.message_id.clone()));
                    } else {
                        found.duplicated.push(token.clone());
                    }
                }
            }
        }
        for (a, b) in first_seen.iter().zip(first_seen.iter().skip(1)) {
            if a > b {
                found.reordered.push((inputs[*b].clone(), inputs[*a].clone()));
            }
        }
        if found != SessionReport::default() {
            report.sessions.insert(session.clone(), found);
        }
    }
    report
}

/// What the transcripts got wrong in one session: the words the model was given for each
/// message sent in, against the order they were sent.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TranscriptReport {
    /// Sent in, never a user message of the transcript (closed without its words reaching it).
    pub missing: Vec<String>,
    /// In the transcript more than once.
    pub doubled: Vec<String>,
    /// (earlier, later) pairs stored in the opposite order.
    pub reordered: Vec<(String, String)>,
}

/// Check the user messages' words of each session (`words`, oldest first) against what was sent
/// in; returns the sessions with anything to report.
pub fn check_transcripts(
    sent: &BTreeMap<String, Vec<String>>,
    words: &BTreeMap<String, Vec<String>>,
) -> BTreeMap<String, TranscriptReport> {
    let mut reports = BTreeMap::new();
    for (session, inputs) in sent {
        let stored = words.get(session).map(Vec::as_slice).unwrap_or_default();
        let mut found = TranscriptReport::default();
        let mut order = Vec::new();
        for (i, token) in inputs.iter().enumerate() {
            match stored.iter().filter(|w| *w == token).count() {
                0 => found.missing.push(token.clone()),
                1 => {}
                _ => found.doubled.push(token.clone()),
            }
            if let Some(at) = stored.iter().position(|w| w == token) {
                order.push((at, i));
            }
        }
        order.sort();
        for (a, b) in order.iter().zip(order.iter().skip(1)) {
            if a.1 > b.1 {
                found.reordered.push((inputs[b.1].clone(), inputs[a.1].clone()));
            }
        }
        if found != TranscriptReport::default() {
            reports.insert(session.clone(), found);
        }
    }
    reports
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent() -> BTreeMap<String, Vec<String>> {
        BTreeMap::from([("s1".into(), vec!["a".into(), "b".into(), "c".into()]), ("s2".into(), vec!["x".into()])])
    }

    fn out(pairs: &[(&str, &str)]) -> Vec<Delivered> {
        pairs.iter().map(|(t, id)| Delivered { token: (*t).into(), message_id: (*id).into() }).collect()
    }

    fn receipts(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_clean_run_is_exactly_once() {
        let delivered = BTreeMap::from([
            ("s1".into(), out(&[("a", "1"), ("b", "2"), ("c", "3")])),
            ("s2".into(), out(&[("x", "9")])),
        ]);
        let report = check(&sent(), &delivered, &receipts(&["1", "2", "3", "9"]));
        assert!(report.is_exactly_once(), "{report:?}");
        assert!(report.sessions.is_empty());
    }

    #[test]
    fn a_lost_a_doubled_and_a_reordered_answer_are_each_reported() {
        let delivered = BTreeMap::from([
            // b lost; c before a (reordered); a doubled with both copies receipted.
            ("s1".into(), out(&[("c", "3"), ("a", "1"), ("a", "4")])),
            ("s2".into(), out(&[("x", "9"), ("stray", "10")])),
        ]);
        let report = check(&sent(), &delivered, &receipts(&["1", "3", "4", "9", "10"]));
        assert!(!report.is_exactly_once());
        let s1 = &report.sessions["s1"];
        assert_eq!(s1.lost, ["b"]);
        assert_eq!(s1.duplicated, ["a"]);
        assert_eq!(s1.reordered, [("a".to_owned(), "c".to_owned())]);
        assert_eq!(report.sessions["s2"].unexpected, ["stray"]);
        assert!(report.window_duplicates().is_empty());
    }

    #[test]
    fn a_resend_after_a_crash_before_the_receipt_is_reported_apart() {
        let delivered = BTreeMap::from([
            ("s1".into(), out(&[("a", "1"), ("b", "2"), ("b", "5"), ("c", "6")])),
            ("s2".into(), out(&[("x", "9")])),
        ]);
        // "2" went out but its receipt was never committed; the resend "5" has it.
        let report = check(&sent(), &delivered, &receipts(&["1", "5", "6", "9"]));
        assert!(report.is_exactly_once(), "{report:?}");
        assert_eq!(report.window_duplicates(), [("s1".to_owned(), "b".to_owned())]);
        // Had both copies been receipted, it would be a real duplicate.
        let report = check(&sent(), &delivered, &receipts(&["1", "2", "5", "6", "9"]));
        assert_eq!(report.sessions["s1"].duplicated, ["b"]);
    }

    #[test]
    fn words_missing_doubled_or_reordered_in_a_transcript_are_each_reported() {
        let words = BTreeMap::from([
            // b never reached the transcript; c before a; x twice.
            ("s1".to_owned(), vec!["c".to_owned(), "a".to_owned()]),
            ("s2".to_owned(), vec!["x".to_owned(), "x".to_owned()]),
        ]);
        let reports = check_transcripts(&sent(), &words);
        assert_eq!(reports["s1"].missing, ["b"]);
        assert_eq!(reports["s1"].reordered, [("a".to_owned(), "c".to_owned())]);
        assert_eq!(reports["s2"].doubled, ["x"]);
        let clean = BTreeMap::from([
            ("s1".to_owned(), vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]),
            ("s2".to_owned(), vec!["x".to_owned()]),
        ]);
        assert!(check_transcripts(&sent(), &clean).is_empty());
    }
}
