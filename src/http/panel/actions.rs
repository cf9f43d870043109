//! The panel's pages that change things, each change a form with the session's CSRF token
//! (checked with the origin before anything is done) and a line in the log naming the key that
//! logged in: people (approve or deny a waiting pairing code, as `hermesd pairing approve` does;
//! revoke an approval), cron jobs (pause, resume, run now, delete, as `hermesd cron` does) and
//! deliveries that failed (retry through the running outbox); and the config in force (MCP
//! servers' `env` and `headers` values masked), with a reload button.

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::super::AppState;
use super::auth::PanelSession;
use super::html::{escape, page, when};
use crate::agent::tools::cronjob::jobs::{JobRules, JobSpec, next_from_now, prepare};
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
    super::html::failed(&session.csrf, title, e)
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
        "<h2>Waiting for approval</h2>{}<h2>Approved by pairing</h2>{}{}{}",
        table(waiting, "Code expires", "No code is waiting."),
        table(approved, "Approved", "Nobody was approved by pairing yet."),
        configured(&state),
        super::people::usage_table(&state).await
    );
    page(StatusCode::OK, "People", Some(&session.csrf), &body)
}

/// Who the config lets in and who its admins are, per adapter (they need no approval).
fn configured(state: &AppState) -> String {
    let Some(reloader) = state.reloader.as_ref() else { return String::new() };
    let list = |ids: &[String]| if ids.is_empty() { "—".to_owned() } else { escape(&ids.join(", ")) };
    let rows: String = reloader
        .access()
        .report()
        .iter()
        .map(|r| {
            let allowed = match (r.everyone, r.roles.is_empty()) {
                (true, _) => "everyone (<code>ALLOW_ALL_USERS</code>)".to_owned(),
                (false, true) => list(&r.users),
                (false, false) => format!("{}; roles {}", list(&r.users), list(&r.roles)),
            };
            format!(
                "<tr><td>{}</td><td>{allowed}</td><td>{}</td><td>{}</td></tr>",
                escape(&r.platform),
                if r.pairs_strangers { "pairing code" } else { "ignored" },
                escape(&r.admins)
            )
        })
        .collect();
    format!(
        "<h2>Let in by the config</h2><p class=\"muted\">The <code>*_ALLOWED_USERS</code> lists and admins in \
         force (a reload reads them again); these people need no approval.</p><table><thead><tr><th>Platform</th>\
         <th>Allowed</th><th>A stranger's DM</th><th>Admins</th></tr></thead><tbody>{rows}</tbody></table>"
    )
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
    let mut body = if jobs.is_empty() {
        "<p class=\"muted\">No cron job.</p>".to_owned()
    } else {
        format!(
            "<table><thead><tr><th>Job</th><th>Schedule</th><th>Next run</th><th>Delivers to</th><th>Last run</th><th></th></tr></thead><tbody>{rows}</tbody></table>"
        )
    };
    body.push_str(&add_form(&session.csrf, None, &NewJobForm::default()));
    page(StatusCode::OK, "Cron jobs", Some(&session.csrf), &body)
}

/// The form that adds a job, holding what was typed (`problem`: why it was refused).
fn add_form(csrf: &str, problem: Option<&str>, typed: &NewJobForm) -> String {
    let problem =
        problem.map(|p| format!("<p class=\"bad\" role=\"alert\">Not added: {}</p>", escape(p))).unwrap_or_default();
    let field = |id: &str, label: &str, value: &str, hint: &str, required: bool| {
        format!(
            "<p><label for=\"{id}\">{label}</label><br><input id=\"{id}\" name=\"{id}\" value=\"{}\"{}> \
             <span class=\"muted\">{hint}</span></p>",
            escape(value),
            if required { " required" } else { "" }
        )
    };
    format!(
        "<h2>Add a job</h2>{problem}<form method=\"post\" action=\"/ui/cron\">{}{}\
         <p><label for=\"prompt\">Prompt</label><br><textarea id=\"prompt\" name=\"prompt\" rows=\"3\" required>{}</textarea></p>\
         {}{}{}<p><button type=\"submit\">Add</button></p></form>",
        token(csrf),
        field(
            "schedule",
            "Schedule",
            &typed.schedule,
            "as <code>hermesd cron add</code> takes it: <code>30m</code>, <code>every 2h</code>, <code>0 9 * * 1-5</code>, <code>2026-12-24T18:00</code>",
            true
        ),
        escape(&typed.prompt),
        field("name", "Name", &typed.name, "optional", false),
        field(
            "deliver",
            "Deliver to",
            &typed.deliver,
            "optional: <code>local</code>, <code>telegram</code>, <code>telegram:CHAT_ID</code>; default <code>[cron] default_deliver</code>",
            false
        ),
        field("repeat", "Runs", &typed.repeat, "optional: stop after this many", false)
    )
}

#[derive(Deserialize, Default)]
pub(super) struct NewJobForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    schedule: String,
    #[serde(default)]
    prompt: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    deliver: String,
    #[serde(default)]
    repeat: String,
}

/// `POST /ui/cron`: add a job under the same rules as `hermesd cron add` (the schedule forms,
/// the prompt scan, a target the config can deliver to); refused, the form comes back with what
/// was typed and why.
pub(super) async fn cron_add(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<NewJobForm>,
) -> Response {
    let Some(session) = super::checked(&state, &headers, &form.csrf) else { return super::refused() };
    let Some(reloader) = state.reloader.as_ref() else {
        return failed(&session, "Cron jobs", "this daemon cannot read its config to check a job");
    };
    let (config, paths) = reloader.accepted();
    let refuse = |problem: &str| {
        page(StatusCode::BAD_REQUEST, "Cron jobs", Some(&session.csrf), &add_form(&session.csrf, Some(problem), &form))
    };
    let tz: chrono_tz::Tz = match config.cron.timezone.parse() {
        Ok(tz) => tz,
        Err(_) => return refuse(&format!("[cron] timezone {:?} is not a time zone", config.cron.timezone)),
    };
    let repeat = match form.repeat.trim() {
        "" => None,
        n => match n.parse::<i64>() {
            Ok(n) if n > 0 => Some(n),
            _ => return refuse("runs must be a whole number above 0"),
        },
    };
    let Some(resolved) = config.profile(crate::config::DEFAULT_PROFILE, paths) else {
        return refuse("the default profile is missing");
    };
    let models: Vec<String> = resolved.models.iter().map(|m| m.name.clone()).collect();
    // There is no originating chat in the panel: `origin` means `local` here, as on the CLI.
    let default = match config.cron.default_deliver.as_str() {
        "origin" => "local",
        other => other,
    };
    let optional = |text: &str| Some(text.trim().to_owned()).filter(|t| !t.is_empty());
    let spec = JobSpec {
        schedule: form.schedule.trim().to_owned(),
        prompt: form.prompt.clone(),
        name: optional(&form.name),
        deliver: optional(&form.deliver),
        repeat,
        ..JobSpec::default()
    };
    let prepared = {
        let check = |target: &crate::vocab::target::Target| config.check_target(&target.to_string(), false);
        let rules = JobRules { tz, default_deliver: default, models: &models, check_target: &check };
        prepare(spec, &rules, chrono::Utc::now())
    };
    let job = match prepared {
        Ok(job) => job,
        Err(problem) => return refuse(&problem),
    };
    match state.store.create_job(&job, now_ms()).await {
        Ok(made) => {
            tracing::info!(key = session.who, job = %made.id, schedule = %made.schedule, "panel: cron job added");
            Redirect::to("/ui/cron").into_response()
        }
        Err(e) => failed(&session, "Cron jobs", e),
    }
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

/// `GET /ui/config`: the config in force (it holds no secret), which file it came from, and a
/// reload button.
pub(super) async fn config(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let session = match super::pages::reader(&state, &headers) {
        Ok(session) => session,
        Err(login) => return *login,
    };
    let Some(reloader) = state.reloader.as_ref() else {
        return page(StatusCode::OK, "Configuration", Some(&session.csrf), "<p class=\"muted\">Not known here.</p>");
    };
    let live = reloader.live();
    let mut body = format!(
        "<p>{} (digest {}), loaded {}, {} reload(s) since the start.</p>",
        escape(&live.path),
        escape(&live.digest),
        when(live.loaded_at),
        live.reloads
    );
    if let Some(refused) = &live.refused {
        body.push_str(&format!(
            "<p class=\"bad\">The last reload was refused, the config above stays: {}</p>",
            escape(refused)
        ));
    }
    body.push_str(&button(&session.csrf, "/ui/config/reload", "Reload the config file and .env", &[]));
    let shown = serde_json::to_string_pretty(&masked(reloader.running())).unwrap_or_default();
    body.push_str(&format!(
        "<h2>In force</h2><p class=\"muted\">Secrets are never in it: they come from the environment and .env.</p><pre>{}</pre>",
        escape(&shown)
    ));
    page(StatusCode::OK, "Configuration", Some(&session.csrf), &body)
}

/// The config with the values of every `env` and `headers` table (an MCP server's, where a
/// literal may stand) shown only as set.
fn masked(mut value: serde_json::Value) -> serde_json::Value {
    fn walk(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    match (key.as_str(), item) {
                        ("env" | "headers", serde_json::Value::Object(values)) => {
                            values.values_mut().for_each(|v| *v = serde_json::Value::String("(set)".into()));
                        }
                        (_, item) => walk(item),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}

/// `POST /ui/config/reload`: as SIGHUP does; what took effect, or why it was refused.
pub(super) async fn reload(State(state): State<AppState>, headers: HeaderMap, Form(form): Form<CsrfOnly>) -> Response {
    let Some(session) = super::checked(&state, &headers, &form.csrf) else { return super::refused() };
    let Some(reloader) = state.reloader.clone() else { return failed(&session, "Configuration", "no reloader") };
    tracing::info!(key = session.who, "panel: config reload asked");
    let outcome = tokio::task::spawn_blocking(move || reloader.reload()).await;
    let body = match outcome {
        Ok(Ok(done)) => {
            let mut body = format!("<p class=\"ok\">Reloaded: {}.</p>", escape(&done.applied.join(", ")));
            if !done.restart_needed.is_empty() {
                body.push_str(&format!(
                    "<p>Changed, and taking effect at the next restart: {}.</p>",
                    escape(&done.restart_needed.join(", "))
                ));
            }
            body
        }
        Ok(Err(problems)) => {
            let items: String = problems.iter().map(|p| format!("<li>{}</li>", escape(p))).collect();
            format!("<p class=\"bad\">Refused; the running config stays:</p><ul>{items}</ul>")
        }
        Err(e) => format!("<p class=\"bad\">{}</p>", escape(&e.to_string())),
    };
    page(StatusCode::OK, "Configuration", Some(&session.csrf), &format!("{body}<p><a href=\"/ui/config\">Back</a></p>"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_values_of_env_and_headers_are_masked() {
        let config = serde_json::json!({"mcp": {"servers": {"gh": {"env": {"TOKEN": "ghp_secret"}, "headers": {"Authorization": "Bearer x"}, "command": "gh"}}}});
        let shown = masked(config).to_string();
        assert!(
            !shown.contains("ghp_secret") && !shown.contains("Bearer x") && shown.contains("\"command\":\"gh\""),
            "{shown}"
        );
    }
}
