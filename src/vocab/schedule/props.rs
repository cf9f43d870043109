//! Properties of schedule parsing: no input makes it panic; every schedule it accepts survives
//! the round trip through its stored (canonical) form, and its next occurrence is in the future.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;

use super::*;

/// What users type: delays, periods, cron expressions, times — valid and not.
fn schedule_text() -> impl Strategy<Value = String> {
    let unit = prop::sample::select(vec!["s", "m", "h", "d", "min", "minutes", "hours", "days", "w", "x", ""]);
    let field =
        prop::sample::select(vec!["*", "*/5", "0", "1-5", "1,2,3", "59", "60", "MON", "mon-fri", "?", "L", "#"]);
    prop_oneof![
        (0u64..100_000, unit.clone()).prop_map(|(n, u)| format!("{n}{u}")),
        (0u64..100_000, unit).prop_map(|(n, u)| format!("every {n}{u}")),
        prop::collection::vec(field, 4..7).prop_map(|f| f.join(" ")),
        (2000i32..2100, 0u32..14, 0u32..33, 0u32..25, 0u32..61)
            .prop_map(|(y, mo, d, h, mi)| format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:00")),
        "\\PC{0,40}",
    ]
}

fn zone() -> impl Strategy<Value = Tz> {
    prop::sample::select(vec![
        chrono_tz::UTC,
        chrono_tz::Europe::Paris,
        chrono_tz::America::New_York,
        chrono_tz::Asia::Kolkata,
    ])
}

fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    (1_600_000_000i64..2_200_000_000).prop_map(|s| DateTime::from_timestamp(s, 0).expect("in range"))
}

proptest! {
    #[test]
    fn accepted_schedules_round_trip_and_point_ahead(text in schedule_text(), tz in zone(), now in instant()) {
        let Ok(schedule) = Schedule::parse(&text, now, tz) else { return Ok(()) };
        let stored = schedule.canonical();
        let restored = Schedule::from_canonical(&stored, tz).map_err(|e| TestCaseError::fail(format!("{stored:?}: {e}")))?;
        prop_assert_eq!(restored.canonical(), stored.clone());
        if let Some(next) = schedule.next_after(now) {
            prop_assert!(next > now, "{text:?} -> {stored:?}: {next} is not after {now}");
            prop_assert_eq!(restored.next_after(now), Some(next));
        }
    }

    #[test]
    fn stored_text_never_panics(text in "\\PC{0,60}", tz in zone(), now in instant()) {
        if let Ok(schedule) = Schedule::from_canonical(&text, tz) {
            let _ = schedule.next_after(now);
            let _ = schedule.describe();
        }
    }
}
