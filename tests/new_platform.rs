//! What adding a platform costs the host: an example platform, `rec`, written the way a
//! `platforms/*` crate is (its own table type, checks, build and accounts behind
//! `hermesd_platform::section::Section`), checked and built through the same `Registered` calls
//! `hermesd check` and the daemon make for every registered crate, and answered by the real
//! daemon. The last test counts where the host names chat platforms: each crate without a
//! host feature of its own is named on one line of one host file, the registration table.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hermesd::daemon::DaemonOptions;
use hermesd_platform::Platform;
use hermesd_platform::section::{Accounts, BuildContext, Checks, Registered, Section};
use serde::{Deserialize, Serialize};
use support::recording_platform::RecordingPlatform;
use support::{FakeLlm, eventually, start_daemon_with};

/// `[platforms.rec]` of the example platform.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RecConfig {
    enabled: bool,
    /// The variable holding this bot's token.
    token_env: String,
    /// Longest message, in characters.
    max_len: usize,
    accounts: Accounts,
}

impl Default for RecConfig {
    fn default() -> Self {
        Self { enabled: false, token_env: "REC_TOKEN".into(), max_len: 4096, accounts: Accounts::new() }
    }
}

impl Section for RecConfig {
    fn name(&self) -> &'static str {
        "rec"
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn check(&self, checks: &mut Checks<'_>) {
        checks.secret(&self.token_env);
        if self.max_len < 16 {
            checks.key("max_len", "must be at least 16");
        }
    }

    fn build(&self, cx: &BuildContext<'_>) -> Result<Arc<dyn Platform>, String> {
        cx.env.required_secret(&self.token_env)?;
        Ok(RecordingPlatform::new(self.max_len))
    }

    fn accounts(&self) -> &Accounts {
        &self.accounts
    }
}

fn env(vars: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
    vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn each_account_is_the_platforms_table_with_its_own_keys_over_it() {
    let table = "enabled = true\nmax_len = 500\n\n[accounts.work]\ntoken_env = \"REC_WORK_TOKEN\"\n\n\
                 [accounts.home]\ntoken_env = \"REC_HOME_TOKEN\"\nmax_len = 8\n";
    let config: RecConfig = toml::from_str(table).unwrap();
    let registered: &dyn Registered = &config;
    let vars = env(&[("REC_WORK_TOKEN", "w")]);
    assert_eq!(
        registered.problems("platforms.rec", &vars, &|_| Ok(())),
        [
            "platforms.rec.accounts.home: REC_HOME_TOKEN is not set",
            "platforms.rec.accounts.home.max_len: must be at least 16",
        ],
        "each account is checked with the shared keys merged in, under its own key path"
    );
    let home = tempfile::tempdir().unwrap();
    let fixed = env(&[("REC_WORK_TOKEN", "w"), ("REC_HOME_TOKEN", "h")]);
    let built = registered.build_all(&fixed, home.path()).unwrap();
    let lengths: Vec<usize> = built.iter().map(|p| p.capabilities().max_message_len).collect();
    assert_eq!(lengths, [8, 500], "home (sorted first) sets its own max_len, work takes the platform's");

    let nested: RecConfig = toml::from_str("[accounts.a.accounts.b]\nenabled = true\n").unwrap();
    let registered: &dyn Registered = &nested;
    assert_eq!(
        registered.problems("platforms.rec", &fixed, &|_| Ok(())),
        ["platforms.rec.accounts.a: an account cannot have accounts of its own"]
    );
    let unknown: RecConfig = toml::from_str("[accounts.a]\nmax_lenn = 3\n").unwrap();
    let registered: &dyn Registered = &unknown;
    let problems = registered.problems("platforms.rec", &fixed, &|_| Ok(()));
    assert!(problems[0].starts_with("platforms.rec.accounts.a: unknown field `max_lenn`"), "{problems:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_platform_built_through_its_section_is_answered_by_the_daemon() {
    let llm = FakeLlm::echo().await;
    let config: RecConfig = toml::from_str("enabled = true\n").unwrap();
    let registered: &dyn Registered = &config;
    let home = tempfile::tempdir().unwrap();
    let built = registered.build_all(&env(&[("REC_TOKEN", "t")]), home.path()).unwrap();
    let [platform] = built.try_into().unwrap_or_else(|_| panic!("one adapter"));
    let any: Arc<dyn std::any::Any + Send + Sync> = platform.clone();
    let rec = any.downcast::<RecordingPlatform>().unwrap_or_else(|_| panic!("the recording platform"));
    let text = format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"m\"\n",
        llm.base_url()
    );
    let options = DaemonOptions { extra_platforms: vec![platform], ..Default::default() };
    let daemon = start_daemon_with(home.path(), &text, &[("REC_ALLOWED_USERS", "ann")], options).await;
    assert!(eventually(Duration::from_secs(5), || rec.started()).await);
    rec.inject("e1", "ann", "hello from a new platform").await;
    assert!(eventually(Duration::from_secs(10), || !rec.texts().is_empty()).await, "no answer");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rec.texts().len(), 1, "answered once: {:?}", rec.texts());
    daemon.daemon.stop().await;
}

/// The platform crates the host registers, by their platform name.
const CRATES: [&str; 7] = ["telegram", "discord", "slack", "homeassistant", "whatsapp", "signal", "email"];

/// The host's registration table.
const TABLE: &str = "src/config/platforms.rs";

/// The importers of another gateway's home: the platform names there are that product's words
/// (its config keys and `.env` variables), which an importer must spell out to translate them.
const FOREIGN: &str = "src/cli/import/";

/// Every place outside the registration table where non-test host code names a platform
/// crate: its name as a string literal, its crate path, or its `platforms.<name>` table.
fn mentions(root: &Path) -> Vec<(String, String, usize)> {
    let mut found = Vec::new();
    let mut stack = vec![root.join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let relative = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let name = path.file_name().unwrap().to_string_lossy();
            let test_file = matches!(&*name, "tests.rs" | "props.rs") || relative.contains("/tests/");
            if relative == TABLE
                || relative.starts_with(FOREIGN)
                || test_file
                || path.extension().is_none_or(|e| e != "rs")
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Unit tests sit at the end of a file, in a module behind `#[cfg(test)]`.
            let lines: Vec<&str> = text.lines().collect();
            let end = lines
                .windows(2)
                .position(|pair| pair[0] == "#[cfg(test)]" && pair[1].contains("mod "))
                .unwrap_or(lines.len());
            for line in lines[..end].iter().map(|l| l.trim()).filter(|l| !l.starts_with("//")) {
                for platform in CRATES {
                    let forms =
                        [format!("\"{platform}\""), format!("hermesd_{platform}"), format!("platforms.{platform}")];
                    let count = forms.iter().map(|form| line.matches(form.as_str()).count()).sum::<usize>();
                    if count > 0 {
                        found.push((relative.clone(), platform.to_owned(), count));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn a_platform_crate_is_named_by_the_host_only_in_the_registration_table() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let table = std::fs::read_to_string(root.join(TABLE)).unwrap();
    for platform in CRATES {
        let lines = table.lines().filter(|l| l.trim_start().starts_with(&format!("{platform}: \""))).count();
        assert_eq!(lines, 1, "{platform} has one line in the registration table");
    }
    let found = mentions(&root);
    let total: usize = found.iter().map(|(_, _, n)| n).sum();
    let report: Vec<String> = found.iter().map(|(file, platform, n)| format!("{file}: {platform} ×{n}")).collect();
    println!("platform names in host code outside the registration table: {total}\n{}", report.join("\n"));
    // Home Assistant is the one crate with a host feature over it: the `homeassistant` tools use
    // its connection and its watched changes have a delivery target.
    let named: Vec<&str> =
        found.iter().map(|(_, platform, _)| platform.as_str()).filter(|p| *p != "homeassistant").collect();
    assert!(named.is_empty(), "a chat platform is named outside the registration table:\n{}", report.join("\n"));
    assert!(total < 20, "{total} platform names in host code:\n{}", report.join("\n"));
}
