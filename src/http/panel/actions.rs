//! The panel's pages that change things, each change a form with the session's CSRF token
//! (checked with the origin before anything is done) and a line in the log naming the key that
//! logged in: people (approve or deny a waiting pairing code, as `hermesd pairing approve` does;
//! revoke an approval), cron jobs (pause, resume, run now, delete, as `hermesd cron` does) and
//! deliveries that failed (retry through the running outbox).

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::super::AppState;
use super::auth::PanelSession;
use super::html::{escape, page, when};
use crate::agent::tools::cronjob::jobs::next_from_now;
use crate::clock::now_ms;
use crate::store::{Again, JobState, JobUpdate};

fn token(csrf: &str) -> String {
    format!("<input type=\"hidden\" name=\"csrf\" value=\"{}\">", escape(csrf))
}

/// A one-button form posting to `action` with `fields` (name, value).
fn button(csrf: &str, action: &str, label: &str, fields: &[(&str, &str)]) -> String {
    let hidden: String = fields
        .iter()
        .map(|(name, value)| format!("<input type=\"hidden\" name=\"{}\" value=\"{}\">", escape(name), escape(value)))
        .collect();
    format!(
        "<form class=\"inline\" method=\"post\" action=\"{}\">{}{hidden}<button type=\"submit\">{}</button></form>",
        escape(action),
        token(csrf),
        escape(label)
    )
}

fn failed(session: &PanelSession, title: &str, e: impl std::fmt::Display) -> Response {
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        title,
        Some(&session.csrf),
        &format!("<p class=\"bad\">{}</p>", escape(&e.to_string())),
    )
}

/// `GET /ui/people`: codes waiting for approval and the people approved.
pub(super) async fn people(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let session = match super::pages::reader(&state, &headers) {
        Ok(session) => session,
        Err(login) => return *login,
    };
    let entries = match state.store.access_entries(now_ms()).await {
        Ok(entries) => entries,
        Err(e) => return failed(&session, "People", e),
    };
    let row = |e: &crate::store::AccessEntry, actions: String| {
        format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{actions}</td></tr>",
            escape(&e.platform),
            escape(&e.user_id),
            escape(e.user_name.as_deref().unwrap_or("")),
            when(e.at)
        )
    };
    let waiting: String = entries
        .iter()
        .filter(|e| !e.approved)
        .map(|e| {
            let fields = [("platform", e.platform.as_str()), ("user", e.user_id.as_str())];
            let actions = format!(
                "{} {}",
                button(&session.csrf, "/ui/people/approve", "Approve", &fields),
                button(&session.csrf, "/ui/people/deny", "Deny", &fields)
            );
            row(e, actions)
        })
        .collect();
    let approved: String = entries
        .iter()
        .filter(|e| e.approved)
        .map(|e| {
            let fields = [("platform", e.platform.as_str()), ("user", e.user_id.as_str())];
            row(e, button(&session.csrf, "/ui/people/revoke", "Revoke", &fields))
        })
        .collect();
    let table = |rows: String, when_title: &str, empty: &str| {
        if rows.is_empty() {
            return format!("<p class=\"muted\">{empty}</p>");
        }
        format!(
            "<table><thead><tr><th>Platform</th><th>User</th><th>Name</th><th>{when_title}</th><th></th></tr></thead><tbody>{rows}</tbody></table>"
        )
    };
    let body = format!(
        "<h2>Waiting for approval</h2>{}<h2>Approved by pairing</h2>{}\
         <p class=\"muted\">People the config lets in (<code>*_ALLOWED_USERS</code>) need no approval.</p>",
        table(waiting, "Code expires", "No code is waiting."),
        table(approved, "Approved", "Nobody was approved by pairing yet.")
    );
    page(StatusCode::OK, "People", Some(&session.csrf), &body)
}

#[derive(Deserialize)]
pub(super) struct PersonForm {
    csrf: String,
    platform: String,
    user: String,
}

/// `POST /ui/people/{approve,deny,revoke}`.
pub(super) async fn person(
    State(state): State<AppState>,
    Path(action): Path<String>,
    headers: HeaderMap,
    Form(form): Form<PersonForm>,
) -> Response {
    let Some(session) = super::checked(&state, &headers, &form.csrf) else { return super::refused() };
    let (platform, user) = (form.platform.as_str(), form.user.as_str());
    let done = match action.as_str() {
        "approve" => state.store.approve_waiting(platform, user, now_ms()).await,
        "deny" => state.store.deny_waiting(platform, user).await,
        "revoke" => state.store.revoke_user(platform, user).await,
        _ => return page(StatusCode::NOT_FOUND, "People", Some(&session.csrf), "<p>No such action.</p>"),
    };
    match done {
        Ok(true) => {
            tracing::info!(key = session.who, action = %action, platform, user, "panel: pairing changed");
            Redirect::to("/ui/people").into_response()
        }
        Ok(false) => page(
            StatusCode::CONFLICT,
            "People",
            Some(&session.csrf),
            "<p>Nothing to change: the code expired or the approval is gone. <a href=\"/ui/people\">Back</a></p>",
        ),
        Err(e) => failed(&session, "People", e),
    }
}

/// `GET /ui/cron`: the jobs with their next and last runs.
pub(super) async fn cron(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let session = match super::pages::reader(&state, &headers) {
        Ok(session) => session,
        Err(login) => return *login,
    };
    let jobs = match state.store.list_jobs().await {
        Ok(jobs) => jobs,
        Err(e) => return failed(&session, "Cron jobs", e),
    };
    if jobs.is_empty() {
        return page(StatusCode::OK, "Cron jobs", Some(&session.csrf), "<p class=\"muted\">No cron job.</p>");
    }
    let rows: String = jobs
        .iter()
        .map(|job| {
            let paused = job.state == JobState::Paused;
            let base = format!("/ui/cron/{}", job.id);
            let toggle = if paused {
                button(&session.csrf, &format!("{base}/resume"), "Resume", &[])
            } else {
                button(&session.csrf, &format!("{base}/pause"), "Pause", &[])
            };
            let last = match (&job.last_run_at, &job.last_status) {
                (Some(at), Some(status)) => format!("{} {}", when(*at), escape(status)),
                _ => "never".into(),
            };
            format!(
                "<tr><td>{}<br><span class=\"muted\">{}</span></td><td>{}</td><td>{}</td><td>{}</td><td>{last}</td><td>{toggle} {} {}</td></tr>",
                escape(&job.name),
                escape(&job.id),
                escape(&job.schedule),
                if paused { "paused".into() } else { job.next_run_at.map(when).unwrap_or_default() },
                escape(&job.deliver),
                button(&session.csrf, &format!("{base}/run"), "Run now", &[]),
                button(&session.csrf, &format!("{base}/delete"), "Delete", &[])
            )
        })
        .collect();
    let body = format!(
        "<table><thead><tr><th>Job</th><th>Schedule</th><th>Next run</th><th>Delivers to</th><th>Last run</th><th></th></tr></thead><tbody>{rows}</tbody></table>"
    );
    page(StatusCode::OK, "Cron jobs", Some(&session.csrf), &body)
}

#[derive(Deserialize)]
pub(super) struct CsrfOnly {
    csrf: String,
}

/// `POST /ui/cron/{id}/{pause,resume,run,delete}`.
pub(super) async fn cron_action(
    State(state): State<AppState>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    Form(form): Form<CsrfOnly>,
) -> Response {
    let Some(session) = super::checked(&state, &headers, &form.csrf) else { return super::refused() };
    let now = now_ms();
    let update = match action.as_str() {
        "pause" => Some(JobUpdate { state: Some((JobState::Paused, None)), ..JobUpdate::default() }),
        "resume" => match state.store.job(&id).await {
            Ok(Some(job)) => match next_from_now(&job.schedule, &job.timezone, chrono::Utc::now()) {
                Ok(Some(next)) => {
                    Some(JobUpdate { state: Some((JobState::Active, Some(next))), ..JobUpdate::default() })
                }
                Ok(None) => {
                    return page(
                        StatusCode::CONFLICT,
                        "Cron jobs",
                        Some(&session.csrf),
                        "<p>Its schedule has no future run.</p>",
                    );
                }
                Err(e) => return failed(&session, "Cron jobs", e),
            },
            Ok(None) => None,
            Err(e) => return failed(&session, "Cron jobs", e),
        },
        "run" => Some(JobUpdate { due_now: Some(now), ..JobUpdate::default() }),
        "delete" => {
            return match state.store.remove_job(&id).await {
                Ok(true) => {
                    tracing::info!(key = session.who, job = %id, "panel: cron job deleted");
                    Redirect::to("/ui/cron").into_response()
                }
                Ok(false) => page(StatusCode::NOT_FOUND, "Cron jobs", Some(&session.csrf), "<p>No such job.</p>"),
                Err(e) => failed(&session, "Cron jobs", e),
            };
        }
        _ => return page(StatusCode::NOT_FOUND, "Cron jobs", Some(&session.csrf), "<p>No such action.</p>"),
    };
    let Some(update) = update else {
        return page(StatusCode::NOT_FOUND, "Cron jobs", Some(&session.csrf), "<p>No such job.</p>");
    };
    match state.store.update_job(&id, &update, now).await {
        Ok(Some(_)) => {
            tracing::info!(key = session.who, job = %id, action = %action, "panel: cron job changed");
            Redirect::to("/ui/cron").into_response()
        }
        Ok(None) => page(StatusCode::NOT_FOUND, "Cron jobs", Some(&session.csrf), "<p>No such job.</p>"),
        Err(e) => failed(&session, "Cron jobs", e),
    }
}

/// `GET /ui/deliveries`: replies that failed or were set aside, with their error.
pub(super) async fn deliveries(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let session = match super::pages::reader(&state, &headers) {
        Ok(session) => session,
        Err(login) => return *login,
    };
    let rows = match state.store.list_deliveries(true, 200).await {
        Ok(rows) => rows,
        Err(e) => return failed(&session, "Deliveries", e),
    };
    if rows.is_empty() {
        return page(StatusCode::OK, "Deliveries", Some(&session.csrf), "<p class=\"muted\">No failed delivery.</p>");
    }
    let body: String = rows
        .iter()
        .map(|row| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"bad\">{}</td><td>{}</td></tr>",
                row.id,
                escape(&row.platform),
                escape(&row.state),
                when(row.created_at),
                escape(row.error.as_deref().unwrap_or_default()),
                button(&session.csrf, &format!("/ui/deliveries/{}/retry", row.id), "Retry", &[])
            )
        })
        .collect();
    let body = format!(
        "<table><thead><tr><th>Id</th><th>Platform</th><th>State</th><th>Written</th><th>Error</th><th></th></tr></thead><tbody>{body}</tbody></table>"
    );
    page(StatusCode::OK, "Deliveries", Some(&session.csrf), &body)
}

/// `POST /ui/deliveries/{id}/retry`.
pub(super) async fn retry(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    headers: HeaderMap,
    Form(form): Form<CsrfOnly>,
) -> Response {
    let Some(session) = super::checked(&state, &headers, &form.csrf) else { return super::refused() };
    match state.store.requeue_delivery(id).await {
        Ok(Again::Ready(row)) => {
            tracing::info!(key = session.who, id, "panel: delivery retried");
            let (chat, turn) = (row.message.chat.clone(), row.turn_id.clone());
            state.outbox.deliver_rows(&chat, &turn, vec![row]);
            Redirect::to("/ui/deliveries").into_response()
        }
        Ok(_) => page(
            StatusCode::CONFLICT,
            "Deliveries",
            Some(&session.csrf),
            "<p>This delivery cannot be retried (gone, not failed, or still unreadable). <a href=\"/ui/deliveries\">Back</a></p>",
        ),
        Err(e) => failed(&session, "Deliveries", e),
    }
}
