//! Files to API clients: a `MEDIA:` line becomes a link in the completion, served under the API
//! key from the stored copy; nothing else under the data dir can be reached through it.

use serde_json::json;

use crate::support::{FakeLlm, client, config_for, start_daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_gets_a_file_as_a_link_served_under_the_api_key() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("workspace/users/api/ann");
    std::fs::create_dir_all(&work).unwrap();
    let pdf = super::binary(30_000, 8);
    std::fs::write(work.join("report.pdf"), &pdf).unwrap();
    let llm = FakeLlm::builder().reply("Here it is.\nMEDIA:report.pdf").start().await;
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[("API_SERVER_KEY", "sekret-key-123")]).await;
    let http = client();
    let body = json!({"model": "hermes-agent", "user": "ann", "messages": [{"role": "user", "content": "the report"}]});
    let response = http
        .post(format!("{}/v1/chat/completions", d.base))
        .bearer_auth("sekret-key-123")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: serde_json::Value = response.json().await.unwrap();
    let text = answer["choices"][0]["message"]["content"].as_str().unwrap().to_owned();
    assert!(text.starts_with("Here it is.\n\n[report.pdf](/v1/files/"), "{text}");
    let link = text.split("](").nth(1).and_then(|rest| rest.strip_suffix(')')).unwrap().to_owned();
    assert!(link.ends_with("/report.pdf"), "{link}");

    let url = format!("{}{link}", d.base);
    assert_eq!(http.get(&url).send().await.unwrap().status(), 401, "the key is required");
    let file = http.get(&url).bearer_auth("sekret-key-123").send().await.unwrap();
    assert_eq!(file.status(), 200);
    assert_eq!(file.headers()["content-type"], "application/pdf");
    assert_eq!(file.headers()["x-content-type-options"], "nosniff");
    assert_eq!(file.bytes().await.unwrap().to_vec(), pdf);

    // Only stored copies: no other id or name shape reaches the disk.
    std::fs::write(home.path().join("state-secret.txt"), "secret").unwrap();
    for path in [
        "/v1/files/..%2F..%2F/state-secret.txt",
        "/v1/files/abc/..",
        "/v1/files/zz/report.pdf",
        "/v1/files/%2E%2E/state-secret.txt",
    ] {
        let response = http.get(format!("{}{path}", d.base)).bearer_auth("sekret-key-123").send().await.unwrap();
        assert_eq!(response.status(), 404, "{path}");
    }
    d.daemon.stop().await;
}
