//! `hermesd profiles list | show <name>`: the agents this config defines (the top level is the
//! profile `default`), each resolved against the default: its folder, persona, model chain,
//! toolsets and agent settings. Reads only the config and the profile folders.

use std::process::ExitCode;

use clap::Subcommand;

use super::Loaded;
use crate::config::Profile;

/// `hermesd profiles …`.
#[derive(Debug, Subcommand)]
pub enum ProfilesCommand {
    /// Every profile, one a line.
    List,
    /// One profile in full.
    Show {
        /// The profile's name (`default` for the top-level configuration).
        name: String,
    },
}

/// Run a `profiles` subcommand.
pub(super) fn run(loaded: &Loaded, command: ProfilesCommand) -> ExitCode {
    match command {
        ProfilesCommand::List => {
            println!("{:<20} {:<32} persona", "profile", "model");
            for name in loaded.config.profile_names() {
                let Some(profile) = loaded.config.profile(name, &loaded.paths) else { continue };
                println!("{:<20} {:<32} {}", profile.name, model_name(&profile), profile.soul.describe());
            }
            ExitCode::SUCCESS
        }
        ProfilesCommand::Show { name } => match loaded.config.profile(&name, &loaded.paths) {
            Some(profile) => {
                print!("{}", show(&profile));
                ExitCode::SUCCESS
            }
            None => {
                let known = loaded.config.profile_names().join(", ");
                eprintln!("hermesd: no profile {name:?} (profiles: {known})");
                ExitCode::FAILURE
            }
        },
    }
}

fn model_name(profile: &Profile<'_>) -> String {
    profile.models.first().map_or_else(|| "(no model configured)".to_owned(), |m| m.name.clone())
}

/// The full description of one profile.
fn show(profile: &Profile<'_>) -> String {
    let mut out =
        format!("profile: {}\nfolder: {}\npersona: {}\n", profile.name, profile.dir.display(), profile.soul.describe());
    if profile.models.is_empty() {
        out.push_str("model: (no model configured)\n");
    }
    for (i, model) in profile.models.iter().enumerate() {
        let role = if i == 0 { "model".to_owned() } else { format!("fallback {i}") };
        out.push_str(&format!("{role}: {} at {} ({:?})\n", model.name, model.base_url, model.provider));
    }
    out.push_str(&format!(
        "toolsets: {}\nbusy_policy: {:?}\nmax_iterations: {}\nskills: {}\nmemory: {}\n",
        profile.toolsets.join(", "),
        profile.busy_policy,
        profile.max_iterations,
        profile.skills().display(),
        profile.memory().display(),
    ));
    out
}
