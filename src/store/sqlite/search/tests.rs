//! Scoped search against a real SQLite file: the caller's hit survives a crowd of other people's
//! matches, and nothing outside the scope ever comes back.

use std::time::Duration;

use hermesd_platform::ChatType;

use crate::store::sqlite::SqliteStore;
use crate::store::{Compaction, SearchScope, SearchStore, SessionInfo, SessionKey, SessionStore};
use crate::vocab::message::{Message, Role};

async fn open(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 2).await.unwrap()
}

fn dm(platform: &str, user: &str) -> SessionKey {
    SessionKey {
        key: format!("agent:main:{platform}:dm:{user}"),
        platform: platform.into(),
        chat_id: user.into(),
        chat_type: ChatType::Dm,
        thread_id: None,
        user_id: None,
    }
}

fn group(platform: &str, chat: &str, user: Option<&str>) -> SessionKey {
    let mut key = format!("agent:main:{platform}:group:{chat}");
    if let Some(user) = user {
        key = format!("{key}:{user}");
    }
    SessionKey {
        key,
        platform: platform.into(),
        chat_id: chat.into(),
        chat_type: ChatType::Group,
        thread_id: None,
        user_id: user.map(Into::into),
    }
}

fn scope(key: &SessionKey) -> SearchScope<'_> {
    SearchScope { session_key: &key.key, person: None }
}

/// Write `count` messages with the same text into a session in one transaction (fast enough for
/// thousands; the FTS triggers queue them for indexing like any other message).
async fn bulk(store: &SqliteStore, session: &str, role: &str, text: &str, count: i64, at: i64) {
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?4) \
         INSERT INTO messages (session_id, role, content, created_at) SELECT ?1, ?2, ?3 || CASE WHEN ?4 > 1 THEN ' #' || i ELSE '' END, ?5 FROM n",
    )
    .bind(session)
    .bind(role)
    .bind(text)
    .bind(count)
    .bind(at)
    .execute(&mut *store.writer.get().await.unwrap())
    .await
    .unwrap();
}

async fn say(store: &SqliteStore, session: &SessionInfo, role: Role, text: &str, at: i64) {
    bulk(store, &session.id, role.as_str(), text, 1, at).await;
}

#[tokio::test]
async fn own_hit_is_found_among_thousands_of_other_peoples() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    for user in 0..40 {
        let other = store.start_session(&dm("telegram", &format!("other{user}")), 1).await.unwrap();
        bulk(&store, &other.id, "user", "invoice paid", 100, 2).await;
    }
    // The caller's hit is in an earlier session of the same key (before a `/new`), compacted.
    let me = dm("telegram", "me");
    let earlier = store.start_session(&me, 3).await.unwrap();
    say(&store, &earlier, Role::User, "the invoice number is INV-7731", 4).await;
    say(&store, &earlier, Role::Assistant, "noted", 5).await;
    say(&store, &earlier, Role::User, "thanks", 6).await;
    let live = store.load_transcript(&earlier.id).await.unwrap();
    let summary = Message::text(Role::User, "[summary] an invoice number was noted");
    let compaction = Compaction { from: live[0].position, to: live[1].position, summary: &summary, system_prompt: "p" };
    store.compact(&earlier.id, &compaction, 7).await.unwrap();
    let current = store.start_session(&me, 8).await.unwrap();
    say(&store, &current, Role::User, "hello again", 9).await;

    let started = std::time::Instant::now();
    let hits = store.search_scoped("invoice", &scope(&me), 5).await.unwrap();
    let took = started.elapsed();
    let texts: Vec<&str> = hits.iter().map(|h| h.snippet.as_str()).collect();
    assert_eq!(hits.len(), 2, "{texts:?}");
    assert!(hits.iter().all(|h| h.session_id == earlier.id), "{hits:?}");
    assert!(texts.iter().any(|t| t.contains("INV-7731")), "{texts:?}");
    assert!(texts.iter().any(|t| t.contains("[summary]")), "the compaction summary is searched too: {texts:?}");
    // A whole-gateway search for the same word is crowded out by others (the reason for the scope).
    assert!(store.search("invoice", None, 50).await.unwrap().iter().all(|h| h.session_id != earlier.id));
    assert!(took < Duration::from_secs(2), "scoped search over 4000 matches took {took:?}");

    // Another user's search never sees the caller's messages.
    let other = dm("telegram", "other3");
    let theirs = store.search_scoped("INV-7731", &scope(&other), 50).await.unwrap();
    assert!(theirs.is_empty(), "{theirs:?}");
    let theirs = store.search_scoped("7731", &scope(&other), 50).await.unwrap();
    assert!(theirs.is_empty(), "substring fallback stays in scope too: {theirs:?}");
}

#[tokio::test]
async fn substring_fallback_and_query_syntax_stay_in_scope() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let (me, them) = (dm("slack", "U1"), dm("slack", "U2"));
    let mine = store.start_session(&me, 1).await.unwrap();
    let theirs = store.start_session(&them, 1).await.unwrap();
    say(&store, &mine, Role::User, "我们明天去北京开会", 2).await;
    say(&store, &theirs, Role::User, "北京的天气很好", 2).await;
    say(&store, &mine, Role::Assistant, "The password-reset flow uses tokens", 3).await;
    say(&store, &theirs, Role::Assistant, "a password-reset email was sent", 3).await;

    let hits = store.search_scoped("北京", &scope(&me), 10).await.unwrap();
    assert_eq!(hits.iter().map(|h| h.session_id.as_str()).collect::<Vec<_>>(), [mine.id.as_str()]);
    assert_eq!(hits[0].snippet, "我们明天去[北京]开会", "a two-character word is tested as a substring");
    let hits = store.search_scoped("北京开会", &scope(&me), 10).await.unwrap();
    assert_eq!(hits.iter().map(|h| h.session_id.as_str()).collect::<Vec<_>>(), [mine.id.as_str()]);
    // A part of a word is found by the trigram table, still only in the caller's sessions.
    let hits = store.search_scoped("asswor", &scope(&me), 10).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!((hits[0].session_id.as_str(), hits[0].role.as_str()), (mine.id.as_str(), "assistant"));
    assert_eq!(hits[0].snippet, "The p[asswor]d-reset flow uses tokens", "the whole substring is marked");
    // In a long message the mark still holds the whole substring, with context around it.
    let long = format!("{} an invoice number {}", "word ".repeat(60), "more ".repeat(60));
    say(&store, &mine, Role::User, &long, 4).await;
    let hits = store.search_scoped("nvoic", &scope(&me), 10).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0].snippet.contains("[nvoic]e number"), "{}", hits[0].snippet);
    let hits = store.search("nvoic", None, 10).await.unwrap();
    assert!(hits.len() == 1 && hits[0].snippet.contains("[nvoic]"), "{hits:?}");
    // FTS5 syntax in the query is taken literally, never as operators.
    for query in ["\"password", "password OR tokens", "NEAR(password", "*", "col:password", "-"] {
        let hits = store.search_scoped(query, &scope(&them), 10).await.unwrap();
        assert!(hits.iter().all(|h| h.session_id == theirs.id), "{query}: {hits:?}");
    }
    assert!(store.search_scoped("   ", &scope(&me), 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_private_chat_also_reads_the_persons_own_group_sessions_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let me = dm("telegram", "7");
    let private = store.start_session(&me, 1).await.unwrap();
    let my_group = store.start_session(&group("telegram", "-100", Some("7")), 1).await.unwrap();
    let their_group = store.start_session(&group("telegram", "-100", Some("8")), 1).await.unwrap();
    let shared_group = store.start_session(&group("telegram", "-200", None), 1).await.unwrap();
    let other_platform = store.start_session(&group("discord", "g1", Some("7")), 1).await.unwrap();
    // The same person's session in a group a route gives to another profile: another agent's.
    let mut work_group = group("telegram", "-300", Some("7"));
    work_group.key = work_group.key.replacen("agent:main:", "agent:work:", 1);
    let other_profile = store.start_session(&work_group, 1).await.unwrap();
    for session in [&private, &my_group, &their_group, &shared_group, &other_platform, &other_profile] {
        say(&store, session, Role::User, &format!("budget meeting notes in {}", session.key), 2).await;
    }
    let person = SearchScope { session_key: &me.key, person: Some(("telegram", "7")) };
    let mut found: Vec<String> =
        store.search_scoped("budget", &person, 50).await.unwrap().into_iter().map(|h| h.session_id).collect();
    found.sort();
    let mut expected = vec![private.id.clone(), my_group.id.clone()];
    expected.sort();
    assert_eq!(found, expected);
    // From the group, only the group session: the private chat never surfaces where others read.
    let from_group = group("telegram", "-100", Some("7"));
    let found: Vec<String> = store
        .search_scoped("budget", &scope(&from_group), 50)
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.session_id)
        .collect();
    assert_eq!(found, std::slice::from_ref(&my_group.id));
    // And from the work profile's side, the default profile's private chat is out of scope.
    let from_work = SearchScope { session_key: &work_group.key, person: Some(("telegram", "7")) };
    let found: Vec<String> =
        store.search_scoped("budget", &from_work, 50).await.unwrap().into_iter().map(|h| h.session_id).collect();
    assert_eq!(found, std::slice::from_ref(&other_profile.id));
    // The operator's views narrow to one profile the same way.
    let listed = store.list_sessions_with(Some("agent:work:"), 50).await.unwrap();
    assert_eq!(listed.iter().map(|s| &s.id).collect::<Vec<_>>(), [&other_profile.id]);
    assert_eq!(store.list_sessions_with(None, 50).await.unwrap().len(), 6);
    let hits = store.search_with("budget", None, Some("agent:work:"), 50).await.unwrap();
    assert_eq!(hits.iter().map(|h| &h.session_id).collect::<Vec<_>>(), [&other_profile.id]);
    assert_eq!(store.search_with("udget meet", None, Some("agent:main:"), 50).await.unwrap().len(), 5, "trigram too");
}

#[tokio::test]
async fn tool_results_are_left_out_and_context_comes_from_the_hits_session() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let me = dm("api", "u1");
    let mine = store.start_session(&me, 1).await.unwrap();
    let other = store.start_session(&dm("api", "u2"), 1).await.unwrap();
    say(&store, &mine, Role::User, "first: pick a colour", 1).await;
    say(&store, &other, Role::User, "unrelated words in between", 1).await;
    say(&store, &mine, Role::Assistant, "how about teal", 2).await;
    say(&store, &mine, Role::Tool, "[2026-01-01] user: teal walls", 3).await;
    say(&store, &other, Role::User, "teal is their colour too", 3).await;
    say(&store, &mine, Role::User, "yes, teal for the kitchen", 4).await;
    say(&store, &mine, Role::Assistant, "teal it is", 5).await;
    say(&store, &mine, Role::User, "and the ceiling white", 6).await;

    let hits = store.search_scoped("teal", &scope(&me), 10).await.unwrap();
    assert_eq!(hits.len(), 3, "{hits:?}");
    assert!(hits.iter().all(|h| h.role != "tool" && h.session_id == mine.id), "{hits:?}");
    let kitchen = hits.iter().find(|h| h.snippet.contains("kitchen")).unwrap();
    let around = store.messages_around(kitchen.message_id, 1).await.unwrap();
    let texts: Vec<&str> = around.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, ["how about teal", "yes, teal for the kitchen", "teal it is"]);
    let wider: Vec<String> =
        store.messages_around(kitchen.message_id, 10).await.unwrap().into_iter().map(|m| m.content).collect();
    assert_eq!(wider.len(), 5, "{wider:?}");
    assert!(store.messages_around(-1, 3).await.unwrap().is_empty());
}

#[test]
fn short_query_snippets_mark_the_match_and_cut_long_text() {
    assert_eq!(super::mark("Go to Oslo", "os"), "Go to [Os]lo");
    assert_eq!(
        super::mark("Oslo is far, go to it", "far oslo"),
        "Oslo is [far], go to it",
        "the query's first word found"
    );
    let long = format!("{}needle{}", "é".repeat(100), "x".repeat(100));
    let snippet = super::mark(&long, "NEEDLE");
    assert_eq!(snippet, format!("…{}[needle]{}…", "é".repeat(40), "x".repeat(40)));
}

/// Bytes of both full-text indexes.
async fn fts_bytes(store: &SqliteStore) -> i64 {
    let (bytes,): (i64,) = sqlx::query_as(
        "SELECT COALESCE(SUM(LENGTH(block)), 0) FROM (SELECT block FROM messages_fts_data \
         UNION ALL SELECT block FROM messages_fts_trigram_data)",
    )
    .fetch_one(&mut *store.writer.get().await.unwrap())
    .await
    .unwrap();
    bytes
}

#[tokio::test]
async fn pruned_messages_leave_the_full_text_index() {
    use crate::store::RetentionStore;
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let empty = fts_bytes(&store).await;
    let me = dm("telegram", "1");
    let old = store.start_session(&me, 1).await.unwrap();
    for round in 0..20 {
        bulk(&store, &old.id, "user", &format!("round {round} of words about invoices and kayaks"), 200, 2).await;
    }
    store.drain_index().await;
    let full = fts_bytes(&store).await;
    store.start_session(&me, 10).await.unwrap();
    while store.prune_sessions(5, 50).await.unwrap() > 0 {}
    store.reclaim_space(1_000).await.unwrap();
    store.reclaim_space(1_000).await.unwrap();
    let after = fts_bytes(&store).await;
    assert!(after - empty < (full - empty) / 10, "index still holds deleted rows: {empty} → {full} → {after} bytes");
    assert!(store.search_scoped("kayaks", &scope(&me), 10).await.unwrap().is_empty());
}
