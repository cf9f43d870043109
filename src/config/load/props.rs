//! Properties of config loading: no file text makes parsing or validation panic, and the
//! documented example config always loads.

use proptest::prelude::*;

use crate::config::{Config, Env};

/// TOML-ish text built from real keys and tables with arbitrary values.
fn config_text() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        prop::sample::select(vec![
            "[http]",
            "[model]",
            "[agent]",
            "[tools]",
            "[memory]",
            "[retention]",
            "[[webhooks]]",
            "[platforms.telegram]",
            "[sessions]",
            "[[sessions.overrides]]",
            "[mcp.servers.x]",
            "[auxiliary.summary]",
            "[compression]",
        ])
        .prop_map(str::to_owned),
        (
            prop::sample::select(vec![
                "listen",
                "provider",
                "base_url",
                "name",
                "max_iterations",
                "busy_policy",
                "threshold",
                "scope",
                "inbound_events",
                "route",
                "secret_env",
                "enabled",
                "idle_minutes",
                "command",
                "timeout",
                "toolsets",
            ]),
            prop::sample::select(vec![
                "\"x\"",
                "0",
                "-1",
                "1e309",
                "true",
                "[]",
                "[\"a\"]",
                "\"30d\"",
                "\"0s\"",
                "{}",
                "\"http://127.0.0.1:1\"",
                "\"chat_completions\"",
                "18446744073709551616",
                "\"\\u0000\"",
                "",
            ]),
        )
            .prop_map(|(k, v)| format!("{k} = {v}")),
        "\\PC{0,20}",
    ];
    prop::collection::vec(line, 0..16).prop_map(|lines| lines.join("\n"))
}

proptest! {
    #[test]
    fn no_config_text_makes_loading_panic(text in config_text()) {
        if let Ok(config) = Config::parse(&text) {
            let _ = config.validate(&Env::from_map(Default::default()));
        }
    }
}

#[test]
fn the_example_config_loads() {
    let text = include_str!("../../../deploy/hermesd.example.toml");
    Config::parse(text).expect("the example config parses");
}
