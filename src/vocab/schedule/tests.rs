//! Tests for schedule parsing, next runs across DST changes, and missed-run decisions.

use super::*;
use chrono_tz::Europe::Berlin;
use chrono_tz::UTC;

fn utc(text: &str) -> DateTime<Utc> {
    text.parse().expect("test timestamps are valid RFC 3339")
}

fn now() -> DateTime<Utc> {
    utc("2026-03-01T12:00:00Z")
}

fn parse(text: &str) -> Result<Schedule, ScheduleError> {
    Schedule::parse(text, now(), Berlin)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn error(text: &str) -> String {
    parse(text).expect_err("schedule should be refused").to_string()
}

#[test]
fn delays_are_one_shots_from_now() {
    for (text, offset) in [("45s", 45), ("30m", 1800), ("2h", 7200), ("1d", 86_400), ("90M", 5400), (" 2h ", 7200)] {
        let expected = now() + TimeDelta::seconds(offset);
        assert_eq!(parse(text), Ok(Schedule::Once { at: expected }), "{text}");
    }
}

#[test]
fn every_forms_are_recurring_periods() {
    for (text, period) in [("every 30m", 1800), ("every 2s", 2), ("EVERY   1d", 86_400), ("every 1h", 3600)] {
        let schedule = parse(text).expect("valid period");
        assert_eq!(schedule, Schedule::Every { period: secs(period) }, "{text}");
        assert!(schedule.is_recurring());
    }
}

#[test]
fn timestamps_are_one_shots() {
    let cases = [
        ("2026-11-22T09:00:00Z", "2026-11-22T09:00:00Z"),
        ("2026-11-22T09:00:00+01:00", "2026-11-22T08:00:00Z"),
        ("2026-11-22T09:00Z", "2026-11-22T09:00:00Z"),
        // Without an offset the time is read on the configured zone's wall clock (CET in November).
        ("2026-11-22T09:00:00", "2026-11-22T08:00:00Z"),
        ("2026-11-22T09:00", "2026-11-22T08:00:00Z"),
        ("2026-11-22 09:00", "2026-11-22T08:00:00Z"),
        // CEST in July.
        ("2026-07-01T09:00", "2026-07-01T07:00:00Z"),
    ];
    for (text, expected) in cases {
        let schedule = parse(text).expect("valid time");
        assert_eq!(schedule, Schedule::Once { at: utc(expected) }, "{text}");
        assert!(!schedule.is_recurring());
    }
}

#[test]
fn ambiguous_local_time_means_its_first_occurrence() {
    // 02:30 happens twice in Berlin on 2026-10-25; the first is still CEST (UTC+2).
    assert_eq!(parse("2026-10-25T02:30"), Ok(Schedule::Once { at: utc("2026-10-25T00:30:00Z") }));
}

#[test]
fn cron_expressions_with_five_or_six_fields() {
    let five = parse("0 9 * * 1-5").expect("5 fields");
    assert!(matches!(&five, Schedule::Cron { expr, tz, .. } if expr == "0 9 * * 1-5" && *tz == Berlin));
    assert!(five.is_recurring());
    // Whitespace runs collapse in the stored expression.
    assert!(matches!(parse("0  9 *\t* 1-5"), Ok(Schedule::Cron { expr, .. }) if expr == "0 9 * * 1-5"));

    let six = Schedule::parse("*/15 * * * * *", now(), UTC).expect("6 fields");
    let t = six.next_after(utc("2026-03-01T12:00:07Z")).expect("fires");
    assert_eq!(t, utc("2026-03-01T12:00:15Z"));
    assert_eq!(six.next_after(t), Some(utc("2026-03-01T12:00:30Z")));

    let at_seconds = Schedule::parse("30 0 9 * * *", now(), UTC).expect("6 fields");
    assert_eq!(at_seconds.next_after(now()), Some(utc("2026-03-02T09:00:30Z")));
}

#[test]
fn croner_nicknames_are_accepted() {
    let daily = Schedule::parse("@daily", now(), UTC).expect("nickname");
    assert_eq!(daily.next_after(now()), Some(utc("2026-03-02T00:00:00Z")));
}

#[test]
fn cron_next_after_truncates_subseconds() {
    let minutely = Schedule::parse("* * * * *", now(), UTC).expect("valid");
    let after = utc("2026-03-01T12:00:00.750Z");
    assert_eq!(minutely.next_after(after), Some(utc("2026-03-01T12:01:00Z")));
    let before = utc("2026-03-01T11:59:59.999Z");
    assert_eq!(minutely.next_after(before), Some(utc("2026-03-01T12:00:00Z")));
}

#[test]
fn bad_inputs_name_the_problem() {
    let cases = [
        ("3w", "unknown unit 'w' in '3w': use s, m, h or d"),
        ("every 3w", "unknown unit 'w' in '3w': use s, m, h or d"),
        ("30", "missing unit in '30': use s, m, h or d"),
        ("every 30", "missing unit in '30': use s, m, h or d"),
        ("0m", "duration '0m' must be at least 1s"),
        ("every 0s", "duration '0s' must be at least 1s"),
        ("3651d", "duration '3651d' exceeds the maximum of 3650d"),
        ("99999999999999999999s", "duration '99999999999999999999s' exceeds the maximum of 3650d"),
        ("1.5h", "invalid duration '1.5h': expected a whole number followed by s, m, h or d, like '30m'"),
        ("30 m", "invalid duration '30 m': expected a whole number followed by s, m, h or d, like '30m'"),
        ("every", "invalid duration 'every': expected a whole number followed by s, m, h or d, like '30m'"),
        ("every -5m", "invalid duration '-5m': expected a whole number followed by s, m, h or d, like '30m'"),
        ("0 9 * *", "invalid cron expression '0 9 * *': expected 5 or 6 fields, found 4"),
        ("0 0 9 * * * 2027", "invalid cron expression '0 0 9 * * * 2027': expected 5 or 6 fields, found 7"),
        ("61 0 * * *", "invalid cron expression '61 0 * * *': component error: Number out of bounds"),
        ("0 0 31 2 *", "invalid cron expression '0 0 31 2 *': it never fires"),
        ("2020-01-01T00:00:00Z", "time 2020-01-01T00:00:00Z is in the past"),
        ("2026-03-01T12:00:00Z", "time 2026-03-01T12:00:00Z is in the past"),
        (
            "2026-13-01T09:00",
            "invalid time '2026-13-01T09:00': expected an ISO-8601 time like 2026-11-22T09:00:00Z or 2026-11-22T09:00",
        ),
        (
            "2026-11-22",
            "invalid time '2026-11-22': expected an ISO-8601 time like 2026-11-22T09:00:00Z or 2026-11-22T09:00",
        ),
        (
            "2026-03-29T02:30",
            "time '2026-03-29T02:30' does not exist in Europe/Berlin: the clocks skip it for daylight saving",
        ),
        (
            "tomorrow",
            concat!(
                "unrecognised schedule 'tomorrow': use a delay like '30m', 'every 30m', ",
                "a 5- or 6-field cron expression, or an ISO-8601 time"
            ),
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(error(text), expected, "{text}");
    }
    assert_eq!(parse("   "), Err(ScheduleError::Empty));
    assert!(matches!(parse("0 0 * * x"), Err(ScheduleError::InvalidCron { .. })));
    assert!(matches!(parse("@reboot"), Err(ScheduleError::InvalidCron { .. })));
}

#[test]
fn every_next_times_step_by_the_period() {
    let schedule = parse("every 30m").expect("valid");
    let first = schedule.next_after(now()).expect("recurring");
    assert_eq!(first, utc("2026-03-01T12:30:00Z"));
    assert_eq!(schedule.next_after(first), Some(utc("2026-03-01T13:00:00Z")));
}

#[test]
fn once_next_after_is_none_when_spent() {
    let schedule = parse("30m").expect("valid");
    let at = utc("2026-03-01T12:30:00Z");
    assert_eq!(schedule.next_after(now()), Some(at));
    assert_eq!(schedule.next_after(at), None);
    assert_eq!(schedule.next_after(at + TimeDelta::hours(1)), None);
}

#[test]
fn daily_at_nine_stays_on_local_wall_clock_across_spring_forward() {
    // Berlin moves from CET (UTC+1) to CEST (UTC+2) at 02:00 local on 2026-03-29.
    let schedule = parse("0 9 * * *").expect("valid");
    let runs = successive(&schedule, utc("2026-03-27T12:00:00Z"), 4);
    let expected = ["2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z", "2026-03-30T07:00:00Z", "2026-03-31T07:00:00Z"];
    assert_eq!(runs, expected.map(utc));
}

#[test]
fn skipped_local_time_runs_at_the_first_instant_after_the_gap() {
    // 02:00 does not exist in Berlin on 2026-03-29. croner runs a fixed-time job that falls into
    // the gap at the first real instant after it: 03:00 CEST, 01:00 UTC. It is not skipped.
    let schedule = parse("0 2 * * *").expect("valid");
    let runs = successive(&schedule, utc("2026-03-27T12:00:00Z"), 4);
    let expected = ["2026-03-28T01:00:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-31T00:00:00Z"];
    assert_eq!(runs, expected.map(utc));
}

#[test]
fn repeated_local_time_runs_once_for_fixed_time_jobs() {
    // 02:30 happens twice in Berlin on 2026-10-25 (CEST, then CET). croner runs a fixed-time
    // job only in the first of the two.
    let schedule = parse("30 2 * * *").expect("valid");
    let runs = successive(&schedule, utc("2026-10-23T12:00:00Z"), 3);
    let expected = ["2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"];
    assert_eq!(runs, expected.map(utc));
}

#[test]
fn repeated_local_hour_runs_twice_for_interval_jobs() {
    // A job with several runs inside the repeated hour fires in both halves of it, as croner
    // counts elapsed wall-clock positions rather than a fixed daily time.
    let schedule = parse("*/20 2 * * *").expect("valid");
    let runs = successive(&schedule, utc("2026-10-24T12:00:00Z"), 7);
    let expected = [
        "2026-10-25T00:00:00Z",
        "2026-10-25T00:20:00Z",
        "2026-10-25T00:40:00Z",
        "2026-10-25T01:00:00Z",
        "2026-10-25T01:20:00Z",
        "2026-10-25T01:40:00Z",
        "2026-10-26T01:00:00Z",
    ];
    assert_eq!(runs, expected.map(utc));
}

fn successive(schedule: &Schedule, start: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
    std::iter::successors(schedule.next_after(start), |t| schedule.next_after(*t)).take(count).collect()
}

#[test]
fn describe_is_human_readable() {
    let cases = [
        ("every 30m", "every 30 minutes"),
        ("every 1h", "every hour"),
        ("every 90m", "every 90 minutes"),
        ("every 2s", "every 2 seconds"),
        ("every 1d", "every day"),
        ("every 48h", "every 2 days"),
        ("0 9 * * 1-5", "cron '0 9 * * 1-5' (Europe/Berlin)"),
        ("2026-11-22T09:00:00Z", "once at 2026-11-22 09:00 UTC"),
        ("2026-11-22T09:00:05Z", "once at 2026-11-22 09:00:05 UTC"),
    ];
    for (text, expected) in cases {
        assert_eq!(parse(text).expect("valid").describe(), expected, "{text}");
    }
}

#[test]
fn canonical_round_trips() {
    for text in ["30m", "every 30m", "every 90s", "every 2d", "0 9 * * 1-5", "*/5 * * * * *", "2026-11-22T09:00"] {
        let schedule = parse(text).expect("valid");
        let stored = schedule.canonical();
        assert_eq!(Schedule::from_canonical(&stored, Berlin), Ok(schedule), "{text} stored as {stored}");
    }
    assert_eq!(parse("every 90m").expect("valid").canonical(), "every 90m");
    assert_eq!(parse("2026-11-22T09:00").expect("valid").canonical(), "2026-11-22T08:00:00Z");
}

#[test]
fn from_canonical_accepts_the_past_and_refuses_delays() {
    let past = Schedule::from_canonical("2020-01-01T00:00:00Z", UTC);
    assert_eq!(past, Ok(Schedule::Once { at: utc("2020-01-01T00:00:00Z") }));
    let delay = Schedule::from_canonical("30m", UTC).expect_err("relative");
    assert_eq!(delay, ScheduleError::RelativeStored { text: "30m".to_owned() });
}

#[test]
fn grace_is_half_the_period_clamped() {
    let grace = |text: &str| parse(text).expect("valid").grace(utc("2026-03-02T09:00:00Z"));
    assert_eq!(grace("every 30m"), secs(15 * 60));
    assert_eq!(grace("every 2s"), secs(2 * 60), "clamped up to 2 min");
    assert_eq!(grace("every 1d"), secs(2 * 3600), "clamped down to 2 h");
    assert_eq!(grace("every 3m"), secs(2 * 60));
    assert_eq!(grace("every 1h"), secs(30 * 60));
    assert_eq!(grace("2026-11-22T09:00Z"), secs(2 * 3600));
    // For cron, the period is the gap to the following occurrence: 10:00 after 09:00.
    assert_eq!(
        Schedule::parse("0 9,10,18 * * *", now(), UTC).expect("valid").grace(utc("2026-03-02T09:00:00Z")),
        secs(30 * 60)
    );
    // ... and from 10:00 the following run is 18:00, eight hours later.
    let uneven = Schedule::parse("0 9,10,18 * * *", now(), UTC).expect("valid");
    assert_eq!(uneven.grace(utc("2026-03-02T10:00:00Z")), secs(2 * 3600));
    assert_eq!(
        Schedule::parse("*/10 * * * *", now(), UTC).expect("valid").grace(utc("2026-03-02T09:00:00Z")),
        secs(5 * 60)
    );
}

#[test]
fn catch_up_within_grace_runs_once() {
    let schedule = parse("every 30m").expect("valid");
    let due = utc("2026-03-01T12:30:00Z");
    let decision = schedule.catch_up(due, due + TimeDelta::minutes(10));
    assert_eq!(decision, CatchUp::RunOnce { next: Some(utc("2026-03-01T13:00:00Z")) });
    // Exactly at the edge of the window still runs.
    let edge = schedule.catch_up(due, due + TimeDelta::minutes(15));
    assert_eq!(edge, CatchUp::RunOnce { next: Some(utc("2026-03-01T13:00:00Z")) });
    // On time: the next run is a full period later.
    assert_eq!(schedule.catch_up(due, due).next(), Some(utc("2026-03-01T13:00:00Z")));
}

#[test]
fn catch_up_beyond_grace_skips_to_the_next_occurrence() {
    let schedule = parse("every 30m").expect("valid");
    let due = utc("2026-03-01T12:30:00Z");
    let decision = schedule.catch_up(due, due + TimeDelta::minutes(16));
    assert_eq!(decision, CatchUp::Skip { next: Some(utc("2026-03-01T13:00:00Z")) });
}

#[test]
fn a_long_outage_yields_one_decision_and_a_future_next() {
    let schedule = parse("every 1h").expect("valid");
    let due = utc("2026-03-01T13:00:00Z");
    let now = due + TimeDelta::days(3) + TimeDelta::minutes(17);
    let decision = schedule.catch_up(due, now);
    // 72 missed periods collapse into one decision: too late to run, next run in phase.
    assert_eq!(decision, CatchUp::Skip { next: Some(utc("2026-03-04T14:00:00Z")) });
    assert!(decision.next().is_some_and(|next| next > now));
    // The next occurrence is itself on time, so there is no second decision to make.
    let next = decision.next().expect("recurring");
    assert!(matches!(schedule.catch_up(next, next), CatchUp::RunOnce { next: Some(n) } if n > next));
}

#[test]
fn catch_up_for_cron_uses_the_gap_between_occurrences() {
    let schedule = Schedule::parse("0 * * * *", now(), UTC).expect("valid");
    let due = utc("2026-03-02T09:00:00Z");
    let late = schedule.catch_up(due, utc("2026-03-02T09:29:59Z"));
    assert_eq!(late, CatchUp::RunOnce { next: Some(utc("2026-03-02T10:00:00Z")) });
    let too_late = schedule.catch_up(due, utc("2026-03-05T11:45:00Z"));
    assert_eq!(too_late, CatchUp::Skip { next: Some(utc("2026-03-05T12:00:00Z")) });
}

#[test]
fn catch_up_for_one_shots_has_two_hours_and_no_next() {
    let schedule = parse("2026-11-22T09:00Z").expect("valid");
    let at = utc("2026-11-22T09:00:00Z");
    assert_eq!(schedule.catch_up(at, at + TimeDelta::minutes(119)), CatchUp::RunOnce { next: None });
    assert_eq!(schedule.catch_up(at, at + TimeDelta::hours(2)), CatchUp::RunOnce { next: None });
    assert_eq!(schedule.catch_up(at, at + TimeDelta::hours(3)), CatchUp::Skip { next: None });
}

#[test]
fn six_field_catch_up_with_seconds() {
    let schedule = Schedule::parse("*/10 * * * * *", now(), UTC).expect("valid");
    let due = utc("2026-03-02T09:00:00Z");
    // A 10 s period gives the 2 min floor as grace.
    assert_eq!(schedule.grace(due), secs(120));
    let decision = schedule.catch_up(due, utc("2026-03-02T09:01:05.5Z"));
    assert_eq!(decision, CatchUp::RunOnce { next: Some(utc("2026-03-02T09:01:10Z")) });
}

#[test]
fn an_early_catch_up_never_hands_back_the_same_occurrence() {
    let due = utc("2026-03-02T09:00:00Z");
    let early = due - TimeDelta::seconds(5);
    let cron = Schedule::parse("0 * * * *", now(), UTC).expect("valid");
    assert_eq!(cron.catch_up(due, early), CatchUp::RunOnce { next: Some(utc("2026-03-02T10:00:00Z")) });
    let every = parse("every 1h").expect("valid");
    assert_eq!(every.catch_up(due, early), CatchUp::RunOnce { next: Some(utc("2026-03-02T10:00:00Z")) });
}
