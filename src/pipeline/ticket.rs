//! What an embedded check hands back so that the app can settle its
//! failures-only rules once it has answered.
//!
//! In front of an origin, tollgate sees the origin's answer and settles
//! `counting.statuses` rules itself ([`crate::pipeline::verdict::settle`]). Called from
//! inside an app (the Rust crate API, or RPC from a TS/JS Worker), it does
//! not: [`issue`] turns the checked rules into a [`Ticket`] the app keeps,
//! and passes back with its response status; [`Ticket::applied`] rebuilds
//! what the settlement needs against the same config.
//!
//! A ticket is data the app could alter, and RPC makes it travel as text
//! ([`Ticket::encode`]). What it can name is bounded: a rule of the config
//! that counts only some statuses, and a key. The object's name and the
//! log hash are derived again from those here, never read from the ticket,
//! so a ticket can only settle counters that a request could have reached.
//! Only Workers bound to tollgate can call it; they are trusted with the
//! counts they settle (a forged ticket can commit or release a slot, as
//! the app's own status codes can).
//!
//! The text form is signed all the same (a made-up ticket with
//! status 200 unlocked an account and returned a device cookie): an
//! HMAC-SHA256 over the issue time and the entries, under a key derived
//! from the deployment's secrets ([`signing_key`]: `TOLLGATE_LOG_KEY` and
//! the `trusted_device` secrets). [`Ticket::decode`] refuses a ticket whose
//! signature does not verify, and one issued more than [`MAX_AGE_MS`] ago
//! (no reservation holds longer), so a ticket that went through a client
//! and back can be neither forged nor replayed later. Tickets are for the
//! app's own use between `check` and `settle`: they never leave it.

use crate::config::Config;
use crate::request::key::key_hash;
use crate::pipeline::applied::{object_name, Applied};
use crate::pipeline::verdict::Outcome;
use crate::request::hmac::{hex, hmac_sha256, same_bytes};
use crate::request::spelling::Spelling;
use serde_json::{json, Value};

/// One entry of [`Ticket::encode`]'s array form.
fn entry(value: &Value) -> Option<TicketEntry> {
    let [rule, key, flags, device, reservation, spelling] = value.as_array()?.as_slice() else { return None };
    let flags = flags.as_u64()?;
    Some(TicketEntry {
        rule: rule.as_str()?.to_string(),
        key: key.as_str()?.to_string(),
        fell_back: flags & 1 != 0,
        own_method: flags & 2 != 0,
        device: match device {
            Value::Null => None,
            d => Some(d.as_str()?.to_string()),
        },
        reservation: match reservation {
            Value::Null => None,
            r => Some(r.as_u64()?),
        },
        spelling: match spelling {
            Value::Null => None,
            s => Some(Spelling::decode(s.as_str()?)?),
        },
    })
}

/// The encoding's version: a ticket of another version settles nothing
/// (version 1 was unsigned and carried no spelling).
const VERSION: u64 = 2;

/// The oldest ticket [`Ticket::decode`] takes: an hour, the longest a
/// reservation may hold ([`crate::count::protocol::MAX_HOLD_MS`]).
pub(crate) const MAX_AGE_MS: i64 = crate::count::protocol::MAX_HOLD_MS as i64;

/// The key tickets are signed with: HMAC-SHA256 under a label, over the
/// log key and each `trusted_device` secret (in config order), each
/// length-prefixed. `None` when the deployment has none of them: tickets
/// are then unsigned (`tollgate check` already asks for a log key).
pub(crate) fn signing_key(log_key: Option<&[u8]>, device_secrets: &[String]) -> Option<Vec<u8>> {
    if log_key.is_none() && device_secrets.is_empty() {
        return None;
    }
    let mut material = Vec::new();
    for part in log_key.into_iter().chain(device_secrets.iter().map(String::as_bytes)) {
        material.extend_from_slice(&(part.len() as u64).to_be_bytes());
        material.extend_from_slice(part);
    }
    Some(hmac_sha256(b"tollgate-ticket-key", &material).to_vec())
}

/// The hex MAC of a ticket issued at `issued_ms` with `entries` (their
/// JSON text).
fn mac(key: &[u8], issued_ms: i64, entries: &str) -> String {
    let message = format!("tollgate-ticket\n{issued_ms}\n{entries}");
    hex(&hmac_sha256(key, message.as_bytes()))
}

/// The failures-only rules one request was checked against, with their
/// reservations: all that settling needs, apart from the app's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ticket {
    entries: Vec<TicketEntry>,
}

/// One checked (rule, key) of a failures-only rule.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TicketEntry {
    /// The rule's name.
    rule: String,
    /// The raw key (the account's, for a trusted device).
    key: String,
    fell_back: bool,
    own_method: bool,
    device: Option<String>,
    reservation: Option<u64>,
    /// How the request spelled the account: relief is bound to it.
    spelling: Option<Spelling>,
}

/// The ticket for `applied` and their `outcomes` (in the same order): one
/// entry per failures-only rule, whatever its outcome (a counted status
/// records a hit even when the counter could not be asked before).
pub(crate) fn issue(applied: &[Applied<'_>], outcomes: &[Outcome]) -> Ticket {
    let entries = applied
        .iter()
        .zip(outcomes)
        .filter(|(a, _)| a.rule.reserves())
        .map(|(a, outcome)| TicketEntry {
            rule: a.rule.name.clone(),
            key: a.key.clone(),
            fell_back: a.fell_back,
            own_method: a.own_method,
            device: a.device.clone(),
            spelling: a.spelling,
            reservation: match outcome {
                Outcome::Allowed { reservation, .. } => *reservation,
                Outcome::Blocked { .. } | Outcome::Failed(_) => None,
            },
        })
        .collect();
    Ticket { entries }
}

impl Ticket {
    /// Whether there is nothing to settle: no failures-only rule applied.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The ticket as text, for RPC, issued at `now_ms` and signed with
    /// `key` ([`signing_key`]; unsigned without one): JSON,
    /// `{"v":2,"t":issued_ms,"e":[[rule, key, flags, device, reservation,
    /// spelling], ...],"m":"<hex MAC>"}` (flags: 1 fell back, 2 own method).
    /// Built on `serde_json::Value`, which the config parser links anyway
    /// (a derive would add its own code to the Worker's upload).
    pub(crate) fn encode(&self, key: Option<&[u8]>, now_ms: i64) -> String {
        let entries: Vec<Value> = self
            .entries
            .iter()
            .map(|e| {
                let flags = u64::from(e.fell_back) | (u64::from(e.own_method) << 1);
                json!([e.rule, e.key, flags, e.device, e.reservation, e.spelling.as_ref().map(Spelling::encode)])
            })
            .collect();
        let entries = Value::Array(entries);
        let mut ticket = json!({ "v": VERSION, "t": now_ms, "e": entries });
        if let Some(key) = key {
            ticket["m"] = Value::String(mac(key, now_ms, &entries.to_string()));
        }
        ticket.to_string()
    }

    /// A ticket from [`Ticket::encode`]'s text, at `now_ms`, under `key`;
    /// `None` for anything else: another version, malformed, a signature
    /// missing or not `key`'s (compared in constant time), or issued over
    /// [`MAX_AGE_MS`] ago or in the future.
    pub(crate) fn decode(text: &str, key: Option<&[u8]>, now_ms: i64) -> Option<Ticket> {
        let value: Value = serde_json::from_str(text).ok()?;
        if value.get("v")?.as_u64()? != VERSION {
            return None;
        }
        let issued_ms = value.get("t")?.as_i64()?;
        if issued_ms > now_ms.saturating_add(60_000) || now_ms.saturating_sub(issued_ms) > MAX_AGE_MS {
            return None;
        }
        let entries = value.get("e")?;
        match (key, value.get("m")) {
            (None, None) => {}
            (Some(key), Some(Value::String(given))) => {
                if !same_bytes(mac(key, issued_ms, &entries.to_string()).as_bytes(), given.as_bytes()) {
                    return None;
                }
            }
            _ => return None,
        }
        let entries = entries.as_array()?.iter().map(entry).collect::<Option<Vec<TicketEntry>>>()?;
        Some(Ticket { entries })
    }

    /// What settling needs, rebuilt against `config`: each entry's applied
    /// rule (object name and log hash derived again, with `log_key`) and an
    /// outcome holding its reservation. Entries naming no failures-only rule
    /// of `config` (a ticket from another config, or altered) are dropped.
    pub(crate) fn applied<'c>(&self, config: &'c Config, log_key: Option<&[u8]>) -> (Vec<Applied<'c>>, Vec<Outcome>) {
        let mut applied = Vec::new();
        let mut outcomes = Vec::new();
        for e in &self.entries {
            let Some(rule) = config.rules.iter().find(|r| r.name == e.rule) else { continue };
            if !rule.reserves() {
                continue;
            }
            let counted = match &e.device {
                Some(device) => crate::request::device::device_key(&e.key, device),
                None => e.key.clone(),
            };
            applied.push(Applied {
                rule,
                id: object_name(rule, &counted),
                key_hash: key_hash(&counted, log_key),
                key: e.key.clone(),
                fell_back: e.fell_back,
                own_method: e.own_method,
                device: e.device.clone(),
                spelling: e.spelling,
            });
            outcomes.push(Outcome::Allowed { windows: Vec::new(), reservation: e.reservation });
        }
        (applied, outcomes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::protocol::Op;
    use crate::pipeline::verdict::{settle, Answered};
    use serde_json::json;

    const NOW: i64 = 1_800_000_000_000;
    const KEY: &[u8] = b"ticket key";

    fn config() -> Config {
        crate::testing::config(json!([
            { "name": "login", "path": "/login", "key": ["body:email"], "count_statuses": [401],
              "on_success": "clear", "limits": [{ "requests": 3, "window": "15m" }] },
            { "name": "api", "path": "/*", "limits": [{ "requests": 10, "window": "1m" }] },
        ]))
    }

    fn applied<'c>(config: &'c Config, name: &str, key: &str) -> Applied<'c> {
        let rule = config.rules.iter().find(|r| r.name == name).unwrap();
        Applied {
            rule,
            key: key.into(),
            id: object_name(rule, key),
            key_hash: key_hash(key, None),
            fell_back: false,
            own_method: true,
            device: None,
            spelling: rule.settles_successes().then_some(Spelling::One(0x0123_4567_89ab_cdef)),
        }
    }

    #[test]
    fn round_trip_keeps_failures_only_rules_and_settles_as_the_edge_would() {
        let config = config();
        let checked = vec![applied(&config, "api", "ip=1"), applied(&config, "login", "a@example.com")];
        let outcomes = vec![
            Outcome::Allowed { windows: Vec::new(), reservation: None },
            Outcome::Allowed { windows: Vec::new(), reservation: Some(7) },
        ];
        let ticket = issue(&checked, &outcomes);
        assert_eq!(ticket.entries.len(), 1, "only the failures-only rule has anything to settle");
        for key in [None, Some(KEY)] {
            assert_eq!(Ticket::decode(&ticket.encode(key, NOW), key, NOW + 1_000).as_ref(), Some(&ticket), "{key:?}");
        }
        let back = Ticket::decode(&ticket.encode(Some(KEY), NOW), Some(KEY), NOW).unwrap();
        let (rebuilt, rebuilt_outcomes) = back.applied(&config, None);
        assert_eq!(rebuilt.len(), 1);
        assert_eq!((rebuilt[0].id.as_str(), rebuilt[0].key_hash.as_str()), (checked[1].id.as_str(), checked[1].key_hash.as_str()));
        assert_eq!(rebuilt[0].spelling, checked[1].spelling, "the spelling travels");
        let header = |_: &str| None;
        for (status, op) in [(401, Op::Commit), (200, Op::Clear), (500, Op::Release)] {
            let answered = Answered { status, header: &header, body: &|_| None };
            let direct = settle(&checked[1], &outcomes[1], Some(&answered)).unwrap();
            let via_ticket = settle(&rebuilt[0], &rebuilt_outcomes[0], Some(&answered)).unwrap();
            assert_eq!(direct, via_ticket, "status {status}");
            assert_eq!(via_ticket.op, op);
        }
    }

    #[test]
    fn a_forged_altered_or_stale_ticket_is_refused() {
        let config = config();
        let ticket = issue(&[applied(&config, "login", "a@example.com")], &[Outcome::Allowed { windows: Vec::new(), reservation: Some(7) }]);
        let signed = ticket.encode(Some(KEY), NOW);
        assert!(Ticket::decode(&signed, Some(KEY), NOW).is_some());
        assert_eq!(Ticket::decode(&signed, Some(b"another key"), NOW), None, "another deployment's key");
        assert_eq!(Ticket::decode(&ticket.encode(None, NOW), Some(KEY), NOW), None, "unsigned where tickets are signed");
        assert_eq!(Ticket::decode(&signed, None, NOW), None, "signed where none is expected");
        let altered = signed.replace("a@example.com", "b@example.com");
        assert_ne!(altered, signed);
        assert_eq!(Ticket::decode(&altered, Some(KEY), NOW), None, "another account");
        let redated = signed.replace(&format!("\"t\":{NOW}"), &format!("\"t\":{}", NOW + 5));
        assert_ne!(redated, signed);
        assert_eq!(Ticket::decode(&redated, Some(KEY), NOW), None, "another time");
        assert_eq!(Ticket::decode(&signed, Some(KEY), NOW + MAX_AGE_MS + 1), None, "too old: no replay later");
        assert_eq!(Ticket::decode(&signed, Some(KEY), NOW - 120_000), None, "from the future");
        assert_eq!(signing_key(None, &[]), None);
        assert_ne!(signing_key(Some(b"log"), &[]), signing_key(Some(b"log"), &["device".into()]));
        assert_ne!(signing_key(None, &["ab".into(), "c".into()]), signing_key(None, &["a".into(), "bc".into()]));
    }

    #[test]
    fn an_altered_ticket_names_only_the_configs_failures_only_rules() {
        let config = config();
        let decode = |text: &str| Ticket::decode(text, None, NOW);
        assert_eq!(decode("not json"), None);
        assert_eq!(decode(&format!(r#"{{"v":1,"t":{NOW},"e":[]}}"#)), None, "another version");
        assert_eq!(decode(r#"{"v":2,"e":[]}"#), None, "no issue time");
        assert_eq!(decode(&format!(r#"{{"v":2,"t":{NOW},"e":[["login","k",0,null,null]]}}"#)), None, "an entry too short");
        assert_eq!(decode(&format!(r#"{{"v":2,"t":{NOW},"e":[["login","k",0,null,-1,null]]}}"#)), None, "a negative reservation");
        assert_eq!(decode(&format!(r#"{{"v":2,"t":{NOW},"e":[["login",7,0,null,null,null]]}}"#)), None, "a key not text");
        assert_eq!(decode(&format!(r#"{{"v":2,"t":{NOW},"e":[["login","k",0,null,null,"x"]]}}"#)), None, "a spelling not a tag");
        let forged = decode(&format!(
            r#"{{"v":2,"t":{NOW},"e":[["api","ip=1",0,null,null,null],["nope","x",0,null,null,null],["login","b@example.com",3,null,5,null]]}}"#,
        ))
        .unwrap();
        let (rebuilt, _) = forged.applied(&config, Some(b"secret"));
        assert_eq!(rebuilt.len(), 1, "a rule counting every request, or an unknown one, is dropped");
        assert_eq!(rebuilt[0].id, "login\nb@example.com", "the object name is derived, never read");
        assert_eq!(rebuilt[0].key_hash, key_hash("b@example.com", Some(b"secret")));
        assert!(rebuilt[0].fell_back && rebuilt[0].own_method);
        assert!(issue(&[], &[]).is_empty());
        let device = Ticket {
            entries: vec![TicketEntry {
                rule: "login".into(),
                key: "k".into(),
                fell_back: false,
                own_method: true,
                device: Some("d1".into()),
                reservation: None,
                spelling: Some(Spelling::Several),
            }],
        };
        assert_eq!(Ticket::decode(&device.encode(Some(KEY), NOW), Some(KEY), NOW), Some(device.clone()));
        assert_eq!(device.applied(&config, None).0[0].id, object_name(&config.rules[0], &crate::request::device::device_key("k", "d1")));
    }
}
