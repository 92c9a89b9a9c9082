//! WebSocket upgrades under rules that count the origin's answers.
//! Pure.
//!
//! - A `concurrency` rule holds the slot for the whole session: the Worker
//!   relays it and gives the slot back once either side closed it
//!   ([`crate::count::slots`]).
//! - A usage rule (`metering = { header, reserve, max }`) reads the units spent
//!   from the answer's header, and a session has one answer (its 101) for
//!   any number of messages: whatever it charged (the 101's header, or
//!   `reserve`), one session could spend any amount against the budget. So
//!   a `block` usage rule refuses the upgrade (403, nothing reserved, an
//!   `upgrade_refused` line) before any counter is asked; a `log` (shadow)
//!   rule lets it through, charged as any answer is.

use crate::config::headers::OwnResponse;
use crate::config::policy::Action;
use crate::pipeline::applied::Applied;
use crate::pipeline::facts::HeaderMap;
use crate::pipeline::verdict::LogEvent;

/// Whether the request asks for a WebSocket upgrade: `Upgrade` lists the
/// token `websocket`, in any case (RFC 6455 §4.2.1; workerd upgrades on
/// exactly this header).
pub(crate) fn asks_websocket(headers: &HeaderMap) -> bool {
    headers
        .get("upgrade")
        .is_some_and(|value| value.split(',').any(|token| token.trim().eq_ignore_ascii_case("websocket")))
}

/// The first `block` usage rule of `applied` that refuses this request's
/// upgrade; `None`: not an upgrade, or no such rule.
pub(crate) fn refusing<'a, 'c>(applied: &'a [Applied<'c>], headers: &HeaderMap) -> Option<&'a Applied<'c>> {
    let refuses = |a: &&Applied<'c>| a.rule.usage.is_some() && a.rule.action == Action::Block;
    applied.iter().find(refuses).filter(|_| asks_websocket(headers))
}

/// tollgate's answer to an upgrade a usage rule refuses, and its log line.
pub(crate) fn refusal(applied: &Applied<'_>) -> (OwnResponse, LogEvent) {
    let header = applied.rule.usage.as_ref().map_or("", |u| u.unit());
    let detail = format!(
        "Rule `{}` charges the usage each answer reports in `{header}`; a WebSocket session reports none, so it is not opened.",
        applied.rule.name
    );
    let event = LogEvent::new(
        "upgrade_refused",
        vec![("rule", applied.rule.name.as_str().into()), ("key_hash", applied.key_hash.as_str().into()), ("reason", "usage".into())],
    );
    (OwnResponse::problem(403, "Forbidden", &detail, None), event)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::memo::PlanMemo;
    use crate::pipeline::verdict::Answer;
    use crate::testing::{allowed, leaked, Req};
    use serde_json::json;

    #[test]
    fn the_upgrade_token_is_read_as_workerd_and_browsers_send_it() {
        let asks = |value: &str| asks_websocket(&HeaderMap::from_pairs(&[("upgrade", value)]));
        assert!(asks("websocket") && asks("WebSocket") && asks(" websocket ") && asks("h2c, websocket"));
        assert!(!asks("h2c") && !asks("websockets") && !asks(""));
        assert!(!asks_websocket(&HeaderMap::default()));
    }

    /// A usage rule refuses an upgrade before it reserves (no counter is
    /// asked); a shadow one, a concurrency rule, or a plain request does not.
    #[test]
    fn a_block_usage_rule_refuses_an_upgrade_before_any_counter() {
        let c = leaked(json!([
            { "name": "ai", "path": "/ai/*", "key": ["header:x-key"], "limits": [{ "requests": 10_000, "window": "1d" }],
              "cost": { "header": "x-tokens", "reserve": 100, "max": 3_000 } },
            { "name": "shadow", "path": "/shadow/*", "key": ["header:x-key"], "action": "log", "limits": [{ "requests": 10_000, "window": "1d" }],
              "cost": { "header": "x-tokens", "reserve": 100, "max": 3_000 } },
            { "name": "slots", "path": "/ws/*", "key": ["header:x-key"], "limits": [{ "requests": 100, "window": "1m" }], "concurrency": 1 },
        ]));
        let ws = |path: &str| Req::get(path).ip("192.0.2.1").header("x-key", "k").header("upgrade", "websocket");
        let asked = std::cell::Cell::new(0);
        let counting = |a: &crate::pipeline::applied::Applied<'_>| {
            asked.set(asked.get() + 1);
            allowed(a)
        };
        let d = ws("/ai/chat").decide(c, &PlanMemo::new(1), &counting);
        assert_eq!(asked.get(), 0, "no counter is asked");
        assert!(matches!(&d.answer, Answer::Respond(r) if r.status == 403), "{:?}", d.answer);
        assert!(d.settle.is_empty() && !d.forwarding.settles, "nothing reserved, nothing to settle");
        assert_eq!(d.logs.iter().map(|e| e.event).collect::<Vec<_>>(), ["upgrade_refused"]);
        for path in ["/shadow/chat", "/ws/chat"] {
            let d = ws(path).decide(c, &PlanMemo::new(1), &allowed);
            assert!(matches!(d.answer, Answer::Forward { .. }), "{path}");
        }
        let plain = Req::get("/ai/chat").ip("192.0.2.1").header("x-key", "k").decide(c, &PlanMemo::new(1), &allowed);
        assert!(matches!(plain.answer, Answer::Forward { .. }), "a plain request is charged as before");
    }
}
