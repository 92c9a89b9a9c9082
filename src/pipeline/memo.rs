//! The isolate's plan memo: a blocked client's repeats skip the plan.
//!
//! A client over its limit tends to send the very same request again and
//! again. Its answer comes from the blocked-until cache ([`crate::count::blocked`])
//! without any object call, but each repeat would still pay the whole
//! [`plan`](crate::pipeline::plan::plan): canonical path and query, cookies, rule
//! matching, key derivation and the SHA-256 key hash.
//!
//! Exact by construction: the plan is a pure function of the config (fixed
//! for the isolate's life), the method, the URL, the `cf` fields, the log
//! key and secrets (fixed too), the headers it reads and the body. The memo
//! keeps a plan only when
//! - the body was never needed (the plan decided with the body unread),
//! - no rule reads the clock (a `trusted_device` cookie expires),
//! - it checked rules, none of them exempt (so the rules checked are all
//!   that the rest of the request's handling reads of it),
//!
//! (the Worker keeps only the plans of requests it found blocked: the
//! flood case), under the method, URL and `cf` fields ([`Fingerprint`]), together with
//! every header it read, in order, and the value it got ([`Reads`]). A
//! request with the same fingerprint replays the plan only if each of those
//! headers reads the same again: the plan, being deterministic, would then
//! read exactly these headers and decide exactly the same. Anything else is
//! planned afresh. The rules it replays are checked as any others: through
//! the blocked-until cache, then their objects. A URL the memo holds a plan
//! for is one some rule takes ([`PlanMemo::holds_url`]).
//!
//! Bounded: at most `capacity` entries, the oldest dropped first; a URL and
//! header values over [`MAX_ENTRY_BYTES`] are not kept (a kept plan's keys
//! come from them, at most four identities per rule, so an entry stays
//! within a few times that). A client varying its requests only misses
//! the memo (each miss is an ordinary plan), or pushes older entries out
//! (their repeats are planned again); it cannot change what another
//! request is planned as.

use crate::pipeline::applied::{Applied, Matched};
use crate::pipeline::plan::{Plan, Route};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

/// Entries kept by default: a few hundred blocked clients' repeats.
pub(crate) const DEFAULT_CAPACITY: usize = 512;

/// An entry whose fingerprint and header values exceed this many bytes is
/// not kept (bounds the memo's memory at `capacity` × this).
pub(crate) const MAX_ENTRY_BYTES: usize = 4096;

/// What the plan reads besides headers and body, as one string: the method
/// as sent, the URL as serialized, the `cf` fields the plan takes. Two
/// requests have the same fingerprint only if all of these are equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Fingerprint {
    line: String,
    /// Where the URL is in `line`.
    url: std::ops::Range<usize>,
}

impl Fingerprint {
    pub(crate) fn new(method: &str, url: &str, country: Option<&str>, asn: Option<u32>, verified_bot: Option<&str>) -> Fingerprint {
        // Each field length-prefixed, so that no two requests share one
        // (whatever their fields hold); absent differs from empty.
        let mut line = String::with_capacity(method.len() + url.len() + 24);
        let mut at = 0..0;
        for (i, field) in [Some(method), Some(url), country, verified_bot].into_iter().enumerate() {
            match field {
                Some(v) => {
                    crate::count::algorithm::push_u64(&mut line, v.len() as u64);
                    line.push(':');
                    if i == 1 {
                        at = line.len()..line.len() + v.len();
                    }
                    line.push_str(v);
                }
                None => line.push('-'),
            }
        }
        if let Some(asn) = asn {
            crate::count::algorithm::push_u64(&mut line, u64::from(asn));
        }
        Fingerprint { line, url: at }
    }

    fn url(&self) -> &str {
        &self.line[self.url.clone()]
    }
}

/// The headers a plan read, in order, with the values it got.
#[derive(Debug, Default)]
pub(crate) struct Reads(RefCell<Vec<(String, Option<String>)>>);

impl Reads {
    /// Looks `name` up with `header` and records what it read.
    pub(crate) fn read(&self, header: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
        let value = header(name);
        self.0.borrow_mut().push((name.to_string(), value.clone()));
        value
    }

    fn bytes(&self) -> usize {
        self.0.borrow().iter().map(|(n, v)| n.len() + v.as_ref().map_or(0, String::len)).sum()
    }
}

/// Whether a fresh plan, planned with the body unread, is one the memo
/// keeps: it checked rules, none of its matching rules exempted the
/// request, and a counter found the client `blocked` (the flood case).
pub(crate) fn keeps(matched: &[Matched<'_>], applied: &[Applied<'_>], blocked: bool) -> bool {
    blocked && !applied.is_empty() && matched.iter().all(|m| m.exempt.is_none())
}

struct MemoEntry {
    reads: Vec<(String, Option<String>)>,
    applied: Vec<Applied<'static>>,
}

/// A capped map from fingerprint to the plan's checked rules.
pub(crate) struct PlanMemo {
    entries: HashMap<Fingerprint, MemoEntry>,
    order: VecDeque<Fingerprint>,
    /// The URLs of the entries, each with its number of entries.
    urls: HashMap<String, usize>,
    capacity: usize,
}

impl PlanMemo {
    pub(crate) fn new(capacity: usize) -> PlanMemo {
        PlanMemo { entries: HashMap::new(), order: VecDeque::new(), urls: HashMap::new(), capacity: capacity.max(1) }
    }

    /// Whether some kept plan is of a request to `url`. Such a plan checked
    /// rules, so some rule takes `url`: the zone's [`crate::pipeline::plane::walk`], a
    /// function of the URL alone, plans it and need not be asked.
    pub(crate) fn holds_url(&self, url: &str) -> bool {
        self.urls.contains_key(url)
    }

    /// The plan of a request with `fingerprint`, if one was kept and every
    /// header it read reads the same with `header`: the rules it checked,
    /// as `Route::Check` (no canonical view, no matched rules: a kept plan
    /// exempted none, so its checked rules are all the rest of a request's
    /// handling reads of it).
    pub(crate) fn replay<V: AsRef<str>>(&self, fingerprint: &Fingerprint, header: &dyn Fn(&str) -> Option<V>) -> Option<Plan<'static>> {
        let entry = self.entries.get(fingerprint)?;
        entry
            .reads
            .iter()
            .all(|(name, value)| header(name).as_ref().map(AsRef::as_ref) == value.as_deref())
            .then(|| Plan { canonical: None, matched: Vec::new(), route: Route::Check(entry.applied.clone()) })
    }

    /// Keeps `applied`, the rules a plan checked, for `fingerprint` and the
    /// headers it read (`reads`); the caller has made sure the plan is one
    /// to keep ([`keeps`] and the module doc). Too large: not kept.
    pub(crate) fn keep(&mut self, fingerprint: Fingerprint, reads: Reads, applied: Vec<Applied<'static>>) {
        if applied.is_empty() || fingerprint.line.len() + reads.bytes() > MAX_ENTRY_BYTES {
            return;
        }
        let entry = MemoEntry { reads: reads.0.into_inner(), applied };
        if self.entries.insert(fingerprint.clone(), entry).is_some() {
            return;
        }
        *self.urls.entry(fingerprint.url().to_string()).or_default() += 1;
        self.order.push_back(fingerprint);
        while self.entries.len() > self.capacity {
            let Some(oldest) = self.order.pop_front() else { break };
            self.entries.remove(&oldest);
            if let Some(n) = self.urls.get_mut(oldest.url()) {
                *n -= 1;
                if *n == 0 {
                    self.urls.remove(oldest.url());
                }
            }
        }
    }

}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::pipeline::plan::{plan, Body, RequestParts, Route};
    use serde_json::json;

    fn config() -> &'static Config {
        let c = crate::testing::config(json!([
            { "name": "heavy", "path": "/x", "query": { "mode": "heavy" }, "query_sources": ["query", "cookie"],
              "key": ["ip", "header:x-tenant"], "limits": [{ "requests": 1, "window": "60s" }] },
            { "name": "all", "path": "/x", "key": ["ip"], "limits": [{ "requests": 5, "window": "60s" }] },
        ]));
        Box::leak(Box::new(c))
    }

    /// The plan of GET `url` with `headers`, the headers it read, and its
    /// checked rules.
    fn planned(c: &'static Config, url: &str, headers: &[(&str, &str)]) -> (Fingerprint, Reads, Vec<Applied<'static>>) {
        let header = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string());
        let reads = Reads::default();
        let recording = |name: &str| reads.read(&header, name);
        let p = plan(c, &RequestParts::plain("GET", url, &recording, Body::Unread));
        let Route::Check(applied) = p.route else { panic!("{:?}", p.route) };
        (Fingerprint::new("GET", url, None, None, None), reads, applied)
    }

    fn ids(applied: &[Applied<'_>]) -> Vec<String> {
        applied.iter().map(|a| format!("{} {}", a.id, a.key_hash)).collect()
    }

    /// The ids and hashes a replayed plan checks.
    fn replayed_ids(plan: Plan<'_>) -> Vec<String> {
        assert!(plan.canonical.is_none() && plan.matched.is_empty());
        let Route::Check(applied) = plan.route else { panic!("{:?}", plan.route) };
        ids(&applied)
    }

    const URL: &str = "https://ex.com/x?mode=heavy";

    #[test]
    fn a_repeat_replays_the_very_plan_and_any_changed_input_plans_afresh() {
        let c = config();
        let base = [("cf-connecting-ip", "192.0.2.1"), ("x-tenant", "7"), ("cookie", "a=b")];
        let (fp, reads, applied) = planned(c, URL, &base);
        assert_eq!(applied.len(), 2);
        assert!(reads.0.borrow().iter().any(|(n, _)| n == "cookie"), "the cookie was read: {:?}", reads.0.borrow());
        let mut memo = PlanMemo::new(8);
        memo.keep(fp.clone(), reads, applied.clone());
        let header_of = |headers: &'static [(&'static str, &'static str)]| {
            move |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
        };
        // The same inputs, and a header the plan never reads added: replayed.
        assert_eq!(memo.replay(&fp, &header_of(&[("cf-connecting-ip", "192.0.2.1"), ("x-tenant", "7"), ("cookie", "a=b")])).map(replayed_ids), Some(ids(&applied)));
        assert_eq!(
            memo.replay(&fp, &header_of(&[("cf-connecting-ip", "192.0.2.1"), ("x-tenant", "7"), ("cookie", "a=b"), ("user-agent", "x")])).map(replayed_ids),
            Some(ids(&applied))
        );
        // Another value of any header it read, or one gone or added (a
        // cookie `mode=light` would change the match): planned afresh.
        for changed in [
            &[("cf-connecting-ip", "192.0.2.2"), ("x-tenant", "7"), ("cookie", "a=b")][..],
            &[("cf-connecting-ip", "192.0.2.1"), ("x-tenant", "07"), ("cookie", "a=b")],
            &[("cf-connecting-ip", "192.0.2.1"), ("cookie", "a=b")],
            &[("cf-connecting-ip", "192.0.2.1"), ("x-tenant", "7"), ("cookie", "mode=light")],
            &[("cf-connecting-ip", "192.0.2.1"), ("x-tenant", "7")],
        ] {
            let changed: &'static [(&'static str, &'static str)] = Box::leak(changed.to_vec().into_boxed_slice());
            assert!(memo.replay(&fp, &header_of(changed)).is_none(), "{changed:?}");
        }
        // Another method, URL or cf field is another fingerprint.
        for other in [
            Fingerprint::new("POST", URL, None, None, None),
            Fingerprint::new("GET", "https://ex.com/x?mode=heavy&", None, None, None),
            Fingerprint::new("GET", URL, Some(""), None, None),
            Fingerprint::new("GET", URL, None, Some(0), None),
            Fingerprint::new("GET", URL, None, None, Some("")),
            Fingerprint::new("GET", URL, Some("1"), None, None),
            Fingerprint::new("GET", URL, None, None, Some("1")),
            Fingerprint::new("GET", URL, None, Some(1), None),
            Fingerprint::new("GET", &format!("{URL}-"), None, None, None),
        ] {
            assert_ne!(other, fp);
            assert!(memo.replay(&other, &header_of(&[("cf-connecting-ip", "192.0.2.1"), ("x-tenant", "7"), ("cookie", "a=b")])).is_none());
        }
    }

    /// Every combination of a few values of each header: whenever the memo
    /// replays, the fresh plan checks the very same rules, keys and hashes.
    #[test]
    fn a_replay_is_always_the_fresh_plan() {
        let c = config();
        let ips = [None, Some("192.0.2.1"), Some("2001:db8::1"), Some("2001:db8::2")];
        let tenants = [None, Some("7"), Some("07")];
        let cookies = [None, Some("a=b"), Some("mode=light"), Some("mode=heavy")];
        let mut requests = Vec::new();
        for ip in ips {
            for tenant in tenants {
                for cookie in cookies {
                    let headers: Vec<(&'static str, &'static str)> =
                        [("cf-connecting-ip", ip), ("x-tenant", tenant), ("cookie", cookie)].into_iter().filter_map(|(n, v)| Some((n, v?))).collect();
                    requests.push(headers);
                }
            }
        }
        let (mut kept, mut replayed) = (0, 0);
        for first in &requests {
            let header = |name: &str| first.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string());
            let reads = Reads::default();
            let recording = |name: &str| reads.read(&header, name);
            let Route::Check(applied) = plan(c, &RequestParts::plain("GET", URL, &recording, Body::Unread)).route else { continue };
            let mut memo = PlanMemo::new(4);
            let fp = Fingerprint::new("GET", URL, None, None, None);
            memo.keep(fp.clone(), reads, applied);
            kept += memo.len();
            // A kept plan checked rules, so the URL may apply.
            assert!(memo.holds_url(URL) && crate::pipeline::plan::tests::may_apply(c, URL));
            for other in &requests {
                let header = |name: &str| other.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string());
                if let Some(replay) = memo.replay(&fp, &header) {
                    replayed += 1;
                    let Route::Check(fresh) = plan(c, &RequestParts::plain("GET", URL, &header, Body::Unread)).route else { panic!("{other:?}") };
                    assert_eq!(replayed_ids(replay), ids(&fresh), "{first:?} replayed for {other:?}");
                }
            }
        }
        assert!(kept > 10 && replayed >= kept, "{kept} kept, {replayed} replayed");
    }

    /// Only a blocked request's plan is kept, and only one that exempted
    /// no matching rule and checked some.
    #[test]
    fn keeps_blocked_plans_without_exemptions() {
        let c: &'static Config = Box::leak(Box::new(
            crate::testing::config(json!([
                { "name": "all", "path": "/x", "limits": [{ "requests": 1, "window": "60s" }] },
                { "name": "office", "path": "/x", "exempt": { "ips": ["192.0.2.0/24"] }, "limits": [{ "requests": 1, "window": "60s" }] },
            ])),
        ));
        let planned = |ip: &'static str| {
            let header = move |name: &str| (name == "cf-connecting-ip").then(|| ip.to_string());
            plan(c, &RequestParts::plain("GET", URL, &header, Body::Unread))
        };
        let outside = planned("198.51.100.1");
        let Route::Check(applied) = &outside.route else { panic!("{:?}", outside.route) };
        assert_eq!(applied.len(), 2);
        assert!(keeps(&outside.matched, applied, true));
        assert!(!keeps(&outside.matched, applied, false), "not blocked");
        let office = planned("192.0.2.1");
        let Route::Check(applied) = &office.route else { panic!("{:?}", office.route) };
        assert_eq!(applied.len(), 1, "the office rule exempts it");
        assert!(!keeps(&office.matched, applied, true), "an exemption in the plan");
        assert!(!keeps(&[], &[], true), "no rule checked");
    }

    #[test]
    fn the_memo_is_capped_oldest_first_and_keeps_no_large_entry() {
        let c = config();
        let mut memo = PlanMemo::new(2);
        let ip = |i: usize| format!("192.0.2.{i}");
        let mut fps = Vec::new();
        for i in 1..=3 {
            let ip = ip(i);
            let headers = [("cf-connecting-ip", ip.as_str()), ("x-tenant", "7")];
            let url = format!("https://ex.com/x?mode=heavy&n={i}");
            let (_, reads, applied) = planned(c, &url, &headers);
            let fp = Fingerprint::new("GET", &url, None, None, None);
            memo.keep(fp.clone(), reads, applied);
            fps.push((fp, ip));
        }
        assert_eq!(memo.len(), 2);
        let replays = |(fp, ip): &(Fingerprint, String)| {
            let ip = ip.clone();
            memo.replay(fp, &move |name: &str| match name {
                "cf-connecting-ip" => Some(ip.clone()),
                "x-tenant" => Some("7".into()),
                _ => None,
            })
            .is_some()
        };
        assert_eq!(fps.iter().map(replays).collect::<Vec<_>>(), [false, true, true], "the oldest went");
        assert_eq!(
            fps.iter().map(|(fp, _)| memo.holds_url(fp.url())).collect::<Vec<_>>(),
            [false, true, true],
            "and its URL with it"
        );
        // Two entries of one URL (another method): the URL is held until
        // both are gone.
        let url = "https://ex.com/x?mode=heavy&n=3";
        let (_, reads, applied) = planned(c, url, &[("cf-connecting-ip", "192.0.2.3"), ("x-tenant", "7")]);
        memo.keep(Fingerprint::new("POST", url, None, None, None), reads, applied);
        assert!(memo.holds_url(url) && !memo.holds_url("https://ex.com/x?mode=heavy&n=2"), "n=2 was the oldest");
        for i in 4..=5 {
            let next = format!("https://ex.com/x?mode=heavy&n={i}");
            let (_, reads, applied) = planned(c, &next, &[("cf-connecting-ip", "192.0.2.3"), ("x-tenant", "7")]);
            memo.keep(Fingerprint::new("GET", &next, None, None, None), reads, applied);
            assert_eq!(memo.holds_url(url), i == 4, "n=3 held while one of its two entries is");
        }
        // A cookie of 5 KB: not kept.
        let cookie = "c=".to_string() + &"x".repeat(5000);
        let cookie: &'static str = Box::leak(cookie.into_boxed_str());
        let (fp, reads, applied) = planned(c, URL, &[("cf-connecting-ip", "192.0.2.9"), ("x-tenant", "7"), ("cookie", cookie)]);
        memo.keep(fp.clone(), reads, applied);
        assert_eq!(memo.len(), 2);
    }

    impl PlanMemo {
        fn len(&self) -> usize {
            self.entries.len()
        }
    }
}
