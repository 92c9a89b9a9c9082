//! Calendar windows: a day, an ISO week (Monday first) or a month
//! as a time zone's clock reads it, so "300 a day in Asia/Tokyo" comes back
//! at Tokyo's midnight. Pure: `period(now)` is a function of the time and
//! the embedded zone table, nothing is read.
//!
//! A period starts at the first instant whose local time reaches the
//! period's first midnight (RFC 8536 time, POSIX TZ rules): a day is 23, 24
//! or 25 hours (a zone whose clocks skip midnight starts the day when they
//! land past it), a month 28 to 31 days give or take the hour of a DST
//! change. Periods tile time: each ends where the next starts.
//!
//! The zones are `zones.rs`, written by `scripts/zones` from the tz
//! database: each zone's POSIX TZ footer, the rule for every instant after
//! its last listed transition (4.2 KB gzip for 595 zones, each rule written once). The counter
//! reads the clock now and ahead, never in the past, so the footer is all
//! it needs; the script leaves out a zone whose footer disagrees with the
//! database from 2026 to 2031 (Africa/Casablanca's Ramadan changes) and a
//! config naming it is refused as an unknown zone.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::count::zones::ZONES;
const DAY_S: i64 = 86_400;
const HOUR_MS: u64 = 3_600_000;

/// What a calendar window spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Unit {
    Day,
    /// An ISO week: Monday 00:00 to the next Monday 00:00.
    Week,
    Month,
}

impl Unit {
    /// The config's names, as `window` spells them.
    pub(crate) const NAMES: [(Unit, &'static str); 3] = [(Unit::Day, "day"), (Unit::Week, "week"), (Unit::Month, "month")];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Unit> {
        Unit::NAMES.iter().find(|(_, n)| *n == name).map(|(u, _)| *u)
    }

    /// A period's length on a calendar without clock changes: a day, 7
    /// days, 31 days (the longest month).
    pub(crate) fn nominal_ms(self) -> u64 {
        self.longest_ms() - 2 * HOUR_MS
    }

    /// The longest a period can last: its nominal length and two hours (a
    /// DST change; Antarctica/Troll's shifts by two, no zone by more). The
    /// horizon a log is kept for.
    pub(crate) fn longest_ms(self) -> u64 {
        let days = match self {
            Unit::Day => 1,
            Unit::Week => 7,
            Unit::Month => 31,
        };
        days * 24 * HOUR_MS + 2 * HOUR_MS
    }
}

/// The names of the embedded table's zones, sorted.
pub(crate) fn zone_names() -> impl Iterator<Item = &'static str> {
    let mut names: Vec<&'static str> = ZONES.lines().flat_map(|line| line.split(' ').skip(1)).collect();
    names.sort_unstable();
    names.into_iter()
}

/// A zone of the embedded table (`rule name name ...` a line), by where
/// its name starts (the table is 10 KB: a `u16` holds any offset, a test
/// checks it), so its name and rule are read without a scan.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Zone(u16);

impl Zone {
    /// The zone of an IANA name, exactly as the database spells it.
    pub(crate) fn named(name: &str) -> Option<Zone> {
        let mut at = 0;
        for line in ZONES.split_inclusive('\n') {
            let mut word_at = at;
            for (i, word) in line.trim_end_matches('\n').split(' ').enumerate() {
                if i > 0 && word == name {
                    return u16::try_from(word_at).ok().map(Zone);
                }
                word_at += word.len() + 1;
            }
            at += line.len();
        }
        None
    }

    pub(crate) fn name(self) -> &'static str {
        self.line().0
    }

    /// The zone's name and its line's rule.
    fn line(self) -> (&'static str, &'static str) {
        let at = usize::from(self.0);
        let name = ZONES.get(at..).and_then(|rest| rest.split([' ', '\n']).next());
        let rule = ZONES.get(..at).and_then(|before| before.rsplit('\n').next()).and_then(|line| line.split(' ').next());
        match (name, rule) {
            (Some(name), Some(rule)) if !name.is_empty() && !rule.is_empty() => (name, rule),
            _ => ("UTC", "UTC0"),
        }
    }

    /// The zone's rule; the table is checked by a test, so a rule that does
    /// not parse (never) reads as UTC.
    fn rule(self) -> Rule {
        Rule::parse(self.line().1).unwrap_or(Rule { std: 0, dst: None })
    }
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A calendar window: a unit in a zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Calendar {
    pub(crate) unit: Unit,
    pub(crate) zone: Zone,
}

/// One period of a calendar: `[start_ms, end_ms)`, Unix ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Period {
    pub(crate) start_ms: i64,
    pub(crate) end_ms: i64,
}

impl Calendar {
    /// `day@Asia/Tokyo`: the wire's and the listing's spelling.
    pub(crate) fn spelling(&self) -> String {
        format!("{}@{}", self.unit.name(), self.zone.name())
    }

    pub(crate) fn parse(text: &str) -> Option<Calendar> {
        let (unit, zone) = text.split_once('@')?;
        Some(Calendar { unit: Unit::from_name(unit)?, zone: Zone::named(zone)? })
    }

    /// The period holding `now_ms`.
    pub(crate) fn period(&self, now_ms: i64) -> Period {
        let rule = self.zone.rule();
        let now_s = now_ms.div_euclid(1000);
        let local_day = (now_s + rule.offset_at(now_s)).div_euclid(DAY_S);
        let mut first = self.first_day(local_day);
        // A clock set back over midnight reads yesterday's date again after
        // today began: the period is the last one begun by now.
        loop {
            let next = self.next_day(first);
            let next_start = rule.first_instant(next) * 1000;
            if next_start > now_ms {
                return Period { start_ms: rule.first_instant(first) * 1000, end_ms: next_start };
            }
            first = next;
        }
    }

    /// The local day (days since 1970-01-01) that starts the period holding
    /// `day`.
    fn first_day(&self, day: i64) -> i64 {
        match self.unit {
            Unit::Day => day,
            // 1970-01-01 was a Thursday: Monday is 3 days before.
            Unit::Week => day - (day + 3).rem_euclid(7),
            Unit::Month => {
                let (y, m, _) = civil_from_days(day);
                days_from_civil(y, m, 1)
            }
        }
    }

    fn next_day(&self, first: i64) -> i64 {
        match self.unit {
            Unit::Day => first + 1,
            Unit::Week => first + 7,
            Unit::Month => {
                let (y, m, _) = civil_from_days(first);
                if m == 12 { days_from_civil(y + 1, 1, 1) } else { days_from_civil(y, m + 1, 1) }
            }
        }
    }

    /// The local date and time of an instant in this zone,
    /// `2026-12-07T00:00+09:00`, for `explain` and the admin API's status
    /// (none of the zone Worker's paths calls it).
    pub(crate) fn local_text(&self, at_ms: i64) -> String {
        let rule = self.zone.rule();
        let s = at_ms.div_euclid(1000);
        let offset = rule.offset_at(s);
        let local = s + offset;
        let (y, m, d) = civil_from_days(local.div_euclid(DAY_S));
        let secs = local.rem_euclid(DAY_S);
        let sign = if offset < 0 { '-' } else { '+' };
        let off = offset.abs() / 60;
        format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}{sign}{:02}:{:02}", secs / 3600, secs % 3600 / 60, off / 60, off % 60)
    }
}

/// A POSIX TZ rule (RFC 8536 §3.3): the standard offset and, if the zone
/// keeps DST, its offset and when it starts and ends. Offsets in seconds
/// east of UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rule {
    std: i64,
    dst: Option<Dst>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dst {
    offset: i64,
    start: When,
    end: When,
}

/// A transition: a day of the year and a local time (seconds, −167 h to
/// 167 h, RFC 8536's extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct When {
    day: Day,
    time: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Day {
    /// `Jn`: 1 to 365, February 29 never counted.
    Julian(i64),
    /// `n`: 0 to 365, February 29 counted.
    Zero(i64),
    /// `Mm.w.d`: weekday `d` (0 Sunday) of week `w` (5: the last) of month `m`.
    Month(i64, i64, i64),
}

impl Rule {
    fn parse(text: &str) -> Option<Rule> {
        let mut p = Parser { rest: text };
        p.name()?;
        // POSIX offsets are west of UTC.
        let std = -p.offset()?;
        if p.rest.is_empty() {
            return Some(Rule { std, dst: None });
        }
        p.name()?;
        let offset = if p.rest.starts_with(',') { std + 3600 } else { -p.offset()? };
        let start = p.rest.strip_prefix(',').and_then(|r| {
            p.rest = r;
            p.when()
        })?;
        let end = p.rest.strip_prefix(',').and_then(|r| {
            p.rest = r;
            p.when()
        })?;
        p.rest.is_empty().then_some(Rule { std, dst: Some(Dst { offset, start, end }) })
    }

    /// The offset in force at `t` (Unix seconds).
    fn offset_at(&self, t: i64) -> i64 {
        let Some(dst) = self.dst else { return self.std };
        let year = civil_from_days(t.div_euclid(DAY_S)).0;
        // The transitions of the years around `t`, in order: the offset is
        // the one the last transition at or before `t` set.
        let mut offset = self.std;
        let mut last = i64::MIN;
        for y in year - 1..=year + 1 {
            let (on, off) = self.transitions(dst, y);
            for (at, to) in [(on, dst.offset), (off, self.std)] {
                if at <= t && at >= last {
                    last = at;
                    offset = to;
                }
            }
        }
        offset
    }

    /// When DST starts and ends in `year` (Unix seconds): the start is read
    /// on standard time, the end on DST.
    fn transitions(&self, dst: Dst, year: i64) -> (i64, i64) {
        let on = dst.start.local_seconds(year) - self.std;
        let off = dst.end.local_seconds(year) - dst.offset;
        (on, off)
    }

    /// The first instant (Unix seconds) whose local time is at least the
    /// midnight that starts local day `day`: where the local clock reads
    /// midnight (the first time, if it reads it twice), or where a
    /// transition carries it past midnight.
    fn first_instant(&self, day: i64) -> i64 {
        let midnight = day * DAY_S;
        let mut best = i64::MAX;
        let offsets = [Some(self.std), self.dst.map(|d| d.offset)];
        for offset in offsets.into_iter().flatten() {
            let t = midnight - offset;
            if self.offset_at(t) == offset {
                best = best.min(t);
            }
        }
        if let Some(dst) = self.dst {
            let year = civil_from_days(day).0;
            for y in year - 1..=year + 1 {
                let (on, off) = self.transitions(dst, y);
                for at in [on, off] {
                    let before = at - 1 + self.offset_at(at - 1);
                    let after = at + self.offset_at(at);
                    if before < midnight && midnight <= after {
                        best = best.min(at);
                    }
                }
            }
        }
        best
    }
}

impl When {
    /// The local time of the transition in `year`, as seconds since
    /// 1970-01-01 local.
    fn local_seconds(&self, year: i64) -> i64 {
        let jan1 = days_from_civil(year, 1, 1);
        let day = match self.day {
            Day::Julian(n) => {
                // February 29 is never counted: from March on, a leap year
                // adds it back.
                let leap_skip = i64::from(is_leap(year) && n >= 60);
                jan1 + n - 1 + leap_skip
            }
            Day::Zero(n) => jan1 + n,
            Day::Month(m, w, d) => {
                let first = days_from_civil(year, m, 1);
                let first_weekday = (first + 4).rem_euclid(7);
                let mut day = first + (d - first_weekday).rem_euclid(7) + 7 * (w - 1);
                while day >= first + days_in_month(year, m) {
                    day -= 7;
                }
                day
            }
        };
        day * DAY_S + self.time
    }
}

struct Parser<'a> {
    rest: &'a str,
}

impl Parser<'_> {
    /// A zone abbreviation: `<+09>` or letters; its text is not kept.
    fn name(&mut self) -> Option<()> {
        let len = if let Some(quoted) = self.rest.strip_prefix('<') {
            quoted.find('>')? + 2
        } else {
            self.rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(self.rest.len())
        };
        (len >= 3).then_some(())?;
        self.rest = self.rest.get(len..)?;
        Some(())
    }

    /// `[+-]hh[:mm[:ss]]` in seconds, hours up to 167.
    fn offset(&mut self) -> Option<i64> {
        let sign = match self.rest.as_bytes().first() {
            Some(b'-') => -1,
            Some(b'+') => 1,
            _ => 0,
        };
        if sign != 0 {
            self.rest = &self.rest[1..];
        }
        let mut total = 0;
        for (i, scale) in [3600, 60, 1].into_iter().enumerate() {
            if i > 0 {
                match self.rest.strip_prefix(':') {
                    Some(r) => self.rest = r,
                    None => break,
                }
            }
            let digits = self.rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(self.rest.len());
            let n: i64 = self.rest.get(..digits)?.parse().ok()?;
            if (i == 0 && n > 167) || (i > 0 && n > 59) {
                return None;
            }
            total += n * scale;
            self.rest = &self.rest[digits..];
        }
        Some(if sign < 0 { -total } else { total })
    }

    fn number(&mut self) -> Option<i64> {
        let digits = self.rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(self.rest.len());
        let n = self.rest.get(..digits)?.parse().ok()?;
        self.rest = &self.rest[digits..];
        Some(n)
    }

    fn when(&mut self) -> Option<When> {
        let day = if let Some(r) = self.rest.strip_prefix('J') {
            self.rest = r;
            Day::Julian(self.number().filter(|n| (1..=365).contains(n))?)
        } else if let Some(r) = self.rest.strip_prefix('M') {
            self.rest = r;
            let m = self.number().filter(|n| (1..=12).contains(n))?;
            self.rest = self.rest.strip_prefix('.')?;
            let w = self.number().filter(|n| (1..=5).contains(n))?;
            self.rest = self.rest.strip_prefix('.')?;
            Day::Month(m, w, self.number().filter(|n| (0..=6).contains(n))?)
        } else {
            Day::Zero(self.number().filter(|n| (0..=365).contains(n))?)
        };
        let time = match self.rest.strip_prefix('/') {
            Some(r) => {
                self.rest = r;
                self.offset()?
            }
            None => 2 * 3600,
        };
        Some(When { day, time })
    }
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01 (`civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const H: i64 = 3_600_000;

    fn cal(unit: Unit, zone: &str) -> Calendar {
        Calendar { unit, zone: Zone::named(zone).unwrap() }
    }

    /// Unix ms of a UTC date and time.
    fn utc(y: i64, m: i64, d: i64, h: i64, min: i64) -> i64 {
        (days_from_civil(y, m, d) * DAY_S + h * 3600 + min * 60) * 1000
    }

    #[test]
    fn every_zone_of_the_table_parses() {
        for line in ZONES.lines() {
            let (rule, names) = line.split_once(' ').unwrap();
            assert!(Rule::parse(rule).is_some(), "{rule}");
            for name in names.split(' ') {
                let zone = Zone::named(name).unwrap();
                assert_eq!(zone.line(), (name, rule));
            }
        }
        let names: Vec<&str> = zone_names().collect();
        assert!(names.len() > 500 && names.windows(2).all(|w| w[0] < w[1]), "sorted, each once");
        assert_eq!(cal(Unit::Day, "Asia/Tokyo").zone.line(), ("Asia/Tokyo", "JST-9"));
        assert_eq!(Zone::named("JST-9"), None, "a rule is no zone");
        assert!(ZONES.len() < usize::from(u16::MAX), "a zone's offset fits its u16");
    }

    #[test]
    fn unknown_and_left_out_zones_are_not_named() {
        for name in ["Mars/Olympus", "asia/tokyo", "", "Africa/Casablanca", "Asia/Tokyo "] {
            assert_eq!(Zone::named(name), None, "{name}");
        }
        assert_eq!(Calendar::parse("fortnight@UTC"), None);
        assert_eq!(Calendar::parse("day@Asia/Tokyo"), Some(cal(Unit::Day, "Asia/Tokyo")));
    }

    #[test]
    fn a_tokyo_day_starts_at_its_midnight_fifteen_hours_utc() {
        // 2026-12-07 10:00 JST is 01:00 UTC.
        let p = cal(Unit::Day, "Asia/Tokyo").period(utc(2026, 12, 7, 1, 0));
        assert_eq!(p, Period { start_ms: utc(2026, 12, 6, 15, 0), end_ms: utc(2026, 12, 7, 15, 0) });
        assert_eq!(cal(Unit::Day, "Asia/Tokyo").local_text(p.end_ms), "2026-12-08T00:00+09:00");
    }

    #[test]
    fn the_boundary_instant_belongs_to_the_new_period() {
        let tokyo = cal(Unit::Day, "Asia/Tokyo");
        let midnight = utc(2026, 12, 7, 15, 0);
        assert_eq!(tokyo.period(midnight).start_ms, midnight);
        assert_eq!(tokyo.period(midnight - 1).end_ms, midnight);
    }

    #[test]
    fn new_york_days_of_23_and_25_hours() {
        let ny = cal(Unit::Day, "America/New_York");
        // 2026-03-08: clocks spring forward at 02:00 EST.
        let spring = ny.period(utc(2026, 3, 8, 12, 0));
        assert_eq!(spring.start_ms, utc(2026, 3, 8, 5, 0));
        assert_eq!(spring.end_ms - spring.start_ms, 23 * H);
        // 2026-11-01: back at 02:00 EDT.
        let fall = ny.period(utc(2026, 11, 1, 12, 0));
        assert_eq!(fall.start_ms, utc(2026, 11, 1, 4, 0));
        assert_eq!(fall.end_ms - fall.start_ms, 25 * H);
    }

    #[test]
    fn paris_days_of_23_and_25_hours() {
        let paris = cal(Unit::Day, "Europe/Paris");
        let spring = paris.period(utc(2026, 3, 29, 12, 0));
        assert_eq!((spring.start_ms, spring.end_ms - spring.start_ms), (utc(2026, 3, 28, 23, 0), 23 * H));
        let fall = paris.period(utc(2026, 10, 25, 12, 0));
        assert_eq!((fall.start_ms, fall.end_ms - fall.start_ms), (utc(2026, 10, 24, 22, 0), 25 * H));
    }

    #[test]
    fn a_new_york_month_across_a_dst_change_and_of_31_days() {
        let ny = cal(Unit::Month, "America/New_York");
        // March 2026: 31 days, one hour lost on the 8th.
        let march = ny.period(utc(2026, 3, 20, 0, 0));
        assert_eq!(march.start_ms, utc(2026, 3, 1, 5, 0));
        assert_eq!(march.end_ms, utc(2026, 4, 1, 4, 0));
        assert_eq!(march.end_ms - march.start_ms, 31 * 24 * H - H);
        // November 2026: 30 days and the hour back.
        let november = ny.period(utc(2026, 11, 15, 0, 0));
        assert_eq!(november.end_ms - november.start_ms, 30 * 24 * H + H);
        // December: 31 days, no change.
        let december = ny.period(utc(2026, 12, 31, 12, 0));
        assert_eq!((december.start_ms, december.end_ms), (utc(2026, 12, 1, 5, 0), utc(2027, 1, 1, 5, 0)));
    }

    #[test]
    fn february_has_28_or_29_days() {
        let utc_month = cal(Unit::Month, "UTC");
        let p = utc_month.period(utc(2027, 2, 10, 0, 0));
        assert_eq!(p.end_ms - p.start_ms, 28 * 24 * H);
        let p = utc_month.period(utc(2028, 2, 29, 23, 59));
        assert_eq!((p.start_ms, p.end_ms - p.start_ms), (utc(2028, 2, 1, 0, 0), 29 * 24 * H));
    }

    #[test]
    fn a_week_starts_on_monday() {
        // 2026-12-10 is a Thursday; its week starts Monday 2026-12-07 in Paris (UTC+1).
        let p = cal(Unit::Week, "Europe/Paris").period(utc(2026, 12, 10, 12, 0));
        assert_eq!(p, Period { start_ms: utc(2026, 12, 6, 23, 0), end_ms: utc(2026, 12, 13, 23, 0) });
    }

    #[test]
    fn santiago_days_around_midnight_changes() {
        // America/Santiago: DST starts on the first Sunday of September at
        // 00:00 (clocks jump to 01:00: the day starts at 01:00 local, 23 h);
        // it ends on the first Sunday of April at 00:00 DST (back to 23:00
        // Saturday: Saturday lasts 25 h).
        let santiago = cal(Unit::Day, "America/Santiago");
        let sunday = santiago.period(utc(2026, 9, 6, 12, 0));
        assert_eq!(sunday.start_ms, utc(2026, 9, 6, 4, 0));
        assert_eq!(sunday.end_ms - sunday.start_ms, 23 * H);
        assert_eq!(santiago.local_text(sunday.start_ms), "2026-09-06T01:00-03:00");
        let saturday = santiago.period(utc(2026, 4, 4, 12, 0));
        assert_eq!(saturday.end_ms - saturday.start_ms, 25 * H);
        assert_eq!(saturday.end_ms, utc(2026, 4, 5, 4, 0));
    }

    #[test]
    fn half_hour_zones_and_negative_times() {
        let chatham = cal(Unit::Day, "Pacific/Chatham");
        let p = chatham.period(utc(2026, 7, 1, 0, 0));
        assert_eq!(chatham.local_text(p.start_ms), "2026-07-01T00:00+12:45");
        let nuuk = cal(Unit::Day, "America/Nuuk");
        let p = nuuk.period(utc(2026, 3, 28, 12, 0));
        assert_eq!(p.end_ms - p.start_ms, 23 * H, "Nuuk springs forward at -1:00 on Saturday");
    }

    /// `tests/data/calendar_midnights.txt` (`scripts/zones`, from the tz
    /// database by a minute-by-minute scan): the first instant of every day
    /// around each 2026 DST change of every zone that has one.
    #[test]
    fn days_begin_where_the_tz_database_says_around_every_dst_change() {
        let data = include_str!("../../tests/data/calendar_midnights.txt");
        let mut checked = 0;
        for line in data.lines() {
            let mut parts = line.split(' ');
            let (zone, date, start) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
            let start: i64 = start.parse().unwrap();
            let day = cal(Unit::Day, zone);
            assert_eq!(day.period(start).start_ms, start, "{zone} {date} starts at {start}");
            assert_eq!(day.period(start - 1).end_ms, start, "{zone}: the day before {date} ends at {start}");
            checked += 1;
        }
        assert!(checked > 500, "{checked}");
    }

    proptest! {
        #[test]
        fn periods_hold_now_and_tile_time(now in 0i64..4_102_444_800_000, zone in 0usize..595, unit in 0usize..3) {
            let zone = zone_names().nth(zone).unwrap();
            let c = cal(Unit::NAMES[unit].0, zone);
            let p = c.period(now);
            prop_assert!(p.start_ms <= now && now < p.end_ms, "{zone} {p:?} {now}");
            prop_assert_eq!(c.period(p.end_ms).start_ms, p.end_ms);
            prop_assert_eq!(c.period(p.start_ms - 1).end_ms, p.start_ms);
            let len = u64::try_from(p.end_ms - p.start_ms).unwrap();
            prop_assert!(len <= c.unit.longest_ms());
            prop_assert!(len >= c.unit.longest_ms() - 4 * HOUR_MS - 3 * 24 * HOUR_MS * u64::from(c.unit == Unit::Month));
        }
    }
}
