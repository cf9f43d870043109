//! The vocabulary floor: the words every other floor speaks — the one internal message format
//! (`message`: `Message`, `Role`, `ToolCall`, `ImageRef`, `Reasoning`) and the markers a
//! transcript carries. It imports nothing of hermesd, so the store and the agent runtime can
//! both sit above it (DESIGN.md §2, ARCHITECTURE.md's floor table).

pub mod message;
