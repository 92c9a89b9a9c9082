//! Response fields for limited requests.
//!
//! - `Retry-After` (RFC 9110 §10.2.3) as an integer of seconds, rounded up.
//! - `RateLimit-Policy` and `RateLimit` as Structured Fields (RFC 9651
//!   Lists of Items), following draft-ietf-httpapi-ratelimit-headers-11
//!   (23 May 2026, the newest revision published when this was written;
//!   §3 the policy item: `q` required, `qu` the quota unit, `w` whole
//!   seconds; §4 the service limit item: `r` required, `t` optional):
//!   `RateLimit-Policy: "heavy-example";q=10;w=60` and
//!   `RateLimit: "heavy-example";r=0;t=42`.
//! - The 429 / 503 body as RFC 9457 `application/problem+json`.
//!
//! Every field states what decided ([`rate_fields`]):
//! - **Names are unique by construction.** A rule with one window is
//!   named by the rule; each window of a rule with several is
//!   `rule/60s` (`rule/500ms` for one not whole seconds, `rule/60s/2` for
//!   the second of two equal windows, `rule/day` for a calendar day, week
//!   or month); its `concurrency` is
//!   `rule/concurrency`. A rule name never holds a `/` (`A-Z a-z 0-9 - _ .`),
//!   and rule names are unique, so no two items of a response share a name,
//!   whatever the config or a runtime override says.
//! - **Units** (§3.1.2): a usage rule's quota is in the units its origin
//!   reports, not requests (the draft's default), so its items carry
//!   `qu` = the usage header's name (`qu="x-tokens"`). The draft's registry
//!   has only `requests`, `content-bytes` and `concurrent-requests`; a
//!   client that knows no other must not read such a `q` as requests.
//! - **Concurrency** (§3.1.2 `concurrent-requests`): a rule's slots are a
//!   policy of their own, `"rule/concurrency";q=N;qu="concurrent-requests"`
//!   (no window: slots are not counted over time). A refusal owed to the
//!   slots reports that policy, `r=0` (no slot free) and no `t`: a slot is
//!   back when a request in flight ends, which no one can foresee.
//! - **Windows** (§3.1.3): `w` is a whole number of seconds and the draft
//!   supports no sub-second precision: a window that is not whole seconds
//!   (`500ms`, `1500ms`) is stated without `w` rather than rounded (`w=1`
//!   for 500 ms would claim half the rate the limiter allows).
//! - **Calendar windows** (the draft has no calendar notion): a
//!   day, week or month in a time zone is stated without `w`, as its
//!   length varies (23 to 25 hours, 28 to 31 days) and a fixed `w` would
//!   tell a client to spread the quota over a rolling span. `RateLimit`'s
//!   `t` (and `Retry-After` on a refusal) is exact: the seconds until the
//!   period's end, when the whole quota comes back.

use crate::count::algorithm::push_u64;
use crate::count::protocol::WireWindow;
use serde_json::json;

/// Whole seconds, rounded up, at least 1 for any positive wait.
pub(crate) fn seconds_ceil(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// What a rule's `RateLimit` items state besides its windows: the name,
/// the unit of its quota, its slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policies<'a> {
    /// The rule's name (`A-Z a-z 0-9 - _ .`, or tollgate's own `:` names).
    pub(crate) rule: &'a str,
    /// A usage rule's header, the unit its quota counts (`qu`); `None`:
    /// requests, the draft's default.
    pub(crate) unit: Option<&'a str>,
    /// The rule's `concurrency`: a `concurrent-requests` policy of its own.
    pub(crate) concurrency: Option<u32>,
    /// A `concurrency` rule without `limits`: its one window is a stand-in
    /// no key could fill (`checks::UNBOUND_WINDOW`), so no item names it:
    /// the slots are its only policy.
    pub(crate) windowless: bool,
}

/// What the `RateLimit` item reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RateReport {
    /// Not refused: the most constraining window (least remaining, then
    /// latest reset), `t` until it grows.
    Allowed,
    /// Refused by the window at `index` (a ban or a penalty names window
    /// 0, or the one the penalty followed): `r` is that window's, `t` the
    /// wait (`Retry-After`'s).
    Window { index: usize, retry_after_ms: u64 },
    /// Refused because every slot is taken (`concurrency`): the slots'
    /// policy, `r=0`, no `t`.
    NoSlot,
}

/// The name of the window at `index` of `windows`: the rule's when it has
/// one, else `rule/60s` (`rule/500ms` when not whole seconds; `rule/60s/2`
/// for the second window of the same length), unique as the module says.
pub(crate) fn policy_name(rule: &str, windows: &[WireWindow], index: usize) -> String {
    let mut out = String::with_capacity(rule.len() + 12);
    push_policy_name(&mut out, rule, windows, index);
    out
}

/// [`policy_name`], appended to `out` (no `format!`: the blocked path
/// builds these per request).
fn push_policy_name(out: &mut String, rule: &str, windows: &[WireWindow], index: usize) {
    out.push_str(rule);
    let Some(window) = windows.get(index).filter(|_| windows.len() > 1) else { return };
    let ms = window.window_ms;
    out.push('/');
    if let Some(unit) = window.calendar {
        out.push_str(unit.name());
    } else if ms.is_multiple_of(1000) {
        push_u64(out, ms / 1000);
        out.push('s');
    } else {
        push_u64(out, ms);
        out.push_str("ms");
    }
    let earlier = windows[..index].iter().filter(|w| w.window_ms == ms && w.calendar == window.calendar).count();
    if earlier > 0 {
        out.push('/');
        push_u64(out, earlier as u64 + 1);
    }
}

/// The name of a rule's `concurrency` policy.
pub(crate) fn concurrency_name(rule: &str) -> String {
    format!("{rule}/concurrency")
}

/// `text` as an RFC 9651 String (§3.3.3): quoted, `"` and `\` escaped.
/// Rule and header names hold neither, and only printable ASCII.
fn sf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    push_sf_string(&mut out, text);
    out
}

/// [`sf_string`], appended to `out`.
fn push_sf_string(out: &mut String, text: &str) {
    out.push('"');
    push_sf_inner(out, text);
    out.push('"');
}

/// Whether [`sf_string`] would only quote `text` (printable ASCII, no `"`
/// or `\`).
fn sf_plain(text: &str) -> bool {
    text.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
}

/// [`policy_name`] as an RFC 9651 String, appended to `out`: the name's
/// window suffix is digits, `s`, `ms` and `/`, so a plain rule name makes
/// a plain policy name.
fn push_sf_policy_name(out: &mut String, rule: &str, windows: &[WireWindow], index: usize) {
    if sf_plain(rule) {
        out.push('"');
        push_policy_name(out, rule, windows, index);
        out.push('"');
    } else {
        push_sf_string(out, &policy_name(rule, windows, index));
    }
}

/// The inside of [`sf_string`]: `text`'s printable ASCII, `"` and `\`
/// escaped (a text of only such characters, the usual name, is copied
/// whole).
fn push_sf_inner(out: &mut String, text: &str) {
    if sf_plain(text) {
        out.push_str(text);
        return;
    }
    for c in text.chars().filter(|c| (' '..='~').contains(c)) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
}

/// `RateLimit-Policy` items: one per window (quota `q`, the unit `qu` of a
/// usage rule, window `w` in whole seconds, none when not whole), then the
/// slots of a `concurrency` rule (only those, for a windowless one).
pub(crate) fn ratelimit_policy(policies: &Policies<'_>, windows: &[WireWindow]) -> Vec<String> {
    let windows: &[WireWindow] = if policies.windowless { &[] } else { windows };
    let mut items = Vec::with_capacity(windows.len() + usize::from(policies.concurrency.is_some()));
    for (i, w) in windows.iter().enumerate() {
        let mut item = String::with_capacity(policies.rule.len() + 24);
        push_sf_policy_name(&mut item, policies.rule, windows, i);
        item.push_str(";q=");
        push_u64(&mut item, u64::from(w.limit));
        if let Some(unit) = policies.unit {
            item.push_str(";qu=");
            push_sf_string(&mut item, unit);
        }
        // A calendar period has no one length (23 to 25 hours, 28 to 31
        // days) and the draft no calendar: no `w`; `RateLimit`'s `t` says
        // when the quota comes back.
        if w.calendar.is_none() && w.window_ms.is_multiple_of(1000) && w.window_ms > 0 {
            item.push_str(";w=");
            push_u64(&mut item, w.window_ms / 1000);
        }
        items.push(item);
    }
    if let Some(n) = policies.concurrency {
        let mut item = String::with_capacity(policies.rule.len() + 48);
        push_sf_string(&mut item, &concurrency_name(policies.rule));
        item.push_str(";q=");
        push_u64(&mut item, u64::from(n));
        item.push_str(";qu=\"concurrent-requests\"");
        items.push(item);
    }
    items
}

/// The `RateLimit` item ([`RateReport`] says which): `r` the units remaining,
/// `t` the seconds (rounded up) until they grow; for a refusal owed to
/// slots, `r=0` of the slots' policy and no `t`; none for a windowless
/// rule that was not refused (its free slots are not known at the edge).
pub(crate) fn ratelimit(policies: &Policies<'_>, windows: &[WireWindow], report: RateReport) -> Option<String> {
    let windows: &[WireWindow] = if policies.windowless { &[] } else { windows };
    let (index, retry_after_ms) = match report {
        RateReport::NoSlot => return Some(format!("{};r=0", sf_string(&concurrency_name(policies.rule)))),
        RateReport::Window { index, retry_after_ms } if index < windows.len() => (index, Some(retry_after_ms)),
        RateReport::Window { retry_after_ms, .. } => (tightest(windows)?, Some(retry_after_ms)),
        RateReport::Allowed => (tightest(windows)?, None),
    };
    let window = windows.get(index)?;
    let t = seconds_ceil(retry_after_ms.unwrap_or(window.reset_ms));
    let mut out = String::with_capacity(policies.rule.len() + 24);
    push_sf_policy_name(&mut out, policies.rule, windows, index);
    out.push_str(";r=");
    push_u64(&mut out, window.remaining);
    out.push_str(";t=");
    push_u64(&mut out, t);
    Some(out)
}

/// The index of the most constraining window: least remaining, then the
/// latest reset.
fn tightest(windows: &[WireWindow]) -> Option<usize> {
    (0..windows.len()).min_by(|&a, &b| {
        let (a, b) = (&windows[a], &windows[b]);
        a.remaining.cmp(&b.remaining).then(b.reset_ms.cmp(&a.reset_ms))
    })
}

/// The RFC 9457 body of any other error tollgate answers itself.
pub(crate) fn problem_body(status: u16, title: &str, detail: &str) -> String {
    json!({
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    })
    .to_string()
}

/// A response tollgate answers itself, as plain data: the Worker turns it
/// into a platform response, `explain` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnResponse {
    pub(crate) status: u16,
    /// Lowercased names, in order.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl OwnResponse {
    /// An RFC 9457 problem, with `Retry-After` when given.
    pub(crate) fn problem(status: u16, title: &str, detail: &str, retry_after_s: Option<u64>) -> OwnResponse {
        let mut headers = vec![("content-type".to_string(), "application/problem+json".to_string())];
        if let Some(s) = retry_after_s {
            headers.push(("retry-after".to_string(), s.to_string()));
        }
        OwnResponse { status, headers, body: problem_body(status, title, detail) }
    }

    /// A header's value, by lowercased name.
    #[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// `RateLimit-Policy` and `RateLimit` for one rule's windows, as
/// [`RateReport`] says; no `RateLimit-Policy` when it would be empty (the
/// draft's list is non-empty).
pub(crate) fn rate_fields(policies: &Policies<'_>, windows: &[WireWindow], report: RateReport) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(2);
    let mut items = ratelimit_policy(policies, windows);
    // One item (the common case) is the field as it is: not joined anew.
    let policy = if items.len() == 1 { items.pop() } else { (!items.is_empty()).then(|| items.join(", ")) };
    if let Some(policy) = policy {
        out.push(("ratelimit-policy".to_string(), policy));
    }
    if let Some(value) = ratelimit(policies, windows, report) {
        out.push(("ratelimit".to_string(), value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(limit: u32, window_ms: u64, remaining: u64, reset_ms: u64) -> WireWindow {
        WireWindow { limit, window_ms, used: u64::from(limit) - remaining, remaining, reset_ms, calendar: None }
    }

    fn plain(rule: &str) -> Policies<'_> {
        Policies::of_requests(rule)
    }

    #[test]
    fn exact_syntax_single_window() {
        let w = [window(10, 60_000, 0, 41_001)];
        let p = plain("heavy-example");
        assert_eq!(ratelimit_policy(&p, &w), ["\"heavy-example\";q=10;w=60"]);
        assert_eq!(ratelimit(&p, &w, RateReport::Allowed).unwrap(), "\"heavy-example\";r=0;t=42");
        assert_eq!(ratelimit(&p, &w, RateReport::Window { index: 0, retry_after_ms: 1 }).unwrap(), "\"heavy-example\";r=0;t=1");
    }

    #[test]
    fn exact_syntax_several_windows() {
        let w = [window(3, 60_000, 2, 60_000), window(20, 3_600_000, 1, 10_000)];
        let p = plain("heavy");
        assert_eq!(ratelimit_policy(&p, &w), ["\"heavy/60s\";q=3;w=60", "\"heavy/3600s\";q=20;w=3600"]);
        assert_eq!(ratelimit(&p, &w, RateReport::Allowed).unwrap(), "\"heavy/3600s\";r=1;t=10");
        assert_eq!(ratelimit(&p, &w, RateReport::Window { index: 0, retry_after_ms: 5_000 }).unwrap(), "\"heavy/60s\";r=2;t=5");
        assert_eq!(ratelimit(&p, &w, RateReport::Window { index: 9, retry_after_ms: 5_000 }).unwrap(), "\"heavy/3600s\";r=1;t=5", "an index past the windows: the tightest");
        assert_eq!(rate_fields(&p, &[], RateReport::Allowed), Vec::<(String, String)>::new(), "no empty list");
    }

    /// The items are built without `format!`:
    /// byte for byte what the `format!` forms they replaced write, for plain
    /// and escaped names, units, several windows and every integer width.
    #[test]
    fn the_fast_writers_equal_the_format_forms() {
        for n in [0, 1, 9, 10, 99, 100, 59_999, 4_294_967_295, u64::MAX] {
            let mut out = String::from("x");
            push_u64(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
        let reference_name = |rule: &str, windows: &[WireWindow], index: usize| -> String {
            let Some(window) = windows.get(index).filter(|_| windows.len() > 1) else { return rule.to_string() };
            let ms = window.window_ms;
            let length = if ms % 1000 == 0 { format!("{}s", ms / 1000) } else { format!("{ms}ms") };
            match windows[..index].iter().filter(|w| w.window_ms == ms).count() {
                0 => format!("{rule}/{length}"),
                earlier => format!("{rule}/{length}/{}", earlier + 1),
            }
        };
        let reference_sf = |text: &str| -> String {
            let mut out = String::from("\"");
            for c in text.chars().filter(|c| (' '..='~').contains(c)) {
                if c == '"' || c == '\\' {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push('"');
            out
        };
        let windows = [window(10, 60_000, 3, 41_001), window(5, 500, 0, 200), window(7, 60_000, 7, 0), window(1, 0, 1, 0)];
        for rule in ["heavy-example", "tollgate:admin-auth", "a\"b\\c", "é\u{1}x"] {
            for unit in [None, Some("x-tokens"), Some("we\"ird")] {
                for concurrency in [None, Some(3)] {
                    let p = Policies { rule, unit, concurrency, windowless: false };
                    for count in 1..=windows.len() {
                        let w = &windows[..count];
                        let expected: Vec<String> = w
                            .iter()
                            .enumerate()
                            .map(|(i, x)| {
                                let unit = unit.map(|u| format!(";qu={}", reference_sf(u))).unwrap_or_default();
                                let secs = if x.window_ms % 1000 == 0 && x.window_ms > 0 { format!(";w={}", x.window_ms / 1000) } else { String::new() };
                                format!("{};q={}{unit}{secs}", reference_sf(&reference_name(rule, w, i)), x.limit)
                            })
                            .chain(concurrency.map(|n| format!("{};q={n};qu=\"concurrent-requests\"", reference_sf(&format!("{rule}/concurrency")))))
                            .collect();
                        assert_eq!(ratelimit_policy(&p, w), expected);
                        for i in 0..count {
                            let report = RateReport::Window { index: i, retry_after_ms: 1_234 };
                            let expected = format!("{};r={};t=2", reference_sf(&reference_name(rule, w, i)), w[i].remaining);
                            assert_eq!(ratelimit(&p, w, report), Some(expected));
                            assert_eq!(policy_name(rule, w, i), reference_name(rule, w, i));
                        }
                    }
                }
            }
        }
    }

    /// Sub-second windows were stated as `w=1` (half the rate
    /// the limiter allows for 500 ms); the draft has no sub-second `w`.
    #[test]
    fn a_calendar_window_is_named_by_its_unit_and_states_no_w() {
        use crate::count::calendar::Unit;
        let day = WireWindow { calendar: Some(Unit::Day), ..window(300, Unit::Day.longest_ms(), 0, 5_400_000) };
        let w = [window(10, 60_000, 3, 1_000), day.clone()];
        let p = plain("school");
        assert_eq!(ratelimit_policy(&p, &w), ["\"school/60s\";q=10;w=60", "\"school/day\";q=300"]);
        let refused = RateReport::Window { index: 1, retry_after_ms: 5_400_000 };
        assert_eq!(ratelimit(&p, &w, refused).unwrap(), "\"school/day\";r=0;t=5400");
        // Alone, it is named by the rule and still has no `w`.
        assert_eq!(ratelimit_policy(&p, &[day]), ["\"school\";q=300"]);
    }

    #[test]
    fn a_window_that_is_not_whole_seconds_has_no_w() {
        let w = [window(5, 500, 5, 0), window(8, 1_000, 8, 0), window(9, 1_500, 9, 0)];
        assert_eq!(ratelimit_policy(&plain("burst"), &w), ["\"burst/500ms\";q=5", "\"burst/1s\";q=8;w=1", "\"burst/1500ms\";q=9"]);
        assert_eq!(ratelimit_policy(&plain("one"), &w[..1]), ["\"one\";q=5"]);
    }

    /// `60s` and `1m` in one rule gave two `"dup-60s"`; a rule
    /// named `api-60s` beside rule `api`'s 60 s window gave two `"api-60s"`.
    #[test]
    fn no_two_items_share_a_name() {
        let dup = [window(10, 60_000, 10, 0), window(20, 60_000, 20, 0), window(30, 60_000, 30, 0)];
        assert_eq!(ratelimit_policy(&plain("dup"), &dup), ["\"dup/60s\";q=10;w=60", "\"dup/60s/2\";q=20;w=60", "\"dup/60s/3\";q=30;w=60"]);
        assert_eq!(ratelimit(&plain("dup"), &dup, RateReport::Window { index: 1, retry_after_ms: 1 }).unwrap(), "\"dup/60s/2\";r=20;t=1");
        // Rule names are unique and hold no `/`: a derived name is never
        // another rule's name, nor another rule's derived name.
        let two = [window(1, 60_000, 1, 0), window(2, 3_600_000, 2, 0)];
        let names = |rule: &str, w: &[WireWindow]| (0..w.len()).map(|i| policy_name(rule, w, i)).collect::<Vec<_>>();
        let mut all = names("api", &two);
        all.extend(names("api-60s", &two[..1]));
        all.extend(names("api-60s", &two));
        all.push(concurrency_name("api"));
        all.push(concurrency_name("api-60s"));
        let mut unique = all.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), all.len(), "{all:?}");
    }

    /// A usage rule's quota is in the origin's units.
    #[test]
    fn a_usage_rule_states_its_unit() {
        let p = Policies { rule: "ai", unit: Some("x-tokens"), concurrency: None, windowless: false };
        let w = [window(10_000, 86_400_000, 5_766, 1_000)];
        assert_eq!(ratelimit_policy(&p, &w), ["\"ai\";q=10000;qu=\"x-tokens\";w=86400"]);
        assert_eq!(ratelimit(&p, &w, RateReport::Allowed).unwrap(), "\"ai\";r=5766;t=1");
    }

    /// A refusal by the slots named a window (`r=98`).
    #[test]
    fn the_slots_are_a_policy_of_their_own() {
        let p = Policies { rule: "conc", unit: None, concurrency: Some(2), windowless: false };
        let w = [window(100, 60_000, 98, 30_000)];
        let fields = rate_fields(&p, &w, RateReport::NoSlot);
        assert_eq!(fields[0].1, "\"conc\";q=100;w=60, \"conc/concurrency\";q=2;qu=\"concurrent-requests\"");
        assert_eq!(fields[1].1, "\"conc/concurrency\";r=0", "no slot free, no `t`");
        assert_eq!(rate_fields(&p, &w, RateReport::Allowed)[1].1, "\"conc\";r=98;t=30", "allowed: the window");
    }

    /// A `concurrency` rule without `limits` carries a stand-in window of
    /// u32::MAX a second: no field may name it (it showed `q=4294967295;w=1`).
    #[test]
    fn a_windowless_rule_states_only_its_slots() {
        let p = Policies { rule: "conc", unit: None, concurrency: Some(2), windowless: true };
        let w = [window(u32::MAX, 1_000, u64::from(u32::MAX - 1), 1_000)];
        let refused = rate_fields(&p, &w, RateReport::NoSlot);
        assert_eq!(refused[0], ("ratelimit-policy".to_string(), "\"conc/concurrency\";q=2;qu=\"concurrent-requests\"".to_string()));
        assert_eq!(refused[1].1, "\"conc/concurrency\";r=0");
        let allowed = rate_fields(&p, &w, RateReport::Allowed);
        assert_eq!(allowed, [("ratelimit-policy".to_string(), "\"conc/concurrency\";q=2;qu=\"concurrent-requests\"".to_string())], "no window item, no r of a stand-in");
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(sf_string("a\"b\\c\u{1}é"), "\"a\\\"b\\\\c\"");
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(seconds_ceil(0), 0);
        assert_eq!(seconds_ceil(1), 1);
        assert_eq!(seconds_ceil(1_000), 1);
        assert_eq!(seconds_ceil(1_001), 2);
    }

    #[test]
    fn problem_json() {
        let body: serde_json::Value = serde_json::from_str(&crate::config::response::Problems::shaped("r", None).body(429, 7)).unwrap();
        assert_eq!(body["status"], 429);
        assert_eq!(body["retry_after"], 7);
        assert_eq!(body["title"], "Too Many Requests");
    }

    impl<'a> Policies<'a> {
        /// A rule counting requests, without slots.
        pub(crate) fn of_requests(rule: &'a str) -> Policies<'a> {
            Policies { rule, unit: None, concurrency: None, windowless: false }
        }
    }
}
