//! Response fields for limited requests.
//!
//! - `Retry-After` (RFC 9110 §10.2.3) as an integer of seconds, rounded up.
//! - `RateLimit-Policy` and `RateLimit` as Structured Fields (RFC 9651
//!   Lists of Items), following draft-ietf-httpapi-ratelimit-headers-11:
//!   `RateLimit-Policy: "heavy-example";q=10;w=60` and
//!   `RateLimit: "heavy-example";r=0;t=42`.
//! - The 429 / 503 body as RFC 9457 `application/problem+json`.

use crate::count::protocol::WireWindow;
use serde_json::json;

/// Whole seconds, rounded up, at least 1 for any positive wait.
pub fn seconds_ceil(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// The policy name of one window: the rule's name when it has a single
/// window, else the rule's name and the window length (`login-900s`, or
/// `burst-500ms` for a window that is not whole seconds), so every item of
/// `RateLimit-Policy` has a distinct name.
pub fn policy_name(rule: &str, window_ms: u64, windows: usize) -> String {
    if windows <= 1 {
        rule.to_string()
    } else if window_ms.is_multiple_of(1000) {
        format!("{rule}-{}s", window_ms / 1000)
    } else {
        format!("{rule}-{window_ms}ms")
    }
}

/// `RateLimit-Policy` items, one per window: quota `q` and window `w` in
/// seconds.
pub fn ratelimit_policy(rule: &str, windows: &[WireWindow]) -> Vec<String> {
    windows
        .iter()
        .map(|w| {
            format!(
                "\"{}\";q={};w={}",
                policy_name(rule, w.window_ms, windows.len()),
                w.limit,
                seconds_ceil(w.window_ms)
            )
        })
        .collect()
}

/// The `RateLimit` item of one window: `r` remaining units, `t` seconds
/// until they grow. For a blocked request pass the binding window's index
/// and the retry-after, which becomes `t`; otherwise the most constraining
/// window (least remaining, then latest reset) is reported.
pub fn ratelimit(
    rule: &str,
    windows: &[WireWindow],
    blocked: Option<(usize, u64)>,
) -> Option<String> {
    let retry_after_ms = blocked.map(|(_, ms)| ms);
    let tightest = match blocked.and_then(|(index, _)| windows.get(index)) {
        Some(binding) => binding,
        None => windows
            .iter()
            .min_by(|a, b| a.remaining.cmp(&b.remaining).then(b.reset_ms.cmp(&a.reset_ms)))?,
    };
    let t = seconds_ceil(retry_after_ms.unwrap_or(tightest.reset_ms));
    Some(format!(
        "\"{}\";r={};t={}",
        policy_name(rule, tightest.window_ms, windows.len()),
        tightest.remaining,
        t
    ))
}

/// The RFC 9457 body of any other error tollgate answers itself.
pub fn problem_body(status: u16, title: &str, detail: &str) -> String {
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
pub struct OwnResponse {
    pub status: u16,
    /// Lowercased names, in order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl OwnResponse {
    /// An RFC 9457 problem, with `Retry-After` when given.
    pub fn problem(status: u16, title: &str, detail: &str, retry_after_s: Option<u64>) -> OwnResponse {
        let mut headers = vec![("content-type".to_string(), "application/problem+json".to_string())];
        if let Some(s) = retry_after_s {
            headers.push(("retry-after".to_string(), s.to_string()));
        }
        OwnResponse { status, headers, body: problem_body(status, title, detail) }
    }

    /// A header's value, by lowercased name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// `RateLimit-Policy` and `RateLimit` for one rule's windows; `blocked` as
/// in [`ratelimit`].
pub fn rate_fields(rule: &str, windows: &[WireWindow], blocked: Option<(usize, u64)>) -> Vec<(String, String)> {
    let mut out = vec![("ratelimit-policy".to_string(), ratelimit_policy(rule, windows).join(", "))];
    if let Some(value) = ratelimit(rule, windows, blocked) {
        out.push(("ratelimit".to_string(), value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(limit: u32, window_ms: u64, remaining: u64, reset_ms: u64) -> WireWindow {
        WireWindow { limit, window_ms, used: u64::from(limit) - remaining, remaining, reset_ms }
    }

    #[test]
    fn exact_syntax_single_window() {
        let w = [window(10, 60_000, 0, 41_001)];
        assert_eq!(ratelimit_policy("heavy-example", &w), ["\"heavy-example\";q=10;w=60"]);
        assert_eq!(ratelimit("heavy-example", &w, None).unwrap(), "\"heavy-example\";r=0;t=42");
        assert_eq!(ratelimit("heavy-example", &w, Some((0, 1))).unwrap(), "\"heavy-example\";r=0;t=1");
    }

    #[test]
    fn exact_syntax_several_windows() {
        let w = [window(3, 60_000, 2, 60_000), window(20, 3_600_000, 1, 10_000)];
        assert_eq!(
            ratelimit_policy("heavy", &w),
            ["\"heavy-60s\";q=3;w=60", "\"heavy-3600s\";q=20;w=3600"]
        );
        assert_eq!(ratelimit("heavy", &w, None).unwrap(), "\"heavy-3600s\";r=1;t=10");
        assert_eq!(ratelimit("heavy", &w, Some((0, 5_000))).unwrap(), "\"heavy-60s\";r=2;t=5");
    }

    #[test]
    fn sub_second_windows_keep_distinct_names() {
        let w = [window(5, 500, 5, 0), window(8, 1_000, 8, 0)];
        assert_eq!(ratelimit_policy("burst", &w), ["\"burst-500ms\";q=5;w=1", "\"burst-1s\";q=8;w=1"]);
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
        let body: serde_json::Value = serde_json::from_str(&crate::config::response::Problems::new("r").body(429, 7)).unwrap();
        assert_eq!(body["status"], 429);
        assert_eq!(body["retry_after"], 7);
        assert_eq!(body["title"], "Too Many Requests");
    }
}
