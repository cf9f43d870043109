//! Cron (DESIGN.md §8): the tick that claims due jobs under the file lock and runs them as
//! turns. Jobs are made by the `cronjob` tool and `hermesd cron` alike, under the rules of
//! `agent::tools::cronjob::jobs`; schedules and the prompt scanner that guards job prompts at
//! create time and run time are words of the vocabulary floor (`vocab::schedule`,
//! `vocab::scan`).

pub mod tick;
