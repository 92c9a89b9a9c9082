//! The controls registry, pure: which keys have a runtime ban or override,
//! for the console's Controls page and `GET {prefix}/controls`.
//!
//! A key's controls live in the key's own object ([`crate::count::controls`]),
//! which is the truth. The registry is one object of its own class,
//! `Registry` ([`crate::count::classes::REGISTRY`]: a class with no alarm,
//! so nothing but an entry's own end deletes it), reached by the fixed name
//! [`REGISTRY_OBJECT`], holding one entry per
//! (object, kind): the rule, the key's hash, the end, the limits, and what
//! only the registry keeps, the operator's `reason` and who set it (`by`).
//! The admin flow writes an entry after the key's object took the change
//! and removes it after a lift; nothing on the request path touches it.
//!
//! Entries expire with their control: an entry past its end is never
//! listed, and is deleted at the registry's next write. The listing is
//! checked against each key's object before it is shown (the admin flow
//! reads every listed key's controls), so a registry write lost or reordered
//! between two isolates never shows a control that is not in force.
//!
//! The object is called on its own path ([`REGISTRY_PATH`], a `POST` of one
//! [`RegistryCall`] line).
//!
//! In 0.1.0 the registry was a `Limiter` object of the same name. Its
//! rows are moved once ([`HANDOVER`]): the `Registry` object, until it has
//! them, asks that `Limiter` object for its rows, which it answers read-only
//! ([`encode_handover`]) and keeps (a rollback reads them again). While
//! that object still runs the release before (a deploy's first minutes), it
//! refuses the handover (400), and the registry reads it with the calls
//! that release knows (`list`, `signedout`) and merges what it learns, the
//! newer of two entries kept, the later sign-out kept; it asks again at its
//! next call. A Worker of the release before calls the `Limiter` object,
//! which, once updated, refuses every registry call (400): that Worker
//! reports it and its console fails closed, as it did with an older object.
//!
//! The raw key is in the entry's object name ([`Entry::id`]), which the
//! registry needs to read the key's object; it is never rendered or
//! answered (the listing names keys by `key_hash`).

/// The path of the registry's endpoint on the object.
pub(crate) const REGISTRY_PATH: &str = "/v1/registry";

/// The registry object's name: no `rule \n key` object name is this.
pub(crate) const REGISTRY_OBJECT: &str = "tollgate:controls-registry";

/// At most this many entries are listed (the newest ends last).
pub(crate) const MAX_LISTED: usize = 500;

/// A ban or an override.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Ban,
    Override,
}

impl Kind {
    /// `ban` or `override`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Ban => "ban",
            Kind::Override => "override",
        }
    }

    fn parse(text: &str) -> Option<Kind> {
        match text {
            "ban" => Some(Kind::Ban),
            "override" => Some(Kind::Override),
            _ => None,
        }
    }
}

/// One control, as the registry keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The key's object name (`rule \n key`): never shown.
    pub(crate) id: String,
    pub(crate) kind: Kind,
    pub(crate) rule: String,
    pub(crate) key_hash: String,
    /// The end (Unix ms); `None`: an override for good.
    pub(crate) until_ms: Option<i64>,
    /// An override's limits (a calendar window's on its calendar).
    pub(crate) limits: Vec<crate::count::limit::Limit>,
    /// The operator's reason (may be empty).
    pub(crate) reason: String,
    /// Who set it: `api`, `console`, `cli`, or the operator's label.
    pub(crate) by: String,
    /// When it was set (Unix ms).
    pub(crate) set_ms: i64,
}

/// What the admin flow asks the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RegistryCall {
    Put(Entry),
    Remove { id: String, kind: Kind },
    List,
    /// The console was signed out at `at_ms`: every session
    /// issued until then is void. Kept as one row (the latest sign-out
    /// wins) until `at_ms` + `keep_ms` (a session's length: by then every
    /// session it voids has ended on its own); never listed.
    SignOut { at_ms: i64, keep_ms: i64 },
    /// The last sign-out still kept: answered with its time, or nothing.
    SignedOut,
}

/// The registry row of the last console sign-out: its `id` and `kind`
/// (no key's object name is `console`: those are `rule \n key`).
pub(crate) const SIGN_OUT_ROW: (&str, &str) = ("console", "signout");

/// The body that asks the `Limiter` object named [`REGISTRY_OBJECT`] (the
/// registry in 0.1.0) for the rows it holds: answered by
/// [`encode_handover`]; refused (400) by a release before.
pub(crate) const HANDOVER: &str = "handover";

/// The `Limiter`'s answer to [`HANDOVER`]: its live rows as the calls that
/// would write them again, one line each (`put` per entry, `signout` for
/// the sign-out, `keep_ms` what is left of it).
pub(crate) fn encode_handover(entries: &[Entry], sign_out: Option<(i64, i64)>) -> String {
    let puts = entries.iter().map(|e| RegistryCall::Put(e.clone()));
    let sign_out = sign_out.map(|(at_ms, until_ms)| RegistryCall::SignOut { at_ms, keep_ms: until_ms.saturating_sub(at_ms) });
    puts.chain(sign_out).map(|c| c.encode()).collect::<Vec<_>>().join("\n")
}

/// Reads [`encode_handover`]'s text: the `put` and `signout` calls in it,
/// any other line skipped.
pub(crate) fn decode_handover(text: &str) -> Vec<RegistryCall> {
    text.lines()
        .filter_map(RegistryCall::decode)
        .filter(|c| matches!(c, RegistryCall::Put(_) | RegistryCall::SignOut { .. }))
        .collect()
}

/// What the registry learns from an older `Limiter` registry's answers to
/// `list` and `signedout`: its entries as `put`s, its sign-out as a
/// `signout` kept a session's length from its time (`keep_ms`), as it was
/// written.
pub(crate) fn from_older(listing: &str, signed_out: &str, keep_ms: i64, now_ms: i64) -> Vec<RegistryCall> {
    let puts = decode_listing(listing, now_ms).into_iter().map(RegistryCall::Put);
    let sign_out = signed_out_at(signed_out).map(|at_ms| RegistryCall::SignOut { at_ms, keep_ms });
    puts.chain(sign_out).collect()
}

/// Reads the answer to [`RegistryCall::SignedOut`]: the sign-out's time,
/// `None` when none is kept (or the answer is not a time).
pub(crate) fn signed_out_at(answer: &str) -> Option<i64> {
    answer.trim().parse().ok()
}

/// Escapes a field for the tab-separated line: `%`, tab and line breaks.
fn escape(text: &str) -> String {
    text.replace('%', "%25").replace('\t', "%09").replace('\n', "%0A").replace('\r', "%0D")
}

fn unescape(text: &str) -> String {
    text.replace("%0D", "\r").replace("%0A", "\n").replace("%09", "\t").replace("%25", "%")
}

impl Entry {
    /// The entry as one line of tab-separated, escaped fields.
    pub(crate) fn encode(&self) -> String {
        let until = self.until_ms.map_or_else(|| "-".to_string(), |u| u.to_string());
        let mut limits = String::new();
        crate::count::protocol::push_limits(&mut limits, &self.limits);
        let fields = [
            escape(&self.id),
            self.kind.name().to_string(),
            escape(&self.rule),
            escape(&self.key_hash),
            until,
            limits,
            escape(&self.reason),
            escape(&self.by),
            self.set_ms.to_string(),
        ];
        fields.join("\t")
    }

    /// Reads [`Entry::encode`]'s line; `None` for anything else.
    pub(crate) fn decode(line: &str) -> Option<Entry> {
        let f: Vec<&str> = line.split('\t').collect();
        let [id, kind, rule, key_hash, until, limits, reason, by, set] = f.as_slice() else { return None };
        let limits = if limits.is_empty() {
            Vec::new()
        } else {
            crate::count::protocol::read_limits(limits).ok()?
        };
        Some(Entry {
            id: unescape(id),
            kind: Kind::parse(kind)?,
            rule: unescape(rule),
            key_hash: unescape(key_hash),
            until_ms: if *until == "-" { None } else { Some(until.parse().ok()?) },
            limits,
            reason: unescape(reason),
            by: unescape(by),
            set_ms: set.parse().ok()?,
        })
    }

    /// Whether the entry is still in force at `now_ms`.
    pub(crate) fn live(&self, now_ms: i64) -> bool {
        self.until_ms.is_none_or(|u| u > now_ms)
    }
}

impl RegistryCall {
    /// The call as the `POST` body: `put\t<entry>`, `remove\t<id>\t<kind>`,
    /// `list`, `signout\t<at_ms>\t<keep_ms>`, `signedout`.
    pub(crate) fn encode(&self) -> String {
        match self {
            RegistryCall::Put(entry) => format!("put\t{}", entry.encode()),
            RegistryCall::Remove { id, kind } => format!("remove\t{}\t{}", escape(id), kind.name()),
            RegistryCall::List => "list".into(),
            RegistryCall::SignOut { at_ms, keep_ms } => format!("signout\t{at_ms}\t{keep_ms}"),
            RegistryCall::SignedOut => "signedout".into(),
        }
    }

    /// Reads [`RegistryCall::encode`]'s body; `None` for anything else.
    pub(crate) fn decode(text: &str) -> Option<RegistryCall> {
        let (op, rest) = text.split_once('\t').unwrap_or((text, ""));
        match op {
            "put" => Entry::decode(rest).map(RegistryCall::Put),
            "remove" => {
                let (id, kind) = rest.split_once('\t')?;
                Some(RegistryCall::Remove { id: unescape(id), kind: Kind::parse(kind)? })
            }
            "list" if rest.is_empty() => Some(RegistryCall::List),
            "signedout" if rest.is_empty() => Some(RegistryCall::SignedOut),
            "signout" => {
                let (at, keep) = rest.split_once('\t')?;
                Some(RegistryCall::SignOut { at_ms: at.parse().ok()?, keep_ms: keep.parse().ok()? })
            }
            _ => None,
        }
    }
}

/// Reads a listing's text (one entry line each): the entries live at `now_ms`, a line
/// that does not decode skipped, at most [`MAX_LISTED`].
pub(crate) fn decode_listing(text: &str, now_ms: i64) -> Vec<Entry> {
    text.lines().filter_map(Entry::decode).filter(|e| e.live(now_ms)).take(MAX_LISTED).collect()
}

/// A reason or a label as stored: control characters dropped, at most
/// `max` characters.
pub(crate) fn clean_text(text: &str, max: usize) -> String {
    text.chars().filter(|c| !c.is_control()).take(max).collect::<String>().trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            id: "login\nip=203.0.113.7\t%".into(),
            kind: Kind::Override,
            rule: "login".into(),
            key_hash: "274be81a020a0956".into(),
            until_ms: Some(2_000),
            limits: vec![
                crate::count::limit::Limit::new(5, 1000).unwrap(),
                crate::count::limit::Limit::per_period(300, crate::count::calendar::Calendar::parse("day@Asia/Tokyo").unwrap()).unwrap(),
            ],
            reason: "credential stuffing; ticket #42".into(),
            by: "console".into(),
            set_ms: 1_000,
        }
    }

    #[test]
    fn an_entry_and_every_call_read_back_as_written() {
        let e = entry();
        assert_eq!(Entry::decode(&e.encode()), Some(e.clone()));
        let ban = Entry { kind: Kind::Ban, until_ms: Some(9), limits: Vec::new(), ..e.clone() };
        assert_eq!(Entry::decode(&ban.encode()), Some(ban.clone()));
        let forever = Entry { until_ms: None, ..e.clone() };
        assert_eq!(Entry::decode(&forever.encode()), Some(forever));
        for call in [RegistryCall::Put(e.clone()), RegistryCall::Remove { id: e.id.clone(), kind: Kind::Ban }, RegistryCall::List, RegistryCall::SignOut { at_ms: 1_700_000_000_000, keep_ms: 3_600_000 }, RegistryCall::SignedOut] {
            assert_eq!(RegistryCall::decode(&call.encode()), Some(call));
        }
        assert!(!e.encode().contains('\n'), "one line, whatever the key holds");
    }

    #[test]
    fn anything_else_is_refused_and_ended_entries_are_not_listed() {
        for bad in ["", "get", "list\tx", "remove\tid", "remove\tid\tmute", "put\ta\tban", "ban 1767225600000"] {
            assert_eq!(RegistryCall::decode(bad), None, "{bad:?}");
        }
        let live = entry();
        let ended = Entry { until_ms: Some(500), ..entry() };
        let listing = format!("{}\ngarbage\n{}", live.encode(), ended.encode());
        assert_eq!(decode_listing(&listing, 1_000), vec![live]);
    }

    #[test]
    fn a_handover_carries_every_entry_and_the_sign_out_and_nothing_else() {
        let e = entry();
        let ban = Entry { kind: Kind::Ban, limits: Vec::new(), ..entry() };
        let text = encode_handover(&[e.clone(), ban.clone()], Some((1_000, 4_600)));
        let calls = decode_handover(&format!("{text}\nlist\nremove\tx\tban\ngarbage"));
        assert_eq!(calls, vec![RegistryCall::Put(e.clone()), RegistryCall::Put(ban), RegistryCall::SignOut { at_ms: 1_000, keep_ms: 3_600 }]);
        assert!(decode_handover(&encode_handover(&[], None)).is_empty());
        let older = from_older(&encode_listing(std::slice::from_ref(&e)), "1500\n", 3_600_000, 1_000);
        assert_eq!(older, vec![RegistryCall::Put(e), RegistryCall::SignOut { at_ms: 1_500, keep_ms: 3_600_000 }]);
        assert!(from_older("", "", 1, 0).is_empty(), "nothing kept: nothing to merge");
    }

    #[test]
    fn reasons_lose_control_characters_and_are_capped() {
        assert_eq!(clean_text(" a\nb\tc\u{7}d ", 200), "abcd");
        assert_eq!(clean_text("abcdef", 3), "abc");
    }

    /// The registry's answer to a list: one entry line each (the object
    /// writes the same lines; the tests read them back).
    fn encode_listing(entries: &[Entry]) -> String {
        entries.iter().map(Entry::encode).collect::<Vec<_>>().join("\n")
    }
}
