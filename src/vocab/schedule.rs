//! Job schedules: parse what a user typed (`30m`, `every 30m`, a cron expression, an ISO-8601
//! time), compute next runs, and decide what to do about runs missed while the daemon was down.
//! Pure: the current time is always passed in, never read here.
//!
//! Written as a delay, `every <interval>`, a cron expression in a time zone or an ISO time; a
//! missed run fires once within its grace window (`grace`, `catch_up`), never as a burst. Cron, the
//! `cronjob` tool and the CLI all parse with it.

use std::time::Duration;

use chrono::{DateTime, LocalResult, NaiveDateTime, SecondsFormat, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// The shortest recurring period. Production jobs use minutes, but the daemon's own tests run
/// `every 2s`, so the floor is one second.
const MIN_PERIOD_SECS: u64 = 1;
/// The longest delay or period accepted, so that date arithmetic can never overflow.
const MAX_DURATION_SECS: u64 = 3650 * 86_400;
/// Bounds of the catch-up grace window for recurring schedules (DESIGN.md §8).
const MIN_GRACE: Duration = Duration::from_secs(2 * 60);
const MAX_GRACE: Duration = Duration::from_secs(2 * 3600);
/// How late a missed one-shot may still fire.
const ONE_SHOT_GRACE: Duration = Duration::from_secs(2 * 3600);
const UNIT_HINT: &str = "use s, m, h or d";

/// When a job runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// Exactly once, at `at` (from a delay such as `30m` or an ISO-8601 time).
    Once {
        /// The instant the job fires.
        at: DateTime<Utc>,
    },
    /// Repeatedly, `period` apart (`every 30m`). The schedule has no fixed phase: occurrences
    /// are counted from whichever occurrence the caller passes in.
    Every {
        /// Time between runs; at least one second.
        period: Duration,
    },
    /// A 5-field (minute precision) or 6-field (leading seconds field) cron expression,
    /// evaluated on the wall clock of `tz`, so `0 9 * * *` stays at 09:00 local across DST.
    Cron {
        /// The expression as given, with whitespace runs collapsed.
        expr: String,
        /// The zone whose wall clock the expression describes.
        tz: Tz,
        /// The parsed expression (boxed: it is large next to the other variants).
        parsed: Box<Cron>,
    },
}

/// What to do about an occurrence that was due while nothing ran it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatchUp {
    /// Late but within the grace window: run once now, then schedule `next`.
    RunOnce {
        /// The first occurrence strictly after now; `None` when the schedule is spent.
        next: Option<DateTime<Utc>>,
    },
    /// Too late: do not run, just schedule `next`.
    Skip {
        /// The first occurrence strictly after now; `None` when the schedule is spent.
        next: Option<DateTime<Utc>>,
    },
}

impl CatchUp {
    /// The occurrence to store as the job's next run, whichever the decision.
    pub fn next(&self) -> Option<DateTime<Utc>> {
        match self {
            CatchUp::RunOnce { next } | CatchUp::Skip { next } => *next,
        }
    }
}

/// Why a schedule was refused. Every variant is a user error: report it as such.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Nothing was given.
    #[error("empty schedule: use a delay like '30m', 'every 30m', a cron expression or an ISO-8601 time")]
    Empty,
    /// A duration that is not a whole number followed by a unit.
    #[error("invalid duration '{text}': expected a whole number followed by s, m, h or d, like '30m'")]
    InvalidDuration {
        /// The offending text.
        text: String,
    },
    /// A number without a unit.
    #[error("missing unit in '{text}': {UNIT_HINT}")]
    MissingUnit {
        /// The offending text.
        text: String,
    },
    /// A unit other than s, m, h, d.
    #[error("unknown unit '{unit}' in '{text}': {UNIT_HINT}")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The duration it appeared in.
        text: String,
    },
    /// A zero delay or period.
    #[error("duration '{text}' must be at least 1s")]
    TooShort {
        /// The offending text.
        text: String,
    },
    /// A delay or period beyond ten years.
    #[error("duration '{text}' exceeds the maximum of 3650d")]
    TooLong {
        /// The offending text.
        text: String,
    },
    /// A cron expression croner refused, or one that never fires.
    #[error("invalid cron expression '{expr}': {reason}")]
    InvalidCron {
        /// The expression as given.
        expr: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A one-shot time that does not parse.
    #[error("invalid time '{text}': {reason}")]
    InvalidTime {
        /// The time as given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A local time without an offset that falls into a daylight-saving gap.
    #[error("time '{text}' does not exist in {tz}: the clocks skip it for daylight saving")]
    NonexistentLocalTime {
        /// The time as given.
        text: String,
        /// The zone it was interpreted in.
        tz: String,
    },
    /// A one-shot time at or before now.
    #[error("time {at} is in the past")]
    InPast {
        /// The time in RFC 3339, UTC.
        at: String,
    },
    /// Text that matches none of the accepted forms.
    #[error(
        "unrecognised schedule '{text}': use a delay like '30m', 'every 30m', a 5- or 6-field cron expression, \
         or an ISO-8601 time"
    )]
    Unrecognised {
        /// The offending text.
        text: String,
    },
    /// A relative delay where only a stored, absolute form makes sense.
    #[error("stored schedule '{text}' is a relative delay: store Schedule::canonical() instead")]
    RelativeStored {
        /// The offending text.
        text: String,
    },
}

/// The syntactic forms a schedule may take, told apart before any of them is parsed.
enum Form<'a> {
    Delay(&'a str),
    Every(&'a str),
    Cron(&'a str),
    Time(&'a str),
}

impl Schedule {
    /// Parses a schedule as a user typed it. `now` anchors delays and rejects past times; `tz`
    /// interprets cron expressions and ISO-8601 times without an offset.
    pub fn parse(text: &str, now: DateTime<Utc>, tz: Tz) -> Result<Schedule, ScheduleError> {
        match classify(text)? {
            Form::Delay(d) => {
                let delay = parse_duration(d)?;
                let at = to_delta(delay).and_then(|delta| now.checked_add_signed(delta));
                let at = at.ok_or_else(|| ScheduleError::TooLong { text: d.to_owned() })?;
                Ok(Schedule::Once { at })
            }
            Form::Time(t) => {
                let at = parse_time(t, tz)?;
                if at <= now {
                    return Err(ScheduleError::InPast { at: rfc3339(at) });
                }
                Ok(Schedule::Once { at })
            }
            Form::Every(p) => parse_every(p),
            Form::Cron(expr) => parse_cron(expr, tz, Some(now)),
        }
    }

    /// Rebuilds a schedule from [`Schedule::canonical`] text, as the store keeps it. Unlike
    /// [`Schedule::parse`] it accepts one-shot times in the past (a job may be restored after
    /// its time passed, to be caught up) and refuses relative delays, which have no anchor.
    pub fn from_canonical(text: &str, tz: Tz) -> Result<Schedule, ScheduleError> {
        match classify(text)? {
            Form::Delay(d) => Err(ScheduleError::RelativeStored { text: d.to_owned() }),
            Form::Time(t) => Ok(Schedule::Once { at: parse_time(t, tz)? }),
            Form::Every(p) => parse_every(p),
            // A stored expression was checked when it was created; whether it fires again is
            // the caller's business (next_after answers None).
            Form::Cron(expr) => parse_cron(expr, tz, None),
        }
    }

    /// The text that [`Schedule::from_canonical`] turns back into this schedule: an RFC 3339
    /// UTC time, `every <n><unit>`, or the cron expression (its zone is stored beside it).
    pub fn canonical(&self) -> String {
        match self {
            Schedule::Once { at } => rfc3339(*at),
            Schedule::Every { period } => {
                let (n, unit) = split_period(*period);
                format!("every {n}{}", &unit[..1])
            }
            Schedule::Cron { expr, .. } => expr.clone(),
        }
    }

    /// The first occurrence strictly after `after`, or `None` when there is none (a spent
    /// one-shot). For [`Schedule::Every`], `after` is taken to be the previous occurrence.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Once { at } => (*at > after).then_some(*at),
            Schedule::Every { period } => after.checked_add_signed(to_delta(*period)?),
            Schedule::Cron { tz, parsed, .. } => {
                // croner walks the wall clock in whole seconds; a fractional start would make it
                // return an occurrence carrying that fraction.
                let start = after.with_nanosecond(0).unwrap_or(after).with_timezone(tz);
                parsed.find_next_occurrence(&start, false).ok().map(|t| t.with_timezone(&Utc))
            }
        }
    }

    /// Whether the schedule fires more than once.
    pub fn is_recurring(&self) -> bool {
        !matches!(self, Schedule::Once { .. })
    }

    /// A short human description, e.g. "every 30 minutes", "cron '0 9 * * 1-5' (Europe/Berlin)"
    /// or "once at 2026-11-22 09:00 UTC".
    pub fn describe(&self) -> String {
        match self {
            Schedule::Once { at } if at.second() == 0 => format!("once at {}", at.format("%Y-%m-%d %H:%M UTC")),
            Schedule::Once { at } => format!("once at {}", at.format("%Y-%m-%d %H:%M:%S UTC")),
            Schedule::Every { period } => match split_period(*period) {
                (1, unit) => format!("every {unit}"),
                (n, unit) => format!("every {n} {unit}s"),
            },
            Schedule::Cron { expr, tz, .. } => format!("cron '{expr}' ({})", tz.name()),
        }
    }

    /// How late the occurrence `due` may run and still count: half the period clamped to
    /// 2 min–2 h for recurring schedules (for cron, the period is the gap from `due` to the
    /// following occurrence), 2 h for a one-shot.
    pub fn grace(&self, due: DateTime<Utc>) -> Duration {
        let period = match self {
            Schedule::Once { .. } => return ONE_SHOT_GRACE,
            Schedule::Every { period } => *period,
            Schedule::Cron { .. } => match self.next_after(due) {
                Some(following) => (following - due).to_std().unwrap_or_default(),
                None => return ONE_SHOT_GRACE,
            },
        };
        (period / 2).clamp(MIN_GRACE, MAX_GRACE)
    }

    /// Decides about the occurrence `due` when it is noticed at `now` (normally `due <= now`;
    /// an early call counts as on time). However many occurrences were missed, the answer is at
    /// most one run, and `next` is always the first occurrence strictly after both `now` and
    /// `due`, so a job is never handed a backlog.
    pub fn catch_up(&self, due: DateTime<Utc>, now: DateTime<Utc>) -> CatchUp {
        let on_time = match to_delta(self.grace(due)) {
            Some(grace) => now.signed_duration_since(due) <= grace,
            None => true,
        };
        let next = match self {
            Schedule::Once { .. } => None,
            Schedule::Every { period } => next_in_phase(due, now, *period),
            Schedule::Cron { .. } => self.next_after(now.max(due)),
        };
        if on_time { CatchUp::RunOnce { next } } else { CatchUp::Skip { next } }
    }
}

/// Tells the forms apart by shape alone, so each parser can give errors specific to its form.
fn classify(text: &str) -> Result<Form<'_>, ScheduleError> {
    let text = text.trim();
    let Some(first) = text.split_whitespace().next() else {
        return Err(ScheduleError::Empty);
    };
    if first.eq_ignore_ascii_case("every") {
        return Ok(Form::Every(text[first.len()..].trim()));
    }
    let date_like = |s: &str| {
        let b = s.as_bytes();
        b.len() >= 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[7] == b'-'
    };
    if date_like(first) {
        return Ok(Form::Time(text));
    }
    let words = text.split_whitespace().count();
    if words > 2 || text.starts_with('@') {
        return Ok(Form::Cron(text));
    }
    // One or two words starting with a digit: a delay, possibly mistyped as `30 m`.
    if first.starts_with(|c: char| c.is_ascii_digit()) {
        return Ok(Form::Delay(text));
    }
    Err(ScheduleError::Unrecognised { text: text.to_owned() })
}

fn parse_every(period: &str) -> Result<Schedule, ScheduleError> {
    if period.is_empty() {
        return Err(ScheduleError::InvalidDuration { text: "every".to_owned() });
    }
    Ok(Schedule::Every { period: parse_duration(period)? })
}

/// Parses `<whole number><s|m|h|d>`.
fn parse_duration(text: &str) -> Result<Duration, ScheduleError> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() || !unit.chars().all(|c| c.is_alphabetic()) {
        return Err(ScheduleError::InvalidDuration { text: text.to_owned() });
    }
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" => return Err(ScheduleError::MissingUnit { text: text.to_owned() }),
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(ScheduleError::UnknownUnit { unit: unit.to_owned(), text: text.to_owned() }),
    };
    let too_long = || ScheduleError::TooLong { text: text.to_owned() };
    let secs = digits.parse::<u64>().map_err(|_| too_long())?.checked_mul(scale).ok_or_else(too_long)?;
    if secs < MIN_PERIOD_SECS {
        return Err(ScheduleError::TooShort { text: text.to_owned() });
    }
    if secs > MAX_DURATION_SECS {
        return Err(too_long());
    }
    Ok(Duration::from_secs(secs))
}

/// Parses a 5- or 6-field cron expression (or a croner `@nickname` such as `@daily`) and, given
/// `now`, checks that it fires at least once after it.
fn parse_cron(expr: &str, tz: Tz, now: Option<DateTime<Utc>>) -> Result<Schedule, ScheduleError> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let invalid = |reason: String| ScheduleError::InvalidCron { expr: expr.to_owned(), reason };
    let nickname = fields.len() == 1 && expr.starts_with('@');
    if !nickname && !matches!(fields.len(), 5 | 6) {
        return Err(invalid(format!("expected 5 or 6 fields, found {}", fields.len())));
    }
    let parser = CronParser::builder().seconds(Seconds::Optional).year(Year::Disallowed).build();
    let parsed = parser.parse(expr).map_err(|e| invalid(tidy(&e.to_string())))?;
    let schedule = Schedule::Cron { expr: fields.join(" "), tz, parsed: Box::new(parsed) };
    if now.is_some_and(|now| schedule.next_after(now).is_none()) {
        return Err(invalid("it never fires".to_owned()));
    }
    Ok(schedule)
}

/// Parses an RFC 3339 time, or an ISO-8601 local time without offset, read in `tz`.
fn parse_time(text: &str, tz: Tz) -> Result<DateTime<Utc>, ScheduleError> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    // RFC 3339 insists on seconds; people often leave them out.
    for format in ["%Y-%m-%dT%H:%M%#z", "%Y-%m-%d %H:%M%#z"] {
        if let Ok(t) = DateTime::parse_from_str(text, format) {
            return Ok(t.with_timezone(&Utc));
        }
    }
    let naive = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M"]
        .into_iter()
        .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
        .ok_or_else(|| ScheduleError::InvalidTime {
            text: text.to_owned(),
            reason: "expected an ISO-8601 time like 2026-11-22T09:00:00Z or 2026-11-22T09:00".to_owned(),
        })?;
    match tz.from_local_datetime(&naive) {
        LocalResult::Single(t) => Ok(t.with_timezone(&Utc)),
        // A repeated wall-clock time (clocks going back) means its first occurrence.
        LocalResult::Ambiguous(earlier, _) => Ok(earlier.with_timezone(&Utc)),
        LocalResult::None => {
            Err(ScheduleError::NonexistentLocalTime { text: text.to_owned(), tz: tz.name().to_owned() })
        }
    }
}

/// The first `due + k * period` (k ≥ 1) strictly after `now`, keeping the schedule's phase.
fn next_in_phase(due: DateTime<Utc>, now: DateTime<Utc>, period: Duration) -> Option<DateTime<Utc>> {
    let step = to_delta(period).filter(|p| *p > TimeDelta::zero())?;
    let late_ms = now.signed_duration_since(due).num_milliseconds();
    let step_ms = step.num_milliseconds();
    let periods = if late_ms >= 0 && step_ms > 0 { late_ms / step_ms + 1 } else { 1 };
    let next = due.checked_add_signed(TimeDelta::try_milliseconds(periods.checked_mul(step_ms)?)?)?;
    // Millisecond arithmetic can land one step short for sub-millisecond periods.
    if next > now { Some(next) } else { now.checked_add_signed(step) }
}

/// Splits a period into its largest whole unit: (30, "minute"), (2, "hour"), (45, "second").
fn split_period(period: Duration) -> (u64, &'static str) {
    let secs = period.as_secs();
    [(86_400, "day"), (3600, "hour"), (60, "minute")]
        .into_iter()
        .find(|(scale, _)| secs > 0 && secs.is_multiple_of(*scale))
        .map_or((secs, "second"), |(scale, unit)| (secs / scale, unit))
}

/// Brings croner's messages ("Component error: Number out of bounds.") to this crate's style.
fn tidy(message: &str) -> String {
    let message = message.trim().trim_end_matches('.');
    let mut chars = message.chars();
    chars.next().map_or_else(String::new, |first| first.to_lowercase().chain(chars).collect())
}

fn to_delta(d: Duration) -> Option<TimeDelta> {
    TimeDelta::from_std(d).ok()
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests;
