//! Retention rounds against a real store and real folders.

use std::fs::File;
use std::time::{Duration, SystemTime};

use super::*;
use crate::store::SqliteStore;

fn touch(path: &Path, age: Duration) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = File::create(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

fn set_dir_age(path: &Path, age: Duration) {
    File::open(path).unwrap().set_modified(SystemTime::now() - age).unwrap();
}

#[tokio::test]
async fn a_round_removes_old_files_and_keeps_young_ones() {
    let home = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    let folders = Folders::under(home.path()).with_tool_tmp(home.path().join("tmp"));
    let day = Duration::from_secs(24 * 3600);
    // The tools' temp dirs live outside the home; their old files go with media's age.
    let old_tmp = home.path().join("tmp").join("0a1b2c").join("build.log");
    let young_tmp = home.path().join("tmp").join("0a1b2c").join("notes.txt");
    touch(&old_tmp, 31 * day);
    touch(&young_tmp, day);
    let old_media = folders.media.join("telegram").join("chat1").join("1_old.jpg");
    let young_media = folders.media.join("telegram").join("chat2").join("2_new.jpg");
    let old_output = folders.cron_output.join("job1").join("run-old.md");
    let young_output = folders.cron_output.join("job1").join("run-new.md");
    touch(&old_media, 31 * day);
    touch(&young_media, day);
    touch(&old_output, 91 * day);
    touch(&young_output, 89 * day);
    set_dir_age(&folders.media.join("telegram").join("chat1"), 31 * day);

    let config = RetentionConfig::default();
    let cancel = CancellationToken::new();
    let pruned = round(&store, &folders, &config, chrono::Utc::now().timestamp_millis(), &cancel).await;
    assert_eq!((pruned.media_files, pruned.cron_output_files), (2, 1), "{pruned:?}");
    assert!(!old_media.exists() && young_media.exists());
    assert!(!old_tmp.exists() && young_tmp.exists());
    assert!(!old_output.exists() && young_output.exists());
    assert!(!folders.media.join("telegram").join("chat1").exists(), "an emptied, stale folder goes");
    assert!(folders.media.exists(), "the top folder stays");

    // A second round finds nothing more.
    let again = round(&store, &folders, &config, chrono::Utc::now().timestamp_millis(), &cancel).await;
    assert_eq!(again, Pruned::default());
}

#[tokio::test]
async fn missing_folders_and_a_cancelled_round_are_harmless() {
    let home = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    let folders = Folders::under(&home.path().join("nowhere"));
    let cancel = CancellationToken::new();
    cancel.cancel();
    let pruned = round(&store, &folders, &RetentionConfig::default(), i64::MAX, &cancel).await;
    assert_eq!(pruned, Pruned::default());
}

#[tokio::test]
async fn what_ties_a_record_to_a_person_outlives_it() {
    let home = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    let folders = Folders::under(home.path());
    let day = Duration::from_secs(24 * 3600);
    let mut config = RetentionConfig::default();
    config.media = crate::config::HumanDuration::secs(60 * 24 * 3600);
    config.outbound = crate::config::HumanDuration::secs(7 * 24 * 3600);
    config.idempotency = crate::config::HumanDuration::secs(7 * 24 * 3600);
    config.inbound_events = crate::config::HumanDuration::secs(2 * 24 * 3600);
    // A sent copy older than its outbound row may be goes with it; a received file stays.
    let sent = folders.media.join("outbound").join("a1").join("chart.png");
    let received = folders.media.join("telegram").join("chat1").join("1_photo.jpg");
    touch(&sent, 10 * day);
    touch(&received, 10 * day);
    let cancel = CancellationToken::new();
    round(&store, &folders, &config, chrono::Utc::now().timestamp_millis(), &cancel).await;
    assert!(!sent.exists() && received.exists());
    // A stored API response never outlives its request's event.
    assert_eq!(idempotency_age(&config), 2 * day);
}
