//! Cron building blocks: schedule parsing and next-run arithmetic, and the prompt scanner that
//! guards job prompts at create time and run time. Pure: nothing here reads the clock or does IO;
//! the tick task that claims and runs due jobs (DESIGN.md §8) wires these together.

pub mod scan;
pub mod schedule;
