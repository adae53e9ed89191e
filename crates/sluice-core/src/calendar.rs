//! Calendar windows: a fixed window that is a day, a week (from Monday) or a month of a time
//! zone, so a budget resets at the customer's midnight and DST days are 23 or 25 hours long.
//!
//! Every algorithm's arithmetic assumes windows of one length aligned to unix time. A calendar
//! window is mapped onto such a frame instead of teaching each backend the calendar: the
//! window holding `now` has an ordinal `index` (days, weeks or months since 1970 in the zone),
//! bounds `[start, end)` and length `w = end - start`; with `origin = start - index·w`, the
//! time `now - origin` lies in window `index` of a uniform frame of length `w`, and its end
//! `(index + 1)·w` maps back to `end`. The arithmetic then runs unchanged (here and in the
//! Redis scripts, which receive `w` and `origin`), and every daemon agrees because the
//! bounds come from the zone's rules alone.

use std::fmt;

use chrono::{DateTime, Datelike, Days, LocalResult, Months, NaiveDate, TimeZone};
use chrono_tz::Tz;

/// The length of a calendar window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CalendarUnit {
    /// Midnight to midnight.
    Day,
    /// Monday midnight to the next Monday's.
    Week,
    /// The first of the month at midnight to the first of the next.
    Month,
}

impl CalendarUnit {
    /// As the config writes it: `1d`, `1w`, `1mo`.
    pub fn as_str(self) -> &'static str {
        match self {
            CalendarUnit::Day => "1d",
            CalendarUnit::Week => "1w",
            CalendarUnit::Month => "1mo",
        }
    }

    /// Its usual length in milliseconds (30 days for a month): what `RateLimit-Policy`'s `w`
    /// states.
    pub fn nominal_ms(self) -> u64 {
        const DAY: u64 = 86_400_000;
        match self {
            CalendarUnit::Day => DAY,
            CalendarUnit::Week => 7 * DAY,
            CalendarUnit::Month => 30 * DAY,
        }
    }

    /// The longest such window in milliseconds (a DST change adds an hour): a bound for
    /// validation and key lifetimes.
    pub fn longest_ms(self) -> u64 {
        const HOUR: u64 = 3_600_000;
        match self {
            CalendarUnit::Day => 25 * HOUR,
            CalendarUnit::Week => 7 * 24 * HOUR + HOUR,
            CalendarUnit::Month => 31 * 24 * HOUR + HOUR,
        }
    }
}

/// A window of the calendar of `zone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Calendar {
    pub unit: CalendarUnit,
    pub zone: Tz,
}

impl fmt::Display for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in {}", self.unit.as_str(), self.zone.name())
    }
}

/// The calendar window holding an instant, and the uniform frame it maps onto (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Days, weeks or months since 1970 in the zone.
    pub index: u64,
    /// Unix milliseconds of the window's first instant.
    pub start_ms: u64,
    /// Unix milliseconds of the next window's first instant.
    pub end_ms: u64,
}

impl Frame {
    /// The window's length: the uniform frame's window.
    pub fn window_ms(&self) -> u64 {
        self.end_ms - self.start_ms
    }

    /// What is subtracted from a real time to place it in the uniform frame:
    /// `start - index·w` (negative east of Greenwich).
    pub fn origin_ms(&self) -> i64 {
        as_i64(self.start_ms) - as_i64(self.index.saturating_mul(self.window_ms()))
    }

    /// `real_ms` in the uniform frame.
    pub fn to_uniform(&self, real_ms: u64) -> u64 {
        u64::try_from(as_i64(real_ms) - self.origin_ms()).unwrap_or(0)
    }

    /// `uniform_ms` of the uniform frame as a real time.
    pub fn to_real(&self, uniform_ms: u64) -> u64 {
        u64::try_from(as_i64(uniform_ms) + self.origin_ms()).unwrap_or(0)
    }
}

fn as_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Monday 1970-01-05, the first day of week 0.
fn first_monday() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 5).unwrap_or_default()
}

fn epoch_date() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default()
}

impl Calendar {
    /// The window holding `now_ms`.
    pub fn frame(&self, now_ms: u64) -> Frame {
        let instant = DateTime::from_timestamp_millis(as_i64(now_ms)).unwrap_or_default();
        let date = instant.with_timezone(&self.zone).date_naive();
        self.frame_of(self.index_of(date))
    }

    /// Window `index` (days, weeks or months since 1970 in the zone).
    pub fn frame_of(&self, index: u64) -> Frame {
        let first = self.first_day(index);
        let next = self.first_day(index.saturating_add(1));
        let start_ms = self.midnight(first);
        let end_ms = self.midnight(next).max(start_ms.saturating_add(1));
        Frame {
            index,
            start_ms,
            end_ms,
        }
    }

    /// The ordinal of the window holding the local `date`.
    fn index_of(&self, date: NaiveDate) -> u64 {
        let days = |from: NaiveDate| u64::try_from((date - from).num_days()).unwrap_or(0);
        match self.unit {
            CalendarUnit::Day => days(epoch_date()),
            CalendarUnit::Week => {
                // Days before the first Monday belong to week 0 too: no real time is there.
                days(first_monday()) / 7
            }
            CalendarUnit::Month => {
                let months = i64::from(date.year() - 1970) * 12 + i64::from(date.month0());
                u64::try_from(months).unwrap_or(0)
            }
        }
    }

    /// The local date window `index` starts on.
    fn first_day(&self, index: u64) -> NaiveDate {
        let far = NaiveDate::MAX;
        match self.unit {
            CalendarUnit::Day => epoch_date().checked_add_days(Days::new(index)),
            CalendarUnit::Week => {
                first_monday().checked_add_days(Days::new(index.saturating_mul(7)))
            }
            CalendarUnit::Month => u32::try_from(index)
                .ok()
                .and_then(|months| epoch_date().checked_add_months(Months::new(months))),
        }
        .unwrap_or(far)
    }

    /// Unix milliseconds of the first instant of the local `date` in the zone: its midnight,
    /// the earlier one when the clocks went back over it, the end of the gap when they
    /// jumped over it (a few zones change at midnight).
    fn midnight(&self, date: NaiveDate) -> u64 {
        let Some(mut local) = date.and_hms_opt(0, 0, 0) else {
            return u64::MAX / 4;
        };
        // A DST gap is at most a few hours: walk it by quarter hours.
        for _ in 0..=4 * 24 {
            match self.zone.from_local_datetime(&local) {
                LocalResult::Single(at) | LocalResult::Ambiguous(at, _) => {
                    return u64::try_from(at.timestamp_millis()).unwrap_or(0);
                }
                LocalResult::None => local += chrono::Duration::minutes(15),
            }
        }
        u64::try_from(local.and_utc().timestamp_millis()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3_600_000;

    fn ms(rfc3339: &str) -> u64 {
        DateTime::parse_from_rfc3339(rfc3339)
            .unwrap()
            .timestamp_millis()
            .try_into()
            .unwrap()
    }

    fn calendar(unit: CalendarUnit, zone: &str) -> Calendar {
        Calendar {
            unit,
            zone: zone.parse().unwrap(),
        }
    }

    #[test]
    fn a_tokyo_month_ends_at_15_utc_on_the_last_day() {
        let month = calendar(CalendarUnit::Month, "Asia/Tokyo");
        let f = month.frame(ms("2026-02-10T08:00:00Z"));
        assert_eq!(f.start_ms, ms("2026-01-31T15:00:00Z"));
        assert_eq!(f.end_ms, ms("2026-02-28T15:00:00Z"));
        // 14:59:59.999 UTC on the last day is still February in Tokyo; 15:00 is March.
        assert_eq!(month.frame(ms("2026-02-28T14:59:59.999Z")).index, f.index);
        assert_eq!(month.frame(ms("2026-02-28T15:00:00Z")).index, f.index + 1);
    }

    #[test]
    fn new_york_days_are_23_and_25_hours_across_dst() {
        let day = calendar(CalendarUnit::Day, "America/New_York");
        assert_eq!(day.frame(ms("2026-03-08T12:00:00Z")).window_ms(), 23 * HOUR);
        assert_eq!(day.frame(ms("2026-11-01T12:00:00Z")).window_ms(), 25 * HOUR);
        assert_eq!(day.frame(ms("2026-06-01T12:00:00Z")).window_ms(), 24 * HOUR);
        let spring = day.frame(ms("2026-03-08T12:00:00Z"));
        assert_eq!(spring.start_ms, ms("2026-03-08T05:00:00Z"));
        assert_eq!(spring.end_ms, ms("2026-03-09T04:00:00Z"));
    }

    #[test]
    fn weeks_start_on_monday_midnight() {
        let week = calendar(CalendarUnit::Week, "Europe/Berlin");
        // Wednesday 2026-12-09: the week began Monday 2026-12-07 00:00 CET (23:00 UTC before).
        let f = week.frame(ms("2026-12-09T10:00:00Z"));
        assert_eq!(f.start_ms, ms("2026-12-06T23:00:00Z"));
        assert_eq!(f.end_ms, ms("2026-12-13T23:00:00Z"));
    }

    #[test]
    fn the_uniform_frame_maps_each_window_onto_its_index() {
        for (unit, zone) in [
            (CalendarUnit::Day, "America/New_York"),
            (CalendarUnit::Week, "Australia/Lord_Howe"),
            (CalendarUnit::Month, "Asia/Tokyo"),
            (CalendarUnit::Day, "UTC"),
        ] {
            let c = calendar(unit, zone);
            let mut now = ms("2026-01-01T00:00:00Z");
            while now < ms("2027-01-01T00:00:00Z") {
                let f = c.frame(now);
                let w = f.window_ms();
                assert!(f.start_ms <= now && now < f.end_ms, "{c} at {now}");
                assert_eq!(f.to_uniform(now) / w, f.index, "{c} at {now}");
                assert_eq!(f.to_real((f.index + 1) * w), f.end_ms);
                assert_eq!(c.frame(f.end_ms).index, f.index + 1, "{c} at {now}");
                assert_eq!(c.frame(f.end_ms - 1).index, f.index, "{c} at {now}");
                now += 7 * HOUR + 12_345;
            }
        }
    }
}
