//! The vocabulary floor: the words every other floor speaks — the one internal message format
//! (`message`: `Message`, `Role`, `ToolCall`, `ImageRef`, `Reasoning`), the markers a transcript
//! carries, and a delivery target as written (`target`). It imports nothing of hermesd, so the
//! store, config and the agent runtime can all sit above it (DESIGN.md §2, ARCHITECTURE.md's
//! floor table).

pub mod message;
pub mod target;
