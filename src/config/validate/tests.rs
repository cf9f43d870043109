//! `Config::validate`: every problem listed at once, each naming its key.

use std::collections::HashMap;

use super::*;

fn env(vars: &[(&str, &str)]) -> Env {
    Env::from_map(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<HashMap<_, _>>())
}

#[test]
fn the_session_sweep_needs_an_interval() {
    let mut config = Config::default();
    config.sessions.sweep_interval = super::super::HumanDuration::secs(0);
    assert_eq!(config.validate(&env(&[])), ["sessions.sweep_interval: must be at least 1s"]);
}

#[test]
fn skills_caps_and_names_are_checked() {
    let mut config = Config::default();
    assert!(config.validate(&env(&[])).is_empty(), "the defaults are valid");
    config.skills.index_chars = 10;
    config.skills.disabled = vec!["Deploy Now".into()];
    config.skills.platform_disabled.insert("telegram".into(), vec!["ok-name".into(), String::new()]);
    let problems = config.validate(&env(&[]));
    assert!(problems.iter().any(|p| p.starts_with("skills.index_chars: 10 is outside")), "{problems:?}");
    assert!(problems.iter().any(|p| p.starts_with("skills.disabled: \"Deploy Now\"")), "{problems:?}");
    assert!(problems.iter().any(|p| p.starts_with("skills.platform_disabled.telegram: \"\"")), "{problems:?}");
    assert_eq!(problems.len(), 3, "{problems:?}");
}

#[test]
#[cfg(feature = "slack")]
fn slack_needs_the_tokens_of_its_mode() {
    let socket = Config::parse("[platforms.slack]\nenabled = true\nsocket_idle_reconnect = \"10s\"").unwrap();
    let problems = socket.validate(&env(&[("SLACK_BOT_TOKEN", "xoxp-user-secret")]));
    assert_eq!(
        problems,
        [
            "platforms.slack: SLACK_BOT_TOKEN must start with xoxb-",
            "platforms.slack: SLACK_APP_TOKEN is not set",
            "platforms.slack.socket_idle_reconnect: must be at least 1m",
        ]
    );
    let ok = socket.validate(&env(&[("SLACK_BOT_TOKEN", "xoxb-1"), ("SLACK_APP_TOKEN", "xapp-1")]));
    assert_eq!(ok.len(), 1, "{ok:?}");
    let events = Config::parse("[platforms.slack]\nenabled = true\nmode = \"events\"").unwrap();
    let problems = events.validate(&env(&[("SLACK_BOT_TOKEN", "xoxb-1")]));
    assert_eq!(problems, ["platforms.slack: SLACK_SIGNING_SECRET is not set"]);
    assert!(events.validate(&env(&[("SLACK_BOT_TOKEN", "xoxb-1"), ("SLACK_SIGNING_SECRET", "s")])).is_empty());
}

#[test]
#[cfg(feature = "whatsapp")]
fn whatsapp_lists_every_missing_secret_and_bad_field() {
    let broken = "[platforms.whatsapp]\nenabled = true\napi_url = \"graph\"\napi_version = \"23\"\nmax_file_mb = 0";
    let problems = Config::parse(broken).unwrap().validate(&env(&[("WHATSAPP_APP_SECRET", "s")]));
    assert_eq!(
        problems,
        [
            "platforms.whatsapp: WHATSAPP_ACCESS_TOKEN is not set",
            "platforms.whatsapp: WHATSAPP_VERIFY_TOKEN is not set",
            "platforms.whatsapp.phone_number_id: \"\" must be the numeric id of the business number",
            "platforms.whatsapp.api_url: \"graph\" is not an http(s) URL",
            "platforms.whatsapp.api_version: \"23\" must look like \"v26.0\"",
            "platforms.whatsapp.max_file_mb: must be positive",
        ]
    );
    let good = Config::parse("[platforms.whatsapp]\nenabled = true\nphone_number_id = \"106540352242922\"").unwrap();
    let secrets = [("WHATSAPP_ACCESS_TOKEN", "t"), ("WHATSAPP_APP_SECRET", "s"), ("WHATSAPP_VERIFY_TOKEN", "v")];
    assert!(good.validate(&env(&secrets)).is_empty());
    assert!(good.check_target("whatsapp:15551234567", false).is_ok());
}

#[test]
#[cfg(feature = "email")]
fn email_lists_every_problem_and_plain_only_on_loopback() {
    let broken = Config::parse(
        "[platforms.email]\nenabled = true\nimap_url = \"imap://mail.example.com\"\n\
         smtp_url = \"smtp://mail.example.com:25\"\naddress = \"agent\"\nidle_timeout = \"45m\"",
    )
    .unwrap();
    let problems = broken.validate(&env(&[]));
    for expected in [
        "platforms.email: EMAIL_PASSWORD is not set",
        "platforms.email.imap_url:",
        "platforms.email.smtp_url:",
        "platforms.email.address:",
        "platforms.email.idle_timeout:",
        "platforms.email.authserv_id:",
    ] {
        assert!(problems.iter().any(|p| p.starts_with(expected)), "{expected} missing in {problems:?}");
    }
    assert_eq!(problems.len(), 6, "{problems:?}");
    let fine = Config::parse(
        "[platforms.email]\nenabled = true\nimap_url = \"imap://127.0.0.1:1143\"\n\
         smtp_url = \"smtps://smtp.example.com\"\naddress = \"agent@example.com\"\nauthserv_id = \"mx.example.com\"",
    )
    .unwrap();
    assert_eq!(fine.validate(&env(&[("EMAIL_PASSWORD", "pw")])), Vec::<String>::new());
    assert!(fine.check_target("email:ann@example.org", false).is_ok());
}

#[test]
fn defaults_are_valid() {
    assert_eq!(Config::default().validate(&env(&[])), Vec::<String>::new());
}

#[test]
fn lists_every_problem() {
    let config = Config::parse(
        r#"
        [http]
        listen = "0.0.0.0:80"
        [model]
        provider = "chat_completions"
        base_url = "ftp://x"
        name = ""
        api_key_env = "NOPE_KEY"
        [agent]
        max_iterations = 0
        [compression]
        threshold = 1.5
        "#,
    )
    .unwrap();
    let problems = config.validate(&env(&[]));
    for needle in ["API_SERVER_KEY", "base_url", "model.name", "NOPE_KEY", "max_iterations", "threshold"] {
        assert!(problems.iter().any(|p| p.contains(needle)), "no problem mentions {needle}: {problems:#?}");
    }
    assert_eq!(problems.len(), 6, "{problems:#?}");
}

#[test]
fn discord_checks_token_url_and_channel_ids() {
    let config = Config::parse(
        "[platforms.discord]\nenabled = true\napi_url = \"discord.com\"\nmax_file_mb = 0\nignored_channels = [\"general\"]\n",
    )
    .unwrap();
    let problems = config.validate(&env(&[("DISCORD_ALLOWED_CHANNELS", "123, x9")]));
    if cfg!(feature = "discord") {
        for needle in ["DISCORD_BOT_TOKEN", "api_url", "max_file_mb", "\"general\"", "\"x9\""] {
            assert!(problems.iter().any(|p| p.contains(needle)), "no problem mentions {needle}: {problems:#?}");
        }
        assert_eq!(problems.len(), 5, "{problems:#?}");
    } else {
        assert!(problems.iter().any(|p| p.contains("no discord adapter")), "{problems:#?}");
    }
}

#[test]
fn unknown_keys_rejected() {
    let err = Config::parse("[agent]\nmax_iteratons = 3\n").unwrap_err();
    assert!(err.to_string().contains("max_iteratons"), "{err}");
}

#[test]
fn example_config_is_valid() {
    let text = include_str!("../../../deploy/hermesd.example.toml");
    let config = Config::parse(text).unwrap();
    let problems = config.validate(&env(&[("OPENROUTER_API_KEY", "k"), ("OLLAMA_API_KEY", "k")]));
    assert_eq!(problems, Vec::<String>::new());
}

#[test]
fn example_config_documents_every_key() {
    fn keys(prefix: &str, value: &toml::Value, out: &mut Vec<String>) {
        if let toml::Value::Table(table) = value {
            for (key, inner) in table {
                out.push(format!("{prefix}{key}"));
                keys(&format!("{prefix}{key}."), inner, out);
            }
        }
    }
    let model = "provider = \"chat_completions\"\nbase_url = \"http://x\"\nname = \"m\"\napi_key_env = \"K\"";
    let config = Config { model: Some(toml::from_str(model).unwrap()), ..Config::default() };
    let defaults = toml::Value::try_from(&config).unwrap();
    let mut all = Vec::new();
    keys("", &defaults, &mut all);
    let example = include_str!("../../../deploy/hermesd.example.toml");
    let missing: Vec<_> = all
        .iter()
        .filter(|path| {
            let leaf = path.rsplit('.').next().unwrap();
            !example.contains(&format!("{leaf} ="))
                && !example.contains(&format!("[{path}]"))
                && !example.contains(&format!("[{path}."))
        })
        .collect();
    assert!(missing.is_empty(), "keys not documented in deploy/hermesd.example.toml: {missing:?}");
}

#[test]
fn reset_overrides_pick_most_specific() {
    let config = Config::parse(
        r#"
        [sessions]
        reset = "idle"
        idle_minutes = 30
        [[sessions.overrides]]
        platform = "telegram"
        reset = "daily"
        [[sessions.overrides]]
        platform = "telegram"
        chat_type = "group"
        reset = "both"
        idle_minutes = 5
        "#,
    )
    .unwrap();
    use hermesd_platform::ChatType;
    let s = &config.sessions;
    assert_eq!(s.policy_for("api", ChatType::Dm).reset, ResetMode::Idle);
    assert_eq!(s.policy_for("telegram", ChatType::Dm).reset, ResetMode::Daily);
    let group = s.policy_for("telegram", ChatType::Group);
    assert_eq!((group.reset, group.idle_minutes), (ResetMode::Both, 5));
}

#[test]
fn max_parked_turns_is_bounded() {
    let problems = |value: &str| {
        let config = Config::parse(&format!("[agent]\nmax_parked_turns = {value}\n")).expect("parses");
        config.validate(&Env::from_map(Default::default()))
    };
    let named = |list: Vec<String>| list.iter().any(|p| p.starts_with("agent.max_parked_turns"));
    assert!(named(problems("0")));
    assert!(named(problems("4097")));
    assert!(!named(problems("1")) && !named(problems("4096")));
    assert_eq!(Config::parse("").expect("parses").agent.max_parked_turns, 64);
}

#[test]
fn an_accounts_profile_must_exist_and_its_targets_are_checked() {
    let text = r#"
[platforms.telegram]
enabled = true

[platforms.telegram.accounts.work]
token_env = "TG_WORK"
profile = "wrok"

[platforms.telegram.accounts.home]
token_env = "TG_HOME"

[profiles.work]

[cron]
default_deliver = "telegram@work:42"
"#;
    let config = Config::parse(text).unwrap();
    let problems = config.validate(&env(&[("TG_WORK", "1:w"), ("TG_HOME", "1:h")]));
    assert_eq!(problems, ["platforms.telegram.accounts.work.profile: no profile \"wrok\" (profiles: default, work)"]);
    let fixed = Config::parse(&text.replace("wrok", "work").replace("telegram@work:42", "telegram@nobody:42")).unwrap();
    let problems = fixed.validate(&env(&[("TG_WORK", "1:w"), ("TG_HOME", "1:h")]));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("platform \"telegram@nobody\" is not enabled"), "{problems:?}");
    let profiles = fixed.platforms.profiles(&env(&[("TG_WORK", "1:w"), ("TG_HOME", "1:h")]));
    assert_eq!(profiles, HashMap::from([("telegram@work".to_owned(), "work".to_owned())]));
    assert!(fixed.profile_advice().is_empty(), "an account names the profile: {:?}", fixed.profile_advice());
}
