//! Cron (DESIGN.md §8): job creation shared by the tool and the CLI, and the tick that claims due
//! jobs under the file lock and runs them as turns. Schedules and the prompt scanner that guards
//! job prompts at create time and run time are words of the vocabulary floor
//! (`vocab::schedule`, `vocab::scan`).

pub mod jobs;
pub mod tick;
