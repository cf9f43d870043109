//! Cron (DESIGN.md §8): schedule parsing and next-run arithmetic, the prompt scanner that guards
//! job prompts at create time and run time, job creation shared by the tool and the CLI, and
//! the tick that claims due jobs under the file lock and runs them as turns.

pub mod jobs;
pub mod scan;
pub mod schedule;
pub mod tick;
