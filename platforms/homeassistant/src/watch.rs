//! Per-entity cooldown of watched changes: after a prompt for an entity, its changes within
//! `cooldown_seconds` are dropped (a flapping sensor makes one prompt, not hundreds). The map is
//! bounded; when full, entries past their cooldown go first, then the oldest.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Most entities remembered at once.
pub(crate) const MAX_TRACKED: usize = 4096;

/// When each entity last made a prompt.
#[derive(Debug)]
pub(crate) struct Cooldowns {
    cooldown: Duration,
    last: Mutex<HashMap<String, Instant>>,
}

impl Cooldowns {
    pub(crate) fn new(cooldown: Duration) -> Self {
        Self { cooldown, last: Mutex::default() }
    }

    /// Whether a change of `entity` may make a prompt now; if so, its cooldown starts.
    pub(crate) fn admit(&self, entity: &str, now: Instant) -> bool {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if last.get(entity).is_some_and(|&at| now.duration_since(at) < self.cooldown) {
            return false;
        }
        if !last.contains_key(entity) && last.len() >= MAX_TRACKED {
            let cooldown = self.cooldown;
            last.retain(|_, at| now.duration_since(*at) < cooldown);
            if last.len() >= MAX_TRACKED
                && let Some(oldest) = last.iter().min_by_key(|(_, at)| **at).map(|(e, _)| e.clone())
            {
                last.remove(&oldest);
            }
        }
        last.insert(entity.to_owned(), now);
        true
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.last.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_prompt_per_entity_per_cooldown() {
        let cooldowns = Cooldowns::new(Duration::from_secs(30));
        let start = Instant::now();
        assert!(cooldowns.admit("binary_sensor.door", start));
        assert!(!cooldowns.admit("binary_sensor.door", start + Duration::from_secs(29)));
        assert!(cooldowns.admit("binary_sensor.window", start + Duration::from_secs(1)));
        assert!(cooldowns.admit("binary_sensor.door", start + Duration::from_secs(30)));
    }

    #[tokio::test(start_paused = true)]
    async fn the_map_stays_bounded() {
        let cooldowns = Cooldowns::new(Duration::from_secs(3600));
        let start = Instant::now();
        for n in 0..MAX_TRACKED + 10 {
            assert!(cooldowns.admit(&format!("sensor.s{n}"), start + Duration::from_millis(n as u64)));
        }
        assert_eq!(cooldowns.len(), MAX_TRACKED);
        assert!(cooldowns.admit("sensor.s0", start + Duration::from_secs(10)), "the oldest was evicted");
    }
}
