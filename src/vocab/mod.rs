//! The vocabulary floor: the words every other floor speaks — the one internal message format
//! (`message`: `Message`, `Role`, `ToolCall`, `ImageRef`, `Reasoning`), the markers a transcript
//! carries, a delivery target as written (`target`), a schedule as written (`schedule`: cron
//! expressions, intervals, one-shots, catch-up), the prompt-injection scan that cron jobs,
//! skills and context files pass (`scan`), and a value a reload replaces whole (`live`). It
//! imports nothing of hermesd, so the store, config and the agent runtime can all sit above it
//! (DESIGN.md §2, ARCHITECTURE.md's floor table).

pub mod live;
pub mod message;
pub mod origin;
pub mod scan;
pub mod schedule;
pub mod target;
