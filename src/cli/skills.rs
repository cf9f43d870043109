//! `hermesd skills list | show | install | remove`: the operator's side of skills, straight on
//! `$HERMESD_HOME/skills`. A running daemon sees changes at once (skills are read on demand);
//! sessions already running keep the index they started with.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::Loaded;
use crate::agent::skills::Skills;

/// `hermesd skills …`.
#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Every skill with its description, where it shows, and the ones that could not be loaded.
    List,
    /// A skill's instructions and files, or one of its files.
    Show {
        /// The skill's name.
        name: String,
        /// A file inside the skill's folder.
        file: Option<String>,
    },
    /// Copy a skill folder (holding SKILL.md) into $HERMESD_HOME/skills.
    Install {
        /// The folder to copy.
        dir: PathBuf,
        /// Install under this name (default: the front matter's `name`, else the folder's name).
        #[arg(long)]
        name: Option<String>,
        /// Replace an installed skill of the same name.
        #[arg(long)]
        replace: bool,
    },
    /// Delete an installed skill and its folder.
    Remove {
        /// The skill's name.
        name: String,
    },
}

pub(super) fn run(loaded: Loaded, command: SkillsCommand) -> ExitCode {
    let skills = Skills::new(loaded.paths.skills(), loaded.config.skills.clone(), crate::router::commands::names());
    let result = match command {
        SkillsCommand::List => Ok(list(&skills)),
        SkillsCommand::Show { name, file } => skills.view(&name, file.as_deref(), None).map_err(|e| e.to_string()),
        SkillsCommand::Install { dir, name, replace } => {
            skills.install(&dir, name.as_deref(), replace).map_err(|e| e.to_string()).map(|installed| {
                let mut out = format!(
                    "installed {} ({} files) into {}",
                    installed.name,
                    installed.files,
                    installed.dir.display()
                );
                for warning in installed.warnings {
                    out.push_str(&format!("\nwarning: {warning}"));
                }
                out
            })
        }
        SkillsCommand::Remove { name } => {
            skills.remove(&name).map(|dir| format!("removed {name} ({})", dir.display())).map_err(|e| e.to_string())
        }
    };
    super::report_outcome(result)
}

fn list(skills: &Skills) -> String {
    let listing = skills.scan();
    if listing.skills.is_empty() && listing.problems.is_empty() {
        return format!("no skills in {}", skills.root().display());
    }
    let mut out = String::new();
    for meta in &listing.skills {
        let mut notes = Vec::new();
        if !meta.platforms.is_empty() {
            notes.push(format!("platforms: {}", meta.platforms.join(", ")));
        }
        if let Err(e) = skills.visibility(meta, None) {
            notes.push(e.to_string());
        }
        for (platform, names) in &skills.config().platform_disabled {
            if names.contains(&meta.name) {
                notes.push(format!("disabled on {platform}"));
            }
        }
        let notes = if notes.is_empty() { String::new() } else { format!(" [{}]", notes.join("; ")) };
        out.push_str(&format!("{} — {}{notes}\n", meta.name, meta.description));
    }
    for problem in &listing.problems {
        out.push_str(&format!("not loaded: {problem}\n"));
    }
    out.trim_end().to_owned()
}
