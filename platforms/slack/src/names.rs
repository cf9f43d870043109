//! Display names of Slack users: message events carry only a user id (sometimes a profile), so
//! the adapter asks `users.info` once per user and remembers the answer in a capped map. A name
//! it cannot learn (no `users:read` scope, an error) stays unknown and the host shows the id.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use hermesd_platform::Redactor;
use slack_morphism::prelude::*;

use crate::api::{Client, map_error};

/// Most users remembered; the map is emptied when full (names are cheap to ask again).
const CAPACITY: usize = 2_000;

/// User id → display name (`None`: asked, no name to be had).
#[derive(Debug, Default)]
pub(crate) struct UserNames {
    known: Mutex<HashMap<String, Option<String>>>,
}

impl UserNames {
    /// The display name of `user`: remembered, else asked of Slack.
    pub(crate) async fn name(
        &self,
        client: &Client,
        token: &SlackApiToken,
        redactor: &Redactor,
        user: &str,
    ) -> Option<String> {
        if let Some(known) = self.known.lock().unwrap_or_else(PoisonError::into_inner).get(user) {
            return known.clone();
        }
        let request = SlackApiUsersInfoRequest::new(SlackUserId(user.to_owned()));
        let name = match client.open_session(token).users_info(&request).await {
            Ok(response) => best_name(&response.user),
            Err(error) => {
                let error = map_error(&error, &format!("users.info for {user}"), redactor);
                tracing::debug!(platform = crate::NAME, %error, "user name unknown");
                None
            }
        };
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        if known.len() >= CAPACITY {
            known.clear();
        }
        known.insert(user.to_owned(), name.clone());
        name
    }
}

/// The name people see in Slack: the display name, else the real name, else the user name.
fn best_name(user: &SlackUser) -> Option<String> {
    let profile = user.profile.as_ref();
    let candidates = [
        profile.and_then(|p| p.display_name.clone()),
        profile.and_then(|p| p.real_name.clone()),
        user.real_name.clone(),
        user.name.clone(),
    ];
    candidates.into_iter().flatten().map(|name| name.trim().to_owned()).find(|name| !name.is_empty())
}
