//! Which mail must never be answered (auto-replies, bounces, bulk and list mail, no-reply
//! senders, our own mail) and whether a sender is authenticated, judged from raw headers.
//!
//! Only an `Authentication-Results` header carrying our own server's authserv-id is believed:
//! anyone can write such a header into a message, so all others are ignored.
//!
//! Never answered: `Auto-Submitted` (other than `no`), `X-Autoreply`/`X-Autorespond`, an empty
//! Return-Path, `multipart/report`, mailer-daemon or postmaster, `Precedence: bulk|list|junk`,
//! `List-Id`/`List-Unsubscribe`, no-reply senders and our own address. Authentication is the DMARC
//! verdict of the topmost `Authentication-Results` header carrying our `authserv_id`.

/// Why a message gets no turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Skip {
    /// `Auto-Submitted` (not `no`), `X-Autoreply`, `X-Autorespond`.
    AutoReply,
    /// An empty return path, `multipart/report`, or a mailer daemon.
    Bounce,
    /// `Precedence: bulk|list|junk`, `List-Id`, `List-Unsubscribe`.
    Bulk,
    /// A `noreply`-style sender.
    NoReply,
    /// Our own address.
    Own,
    /// No usable From address.
    NoSender,
    /// No `dmarc=pass` from our own server (the reason says what was found).
    Unauthenticated(String),
    /// Not parseable as mail.
    Unparseable,
}

impl Skip {
    /// A short label for logs.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Skip::AutoReply => "auto-reply",
            Skip::Bounce => "bounce",
            Skip::Bulk => "bulk",
            Skip::NoReply => "no-reply sender",
            Skip::Own => "own address",
            Skip::NoSender => "no sender",
            Skip::Unauthenticated(_) => "unauthenticated",
            Skip::Unparseable => "unparseable",
        }
    }
}

/// A header's value with folding undone and surrounding space trimmed.
pub(crate) fn unfold(value: &str) -> String {
    value.split(['\r', '\n']).map(str::trim).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")
}

fn values<'a>(headers: &'a [(String, String)], name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

fn has(headers: &[(String, String)], name: &str) -> bool {
    values(headers, name).next().is_some()
}

/// Why a message from `from` (lowercase address) with `headers` must not be answered, if so.
/// `content_type` is the top-level MIME type (`multipart/report`), lowercase.
pub(crate) fn loop_reason(headers: &[(String, String)], from: &str, own: &str, content_type: &str) -> Option<Skip> {
    if from.eq_ignore_ascii_case(own) {
        return Some(Skip::Own);
    }
    let return_path_empty = values(headers, "Return-Path").any(|v| {
        let v = unfold(v);
        v.is_empty() || v == "<>"
    });
    let local = from.split('@').next().unwrap_or_default().to_ascii_lowercase();
    if return_path_empty
        || content_type.starts_with("multipart/report")
        || matches!(local.as_str(), "mailer-daemon" | "postmaster")
    {
        return Some(Skip::Bounce);
    }
    let auto = values(headers, "Auto-Submitted").any(|v| !unfold(v).to_ascii_lowercase().starts_with("no"));
    if auto || has(headers, "X-Autoreply") || has(headers, "X-Autorespond") {
        return Some(Skip::AutoReply);
    }
    let bulk_precedence = values(headers, "Precedence")
        .any(|v| matches!(unfold(v).to_ascii_lowercase().as_str(), "bulk" | "list" | "junk" | "auto_reply"));
    if bulk_precedence || has(headers, "List-Id") || has(headers, "List-Unsubscribe") {
        return Some(Skip::Bulk);
    }
    let squashed: String = local.chars().filter(char::is_ascii_alphanumeric).collect();
    if squashed.starts_with("noreply") || squashed.starts_with("donotreply") || squashed == "notifications" {
        return Some(Skip::NoReply);
    }
    None
}

/// What our own server said about a message's sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// `dmarc=pass` for the From domain.
    Pass,
    /// A header from our server, without a pass (the result it gave).
    Fail(String),
    /// No header from our server at all.
    Missing,
}

/// The DMARC verdict of the topmost `Authentication-Results` header whose authserv-id is
/// `authserv_id` (our receiving server adds its header on top, above anything the sender wrote).
pub(crate) fn dmarc_verdict(headers: &[(String, String)], authserv_id: &str, from_domain: &str) -> Verdict {
    let Some(results) = values(headers, "Authentication-Results")
        .map(|v| strip_comments(&unfold(v)))
        .find(|v| authserv(v).is_some_and(|id| id.eq_ignore_ascii_case(authserv_id.trim())))
    else {
        return Verdict::Missing;
    };
    let mut verdict = Verdict::Fail("no dmarc result".into());
    for resinfo in results.split(';').skip(1) {
        let mut words = resinfo.split_whitespace();
        let Some((method, result)) = words.next().and_then(|w| w.split_once('=')) else { continue };
        if !method.eq_ignore_ascii_case("dmarc") {
            continue;
        }
        let result = result.to_ascii_lowercase();
        if result != "pass" {
            return Verdict::Fail(format!("dmarc={result}"));
        }
        let domain =
            words.find_map(|w| w.strip_prefix("header.from=")).map(|d| d.trim_matches('"').to_ascii_lowercase());
        match domain {
            Some(domain) if !domain.eq_ignore_ascii_case(from_domain) => {
                return Verdict::Fail(format!("dmarc=pass for {domain}, not {from_domain}"));
            }
            _ => verdict = Verdict::Pass,
        }
    }
    verdict
}

/// The authserv-id: the first word before the first `;`.
fn authserv(results: &str) -> Option<&str> {
    results.split(';').next()?.split_whitespace().next()
}

/// Removes RFC 5322 comments (parenthesised, nestable) from a header value.
fn strip_comments(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut depth = 0usize;
    let mut escaped = false;
    for c in value.chars() {
        if escaped {
            escaped = false;
            if depth == 0 {
                out.push(c);
            }
            continue;
        }
        match c {
            '\\' => {
                escaped = true;
                if depth == 0 {
                    out.push(c);
                }
            }
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
    }

    const OWN: &str = "agent@example.com";

    #[test]
    fn loops_are_recognised() {
        type Case = (&'static str, Vec<(String, String)>, &'static str, &'static str, Option<Skip>);
        let cases: &[Case] = &[
            ("plain mail", h(&[("Subject", "hi")]), "ann@example.org", "text/plain", None),
            ("auto-submitted no", h(&[("Auto-Submitted", " no")]), "ann@example.org", "text/plain", None),
            (
                "auto-replied",
                h(&[("Auto-Submitted", "auto-replied")]),
                "ann@example.org",
                "text/plain",
                Some(Skip::AutoReply),
            ),
            (
                "auto-generated",
                h(&[("auto-submitted", "Auto-Generated")]),
                "a@x.org",
                "text/plain",
                Some(Skip::AutoReply),
            ),
            ("x-autoreply", h(&[("X-Autoreply", "yes")]), "a@x.org", "text/plain", Some(Skip::AutoReply)),
            ("x-autorespond", h(&[("X-Autorespond", "x")]), "a@x.org", "text/plain", Some(Skip::AutoReply)),
            ("empty return path", h(&[("Return-Path", "<>")]), "a@x.org", "text/plain", Some(Skip::Bounce)),
            ("report", h(&[]), "a@x.org", "multipart/report", Some(Skip::Bounce)),
            ("mailer-daemon", h(&[]), "MAILER-DAEMON@x.org", "text/plain", Some(Skip::Bounce)),
            ("precedence bulk", h(&[("Precedence", "bulk")]), "a@x.org", "text/plain", Some(Skip::Bulk)),
            ("precedence list", h(&[("Precedence", "List")]), "a@x.org", "text/plain", Some(Skip::Bulk)),
            ("precedence junk", h(&[("Precedence", "junk")]), "a@x.org", "text/plain", Some(Skip::Bulk)),
            ("list-id", h(&[("List-Id", "<dev.lists.x.org>")]), "a@x.org", "text/plain", Some(Skip::Bulk)),
            (
                "list-unsubscribe",
                h(&[("List-Unsubscribe", "<mailto:u@x.org>")]),
                "a@x.org",
                "text/plain",
                Some(Skip::Bulk),
            ),
            ("noreply", h(&[]), "no-reply@shop.example", "text/plain", Some(Skip::NoReply)),
            ("donotreply", h(&[]), "do_not_reply@bank.example", "text/plain", Some(Skip::NoReply)),
            ("own", h(&[]), "Agent@Example.com", "text/plain", Some(Skip::Own)),
            ("return path set", h(&[("Return-Path", "<a@x.org>")]), "a@x.org", "text/plain", None),
        ];
        for (name, headers, from, ctype, expected) in cases {
            assert_eq!(&loop_reason(headers, from, OWN, ctype), expected, "case {name}");
        }
    }

    #[test]
    fn only_our_servers_verdict_counts() {
        let ours = "mx.example.com";
        let pass = (
            "Authentication-Results",
            "mx.example.com;\r\n dkim=pass header.d=x.org;\r\n dmarc=pass (p=reject) header.from=x.org",
        );
        assert_eq!(dmarc_verdict(&h(&[pass]), ours, "x.org"), Verdict::Pass);
        let forged = ("Authentication-Results", "mx.evil.example; dmarc=pass header.from=x.org");
        assert_eq!(dmarc_verdict(&h(&[forged]), ours, "x.org"), Verdict::Missing);
        let fail = ("Authentication-Results", "mx.example.com 1; spf=fail; dmarc=fail header.from=x.org");
        assert_eq!(dmarc_verdict(&h(&[fail]), ours, "x.org"), Verdict::Fail("dmarc=fail".into()));
        // Ours on top wins over a forged pass with our id further down.
        let forged_ours = ("Authentication-Results", "mx.example.com; dmarc=pass header.from=x.org");
        assert_eq!(dmarc_verdict(&h(&[fail, forged_ours]), ours, "x.org"), Verdict::Fail("dmarc=fail".into()));
        let other_domain = ("Authentication-Results", "mx.example.com; dmarc=pass header.from=evil.org");
        assert!(matches!(dmarc_verdict(&h(&[other_domain]), ours, "x.org"), Verdict::Fail(_)));
        let none = ("Authentication-Results", "mx.example.com; spf=pass smtp.mailfrom=x.org");
        assert!(matches!(dmarc_verdict(&h(&[none]), ours, "x.org"), Verdict::Fail(_)));
        let commented =
            ("Authentication-Results", "mx.example.com (our mx; really); dmarc=pass (ok) header.from=x.org");
        assert_eq!(dmarc_verdict(&h(&[commented]), ours, "X.org"), Verdict::Pass);
        assert_eq!(dmarc_verdict(&h(&[]), ours, "x.org"), Verdict::Missing);
    }

    #[test]
    fn comments_are_stripped() {
        assert_eq!(strip_comments("a (b (c)) d"), "a  d");
        assert_eq!(strip_comments("a \\(b\\) c"), "a \\(b\\) c");
        assert_eq!(strip_comments("unbalanced ) ("), "unbalanced ) ");
    }
}
