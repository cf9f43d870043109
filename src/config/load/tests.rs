//! Tests of the config loader: every structural problem in one run, with lines and paths.

use super::*;

const BROKEN: &str = r#"# a config with four mistakes in four sections
[compression]
threshold = 0.5
colour = "blue"

[agent]
busy_plicy = "steer"
max_iterations = "ninety"

[platforms.telegram]
mode = "pollling"

[[webhooks]]
route = "gh"
secret_env = "S"
prompt = "p"
deliver = "local"
rate_limit_per_minute = -1
"#;

#[test]
fn every_problem_is_reported_in_one_run_with_lines() {
    let file = ConfigFile::from_text(BROKEN, "config.toml");
    assert_eq!(
        file.problems,
        vec![
            "config.toml:4: compression.colour: unknown key (known keys: `threshold`)".to_owned(),
            "config.toml:7: agent.busy_plicy: unknown key (did you mean `busy_policy`?)".to_owned(),
            "config.toml:8: agent.max_iterations: invalid type: string \"ninety\", expected u32".to_owned(),
            "config.toml:11: platforms.telegram.mode: unknown value \"pollling\" (did you mean `polling`?)".to_owned(),
            "config.toml:18: webhooks[0].rate_limit_per_minute: invalid value: integer `-1`, expected u32".to_owned(),
        ],
    );
    // What was right is kept; what was wrong is left at its default.
    assert_eq!(file.config.compression.threshold, 0.5);
    assert_eq!(file.config.agent.max_iterations, 90);
    assert_eq!(file.config.webhooks.len(), 1);
    assert_eq!(file.config.webhooks[0].route, "gh");
}

#[test]
fn a_valid_file_has_no_problems() {
    let file = ConfigFile::from_text("[agent]\nbusy_policy = \"steer\"\n", "c.toml");
    assert!(file.problems.is_empty(), "{:?}", file.problems);
    assert_eq!(file.config.agent.busy_policy, crate::config::BusyPolicy::Steer);
}

#[test]
fn a_bad_required_key_is_not_reported_again_as_missing() {
    let text = "[model]\nprovider = \"chat_complete\"\nbase_url = \"http://x\"\nname = \"m\"\n";
    let file = ConfigFile::from_text(text, "c.toml");
    assert_eq!(file.problems.len(), 1, "{:?}", file.problems);
    assert!(file.problems[0].starts_with("c.toml:2: model.provider: unknown value"), "{:?}", file.problems);
    assert!(file.config.model.is_none());

    // Another key missing from the same table is still reported.
    let text = "[model]\nprovider = \"chat_complete\"\nbase_url = \"http://x\"\n";
    let file = ConfigFile::from_text(text, "c.toml");
    assert_eq!(file.problems.len(), 2, "{:?}", file.problems);
    assert_eq!(file.problems[0], "c.toml:1: model: missing key `name`");
}

#[test]
fn missing_required_keys_and_bad_array_items_are_located() {
    let text = "[[webhooks]]\nroute = \"a\"\n\n[platforms.telegram]\nmention_patterns = [\"x\", 3]\n";
    let file = ConfigFile::from_text(text, "c.toml");
    // serde names one missing field at a time; all of them are listed.
    assert!(
        file.problems.contains(&"c.toml:1: webhooks[0]: missing keys `secret_env`, `prompt`, `deliver`".to_owned()),
        "{:?}",
        file.problems
    );
    assert!(
        file.problems.iter().any(|p| p.starts_with("c.toml:5: platforms.telegram.mention_patterns[1]: invalid type")),
        "{:?}",
        file.problems
    );
    assert!(file.config.webhooks.is_empty());
    assert_eq!(file.config.platforms.telegram.mention_patterns, vec!["x".to_owned()]);
}

#[test]
fn syntax_errors_are_listed_with_the_structure_problems() {
    let file = ConfigFile::from_text("[agent]\nmax_iterations = 3\nmax_iterations = 4\n[cron]\ntick = 5\n", "c.toml");
    assert!(file.problems.iter().any(|p| p.starts_with("c.toml:3: duplicate key")), "{:?}", file.problems);
    assert!(file.problems.iter().any(|p| p.starts_with("c.toml:5: cron.tick: invalid type")), "{:?}", file.problems);
}

#[test]
fn validate_problems_get_the_line_of_their_key() {
    let file = ConfigFile::from_text("\n[agent]\nmax_iterations = 0\n", "c.toml");
    let env = Env::from_map(Default::default());
    let problems = file.all_problems(&env);
    assert!(problems.contains(&"c.toml:3: agent.max_iterations: must be at least 1".to_owned()), "{problems:?}");
}

#[test]
fn suggestions_only_for_near_misses() {
    let keys = ["busy_policy".to_owned(), "max_iterations".to_owned()];
    assert_eq!(closest("busy_plicy", &keys), Some("busy_policy"));
    assert_eq!(closest("MAX_ITERATIONS", &keys), Some("max_iterations"));
    assert_eq!(closest("colour", &keys), None);
    assert_eq!(edit_distance("kitten", "sitting"), 3);
    assert_eq!(edit_distance("", "abc"), 3);
}
