//! `hermesd check`: every configuration problem with its file and line (exit 78), and warnings
//! for state files other local users can read.
//!
//! Never changes anything on disk: it says which `chmod` to run instead.
//!
//! It also prints who the admins are (`access::admin_report`) and the sandbox's state.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{EXIT_CONFIG, Loaded};
use hermesd_platform::AccessRules;

use crate::config::{Config, Paths};
use crate::vocab::origin::Origin;

/// Validate the loaded config and report open permissions; exit 78 listing every problem.
pub(super) fn check(loaded: &Loaded) -> ExitCode {
    for warning in permission_warnings(&loaded.paths, &loaded.config) {
        eprintln!("warning: {warning}");
    }
    let problems: Vec<String> = loaded.config.validate(&loaded.env).iter().map(|p| loaded.locator.locate(p)).collect();
    for note in loaded.config.advice(&loaded.env) {
        println!("note: {note}");
    }
    let platform_notes = loaded.config.platforms.sections().into_iter().flat_map(|s| s.advice(&loaded.env));
    for note in platform_notes.chain(loaded.config.profile_advice()) {
        println!("note: {note}");
    }
    let workdir = loaded.paths.workdir(&loaded.config.tools);
    for note in crate::agent::tools::memory::upgrade_notes(&loaded.config.memory, &loaded.paths.home, &workdir) {
        println!("note: {note}");
    }
    if problems.is_empty() {
        let source = if loaded.paths.config.exists() {
            loaded.paths.config.display().to_string()
        } else {
            format!("embedded defaults ({} not found)", loaded.paths.config.display())
        };
        println!("configuration OK: {source}");
        for line in crate::access::admin_report(&loaded.env, chat_platforms(&loaded.config)) {
            println!("admins {line}");
        }
        let sandbox = crate::sandbox::Sandbox::new(loaded.config.tools.terminal.sandbox, None);
        println!("{}", sandbox.describe());
        for warning in sandbox.kernel_warnings() {
            eprintln!("hermesd: warning: {warning}");
        }
        if sandbox.problem().is_some() {
            eprintln!(
                "hermesd: the tools' sandbox is unavailable; set tools.terminal.sandbox = \"none\" to accept running tools unconfined"
            );
            return ExitCode::from(EXIT_CONFIG);
        }
        ExitCode::SUCCESS
    } else {
        report(&loaded.paths, &problems);
        ExitCode::from(EXIT_CONFIG)
    }
}

/// The enabled platforms people talk through, each with its access rules, for the admin report.
fn chat_platforms(config: &Config) -> Vec<(&'static str, AccessRules)> {
    let api = config.platforms.api.enabled.then_some((Origin::API, AccessRules::DEFAULT));
    let sections =
        config.platforms.sections().into_iter().filter(|s| s.enabled()).map(|s| (s.name(), s.access_rules()));
    api.into_iter().chain(sections).chain([(Origin::TERMINAL, AccessRules::DEFAULT)]).collect()
}

/// Print configuration problems, one a line, to stderr.
pub(super) fn report(paths: &Paths, problems: &[String]) {
    let count = problems.len();
    let noun = if count == 1 { "problem" } else { "problems" };
    eprintln!("hermesd: invalid configuration ({}), {count} {noun}:", paths.config.display());
    for problem in problems {
        eprintln!("  - {problem}");
    }
}

/// The state hermesd keeps private: the home, the store and its WAL files, `.env`, and the
/// folders holding conversations and their output.
fn private_paths(paths: &Paths, config: &Config) -> Vec<PathBuf> {
    let database = paths.database(&config.store);
    let mut all = vec![paths.home.clone(), paths.home.join(".env")];
    for suffix in ["", "-wal", "-shm"] {
        let mut name = database.clone().into_os_string();
        name.push(suffix);
        all.push(PathBuf::from(name));
    }
    all.extend(["memory", "media", "deliveries", "cron"].iter().map(|dir| paths.home.join(dir)));
    all
}

/// One warning for each existing private path that group or other users can access, with the
/// command that fixes it.
pub(super) fn permission_warnings(paths: &Paths, config: &Config) -> Vec<String> {
    private_paths(paths, config).iter().filter_map(|path| open_to_others(path)).collect()
}

fn open_to_others(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 == 0 {
        return None;
    }
    let fix = if meta.is_dir() { "chmod -R go-rwx" } else { "chmod 600" };
    Some(format!(
        "{} is open to other users (mode {mode:04o}); run: {fix} {}",
        path.display(),
        shell_quote(&path.display().to_string())
    ))
}

fn shell_quote(text: &str) -> String {
    if text.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+,:@".contains(c)) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn warns_for_open_state_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let paths = Paths { home: home.clone(), config: home.join("config.toml") };
        let config = Config::default();
        set_mode(&home, 0o700);
        assert_eq!(permission_warnings(&paths, &config), Vec::<String>::new());

        set_mode(&home, 0o755);
        std::fs::write(home.join("state.db"), "").unwrap();
        set_mode(&home.join("state.db"), 0o644);
        std::fs::write(home.join(".env"), "").unwrap();
        set_mode(&home.join(".env"), 0o600);
        std::fs::create_dir(home.join("memory")).unwrap();
        set_mode(&home.join("memory"), 0o750);
        let warnings = permission_warnings(&paths, &config);
        assert_eq!(warnings.len(), 3, "{warnings:#?}");
        assert!(warnings[0].contains("(mode 0755); run: chmod -R go-rwx"), "{warnings:#?}");
        assert!(warnings[1].ends_with(&format!("(mode 0644); run: chmod 600 {}", home.join("state.db").display())));
        assert!(warnings[2].contains("memory is open to other users (mode 0750)"), "{warnings:#?}");
    }

    #[test]
    fn quotes_paths_for_the_shell() {
        assert_eq!(shell_quote("/var/lib/hermesd"), "/var/lib/hermesd");
        assert_eq!(shell_quote("/tmp/it's here"), r"'/tmp/it'\''s here'");
    }
}
