//! `tollgate diff OLD NEW`: what a deploy of the config NEW over the
//! config OLD does to the state already counted, rule by rule. Pure: two
//! validated [`Config`]s in, the [`RuleDiff`]s out; `tools::cli` reads
//! the files and prints them.
//!
//! A count lives in the object named by the rule's name and the key
//! ([`crate::pipeline::applied::object_name`]), so a renamed rule, a
//! changed key or a changed `ipv6_prefix` starts counting from zero; the
//! limits travel with every call, so a changed limit applies to the counts
//! already there at once. Rules are matched by name; a rule gone and a
//! rule new with the same path, host and methods is reported as renamed.

use crate::config::cost::Provider;
use crate::config::describe::window_text;
use crate::config::policy::{Action, Counting, Named};
use crate::config::price::price_words;
use crate::config::rules::Rule;
use crate::config::Config;
use crate::count::coalesce::EXACT_ENTRIES;
use crate::count::limit::Limit;
use crate::count::protocol::Algorithm;
use crate::request::key::KeyPart;
use std::fmt;

/// One rule's changes, in the order a reader wants them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleDiff {
    /// The rule's name in NEW (in OLD for a removed rule), or a shared
    /// price table's (`table`).
    pub(crate) rule: String,
    /// A top-level price table, not a rule: its changes are
    /// said once, with the rules that name it.
    pub(crate) table: bool,
    pub(crate) changes: Vec<ConfigChange>,
}

/// What a deploy does to one rule's live state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConfigChange {
    /// A rule only NEW has: every key starts from zero.
    Added,
    /// A rule only OLD has: its counts are no longer read, and expire.
    Removed,
    /// The same path, host and methods under a new name: every key starts
    /// from zero (the objects are named by the rule).
    Renamed { from: String },
    /// Another key: every key starts from zero.
    KeyChanged { from: String, to: String },
    /// `ipv6_prefix` changed and the rule keys on `ip`: IPv6 clients start
    /// from zero, IPv4 clients carry over.
    Ipv6Prefix { from: u8, to: u8 },
    /// A window's limit lowered: keys already over it are blocked at once
    /// (of a GCRA row, the units owed carry over, drained at the new rate).
    Tightened { window: String, from: u32, to: u32, algorithm: Algorithm },
    /// A window's limit raised: blocked keys get room at once.
    Loosened { window: String, from: u32, to: u32, algorithm: Algorithm },
    /// Of a GCRA row, a window now in another place among the limits: it
    /// reads the state of the window that was in its place (GCRA keeps
    /// one cell per place).
    Moved { window: String },
    /// A window only NEW has: it counts the hits the row still holds (a
    /// GCRA window starts from zero).
    WindowAdded { window: String, requests: u32, algorithm: Algorithm },
    /// A window only OLD has: no longer enforced.
    WindowRemoved { window: String, requests: u32 },
    /// A rolling window became a calendar one, or the other way, or a
    /// calendar window changed its unit or zone: the hits each
    /// row holds are read by the new window at once.
    Period { from: String, to: String, requests: u32, calendar: bool },
    /// `algorithm` changed: the other algorithm's rows are read towards
    /// blocking ([`crate::count::switch`]).
    Algorithm { from: Algorithm, to: Algorithm },
    /// A static override that appears, vanishes or changes its limits
    /// (`value` as written, limits as `N/window`).
    Override { value: String, from: Option<String>, to: Option<String> },
    /// `counting.statuses` switched on or off.
    TwoPhase { on: bool },
    /// Leases switched on or off.
    Leases { on: bool },
    /// `action` changed between `block` and `log` (shadow).
    Action { blocks: bool },
    /// A field of metering expensive work (`penalty`, `concurrency`,
    /// `metering`) switched on or off: its calls carry a field objects of
    /// 0.1.0 refuse (the rule's `on_error`), so it is turned on in a deploy
    /// of its own once every object runs this release.
    Metering { field: &'static str, on: bool },
    /// The shape of the rule's refusals changed (`metering.refusal`, or its
    /// usage's provider): `None` is problem+json, else the API's error
    /// JSON. Nothing counted changes; clients read the new body at once.
    Refusal { from: Option<Provider>, to: Option<Provider> },
    /// A sliding-log limit above 10,000 (the rule's or an override's)
    /// where OLD had none: the release before refused such a config, and
    /// its objects do not coalesce ([`crate::count::coalesce`]).
    LargeLog,
    /// The unit the rule counts in changed (`metering.price`
    /// on or off, or its currency): the counts already there are read in
    /// the new unit.
    Unit { from: String, to: String },
    /// A price table's prices changed: each model's change as
    /// `pattern: in 22.5 -> 25`, a model added or removed, `unpriced`.
    Prices(Vec<String>),
    /// A shared table's prices changed: said once, with the rules in NEW
    /// that name it.
    SharedPrices { said: Vec<String>, rules: Vec<String> },
    /// A money rule's unit changed between micro- and milli-units (a
    /// `spend` passed 4294.967295, or no longer does): the counts already
    /// there are read in the new unit, `finer` 1,000 times smaller.
    MoneyUnit { from: String, to: String, finer: bool },
}

impl ConfigChange {
    /// Whether some keys' counts start from zero.
    pub(crate) fn resets(&self) -> bool {
        match self {
            ConfigChange::Added | ConfigChange::Renamed { .. } | ConfigChange::KeyChanged { .. } | ConfigChange::Ipv6Prefix { .. } => true,
            ConfigChange::WindowAdded { algorithm, .. } => *algorithm == Algorithm::Gcra,
            _ => false,
        }
    }
}

impl ConfigChange {
    /// Why this change must reach every edge at once: during a
    /// gradual deployment (a versions split), edges of the old version
    /// run the old config and call the same objects, so a field they lack
    /// is not applied to their requests, and a count moved to other
    /// objects gives each client both budgets. `None`: a split only
    /// mixes the two configs' limits, as any gradual deploy does.
    pub(crate) fn needs_all_at_once(&self) -> Option<&'static str> {
        match self {
            ConfigChange::Renamed { .. } | ConfigChange::KeyChanged { .. } | ConfigChange::Ipv6Prefix { .. } => {
                Some("the two versions count a client in different objects, so while both serve it gets both budgets")
            }
            ConfigChange::Metering { field: "penalty", on: true } => {
                Some("edges of the old version send no penalty: they admit a penalised key up to its limit (12 of 45 requests inside a 30 s penalty)")
            }
            ConfigChange::Metering { field: "concurrency", on: true } => {
                Some("edges of the old version hold no slot: their requests in flight are neither bounded nor seen by the new edges' slots")
            }
            ConfigChange::Metering { on: true, .. } => {
                Some("edges of the old version charge each request its fixed cost, not the units the origin reports")
            }
            _ => None,
        }
    }
}

fn alg(a: Algorithm) -> &'static str {
    match a {
        Algorithm::SlidingLog => "sliding_log",
        Algorithm::Gcra => "gcra",
    }
}

impl fmt::Display for ConfigChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigChange::Added => write!(f, "new rule: every key starts from zero"),
            ConfigChange::Removed => write!(f, "removed: its counts are no longer read (they expire with their alarms)"),
            ConfigChange::Renamed { from } => write!(f, "renamed from `{from}`: every key starts from zero (counts are kept per rule name)"),
            ConfigChange::KeyChanged { from, to } => write!(f, "key [{from}] -> [{to}]: every key starts from zero"),
            ConfigChange::Ipv6Prefix { from, to } => write!(f, "ipv6_prefix /{from} -> /{to}: IPv6 clients start from zero; IPv4 clients carry over"),
            ConfigChange::Tightened { window, from, to, algorithm } => write!(
                f,
                "tightens {from} -> {to} per {window}: keys already over {to} are blocked at once{}",
                if *algorithm == Algorithm::Gcra { " (the units they owe drain at the new rate)" } else { "" }
            ),
            ConfigChange::Loosened { window, from, to, .. } => {
                write!(f, "loosens {from} -> {to} per {window}: blocked keys get room at once")
            }
            ConfigChange::Moved { window } => write!(
                f,
                "the {window} window moved among the limits: GCRA keeps its state by place, so it reads the units of the window that was in its place"
            ),
            ConfigChange::WindowAdded { window, requests, algorithm: Algorithm::SlidingLog } => {
                write!(f, "new window {requests} per {window}: counts the hits each row still holds")
            }
            ConfigChange::WindowAdded { window, requests, .. } => write!(
                f,
                "new window {requests} per {window}: this GCRA window starts from zero for every key (or from the units of the window that was in its place)"
            ),
            ConfigChange::WindowRemoved { window, requests } => write!(f, "window {requests} per {window} removed"),
            ConfigChange::Period { from, to, requests, calendar: true } => write!(
                f,
                "window {from} -> {requests} per {to}: counts each row's hits since the period began, at once; the quota comes back whole at the period's end, not one request at a time"
            ),
            ConfigChange::Period { from, to, requests, calendar: false } => write!(
                f,
                "window {from} -> {requests} per {to}: rolling again, it counts each row's hits of the last {to} at once; each request's unit comes back {to} after it"
            ),
            ConfigChange::Algorithm { from, to } => write!(
                f,
                "algorithm {} -> {}: each {} row is read towards blocking, never as empty (no key gains room; one near its limit may wait up to one window more)",
                alg(*from),
                alg(*to),
                alg(*from)
            ),
            other => other.fmt_setting(f),
        }
    }
}

impl ConfigChange {
    /// The text of a change to a setting (overrides, counting, leases,
    /// action, metering, refusals, a large log): [`ConfigChange`]'s `Display`
    /// for those, apart from the changes to rules and windows.
    fn fmt_setting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
                ConfigChange::Override { value, from: None, to: Some(to) } => write!(f, "override `{value}` appears: {to}, at once"),
                ConfigChange::Override { value, from: Some(from), to: None } => write!(f, "override `{value}` vanishes: {from} -> the rule's limits, at once"),
                ConfigChange::Override { value, from, to } => write!(f, "override `{value}`: {} -> {}, at once", from.as_deref().unwrap_or("-"), to.as_deref().unwrap_or("-")),
                ConfigChange::TwoPhase { on: true } => write!(f, "two-phase counting on (counting.statuses): only the listed statuses count from now; hits so far stay counted"),
                ConfigChange::TwoPhase { on: false } => write!(f, "two-phase counting off: every request counts from now; reservations in flight hold until they settle or lapse"),
                ConfigChange::Leases { on } => write!(f, "leases {}: counts carry over", if *on { "on" } else { "off" }),
                ConfigChange::Action { blocks: true } => write!(f, "action log -> block: keys already over the limit are blocked at once"),
                ConfigChange::Action { blocks: false } => write!(f, "action block -> log (shadow): nothing is blocked any more"),
                ConfigChange::Metering { field, on: true } => write!(
                    f,
                    "`{field}` on: objects of a release before 0.2.0 refuse its calls (the rule's on_error) — deploy it once every object runs 0.2.0 or later"
                ),
                ConfigChange::Metering { field, on: false } => write!(f, "`{field}` off: counts carry over"),
                ConfigChange::Refusal { from, to } => {
                    let shape = |p: &Option<Provider>| p.map_or("problem+json".to_string(), |p| format!("{}'s error JSON", p.name()));
                    write!(f, "refusals {} -> {}: clients read the new body at once (x-should-retry: false past 60 s only with an API's shape); counts carry over", shape(from), shape(to))
                }
                ConfigChange::Unit { from, to } => write!(
                    f,
                    "counts in {to}, not {from}: the units already counted are read as {to} at once (rename the rule to start every key from zero)"
                ),
                ConfigChange::Prices(changes) => write!(f, "prices: {}; from the next answer settled (what is in flight is charged at the new prices)", changes.join("; ")),
                ConfigChange::SharedPrices { said, rules } => {
                    let named = if rules.is_empty() { "no rule (it prices nothing)".to_string() } else { rules.iter().map(|r| format!("`{r}`")).collect::<Vec<_>>().join(", ") };
                    write!(f, "prices: {}; from the next answer settled, in every rule that names it: {named}", said.join("; "))
                }
                ConfigChange::MoneyUnit { from, to, finer: false } => write!(
                    f,
                    "counts in {to}, not {from} (a spend passes 4294.967295): the units already counted are read as {to}, 1,000 times what was spent, so a key that spent this window may be refused until the window ends (under-admits; its limits apply in {to} at once; rename the rule to start every key from zero)"
                ),
                ConfigChange::MoneyUnit { from, to, finer: true } => write!(
                    f,
                    "counts in {to}, not {from}: the units already counted are read as {to}, a thousandth of what was spent, so each key may spend nearly its whole limit again this window (OVER-ADMITS; its limits apply in {to} at once; rename the rule to start every key from zero, or deploy as the windows begin)"
                ),
                ConfigChange::LargeLog => write!(
                    f,
                    "a sliding_log limit above 10,000: objects of the release before keep one entry per call (no coalescing; a busy key's row grows toward SQLite's 2 MB) and its `tollgate check` refuses the config — deploy it once every object runs this release, and lower it before rolling back"
                ),
            _ => Ok(()),
        }
    }
}

/// The rules' changes from `old` to `new`: NEW's rules in order, then the
/// removed ones; rules without a change are left out.
pub(crate) fn diff(old: &Config, new: &Config) -> Vec<RuleDiff> {
    let in_old = |name: &str| old.rules.iter().find(|r| r.name == name);
    let in_new = |name: &str| new.rules.iter().find(|r| r.name == name);
    let mut out = Vec::new();
    for rule in &new.rules {
        let mut changes = match in_old(&rule.name) {
            Some(before) => rule_changes(before, rule, old.ipv6_prefix, new.ipv6_prefix),
            None => match old.rules.iter().find(|r| in_new(&r.name).is_none() && same_route(r, rule)) {
                Some(before) => vec![ConfigChange::Renamed { from: before.name.clone() }],
                None => vec![ConfigChange::Added],
            },
        };
        if large_log(rule) && !in_old(&rule.name).is_some_and(large_log) {
            changes.push(ConfigChange::LargeLog);
        }
        if !changes.is_empty() {
            out.push(RuleDiff { rule: rule.name.clone(), table: false, changes });
        }
    }
    for rule in old.rules.iter().filter(|r| in_new(&r.name).is_none()) {
        let renamed = new.rules.iter().any(|n| in_old(&n.name).is_none() && same_route(rule, n));
        if !renamed {
            out.push(RuleDiff { rule: rule.name.clone(), table: false, changes: vec![ConfigChange::Removed] });
        }
    }
    out.extend(shared_price_changes(old, new));
    out
}

/// The top-level price tables in both configs whose prices changed
///: one entry each, naming NEW's rules that use it (whose own
/// diffs leave it out). A table added or removed changes nothing counted
/// by itself: the rules that name it say so.
fn shared_price_changes(old: &Config, new: &Config) -> Vec<RuleDiff> {
    let mut out = Vec::new();
    for (name, table) in &new.prices {
        let Some((_, before)) = old.prices.iter().find(|(n, _)| n == name) else { continue };
        let said = table_changes(before, table);
        if said.is_empty() {
            continue;
        }
        let rules = new.rules.iter().filter(|r| shared_name(r) == Some(name.as_str())).map(|r| r.name.clone()).collect();
        out.push(RuleDiff { rule: name.clone(), table: true, changes: vec![ConfigChange::SharedPrices { said, rules }] });
    }
    out
}

/// The shared price table a rule names, if any.
fn shared_name(rule: &Rule) -> Option<&str> {
    rule.usage.as_ref()?.price.as_ref()?.name.as_deref()
}

/// Whether `rule` counts on the sliding log past its exact size: a limit
/// (its own or an override's) above [`EXACT_ENTRIES`].
fn large_log(rule: &Rule) -> bool {
    let large = |limits: &[Limit]| limits.iter().any(|l| l.requests.get() as usize > EXACT_ENTRIES);
    rule.algorithm == Algorithm::SlidingLog && (large(&rule.limits) || rule.overrides.entries().iter().any(|o| large(&o.limits)))
}

fn same_route(a: &Rule, b: &Rule) -> bool {
    a.path == b.path && a.host == b.host && a.methods == b.methods
}

fn key_text(key: &[KeyPart]) -> String {
    key.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// A metering field's name in the config, and whether a rule uses it.
type Metered = (&'static str, fn(&Rule) -> bool);

/// The changes of one rule kept under its name.
fn rule_changes(old: &Rule, new: &Rule, old_prefix: u8, new_prefix: u8) -> Vec<ConfigChange> {
    let mut changes = Vec::new();
    if old.key != new.key {
        changes.push(ConfigChange::KeyChanged { from: key_text(&old.key), to: key_text(&new.key) });
    } else if old_prefix != new_prefix && new.key.contains(&KeyPart::Ip) {
        changes.push(ConfigChange::Ipv6Prefix { from: old_prefix, to: new_prefix });
    }
    if old.algorithm != new.algorithm {
        changes.push(ConfigChange::Algorithm { from: old.algorithm, to: new.algorithm });
    }
    // The state a changed limit meets is the old algorithm's: a GCRA cell
    // is kept per limit (read by either algorithm), a log is read anew.
    // Limits in another unit are not comparable: the unit's change says it.
    if old.money_step() == new.money_step() || old.money_step().is_none() || new.money_step().is_none() {
        limit_changes(&old.limits, &new.limits, old.algorithm, &mut changes);
        override_changes(old, new, &mut changes);
    }
    let two_phase = |r: &Rule| matches!(r.counting, Counting::Statuses(_));
    if two_phase(old) != two_phase(new) {
        changes.push(ConfigChange::TwoPhase { on: two_phase(new) });
    }
    if old.lease.leases() != new.lease.leases() {
        changes.push(ConfigChange::Leases { on: new.lease.leases() });
    }
    if old.action != new.action {
        changes.push(ConfigChange::Action { blocks: new.action == Action::Block });
    }
    // A rule metered before and after (`metering` switched on or off is
    // said by itself).
    if old.usage.is_some() && new.usage.is_some() && old.refusal_shape() != new.refusal_shape() {
        changes.push(ConfigChange::Refusal { from: old.refusal_shape(), to: new.refusal_shape() });
    }
    price_changes(old, new, &mut changes);
    let metering: [Metered; 3] =
        [("penalty", |r| r.penalty_ms.is_some()), ("concurrency", |r| r.concurrency.is_some()), ("metering", |r| r.usage.is_some())];
    for (field, on) in metering {
        if on(old) != on(new) {
            changes.push(ConfigChange::Metering { field, on: on(new) });
        }
    }
    changes
}

/// A metered rule's unit and price table.
fn price_changes(old: &Rule, new: &Rule, changes: &mut Vec<ConfigChange>) {
    let (Some(a), Some(b)) = (&old.usage, &new.usage) else { return };
    // Money or not, and which currency: a header or a JSON path renamed
    // still counts the same tokens.
    let (from, to) = (a.unit().to_string(), b.unit().to_string());
    match (&a.price, &b.price) {
        (Some(p), Some(q)) if p.table.currency == q.table.currency && p.step != q.step => changes.push(ConfigChange::MoneyUnit { from, to, finer: q.step < p.step }),
        _ if from != to && (a.price.is_some() || b.price.is_some()) => changes.push(ConfigChange::Unit { from, to }),
        _ => {}
    }
    let (Some(a), Some(b)) = (&a.price, &b.price) else { return };
    // A shared table named before and after: its changes are said once.
    if a.name.is_some() && a.name == b.name {
        return;
    }
    let said = table_changes(&a.table, &b.table);
    if !said.is_empty() {
        changes.push(ConfigChange::Prices(said));
    }
}

/// What changed from price table `a` to `b`, model by model, in words.
fn table_changes(a: &crate::config::price::PriceTable, b: &crate::config::price::PriceTable) -> Vec<String> {
    let mut said = Vec::new();
    for (pattern, price) in &b.models {
        match a.models.iter().find(|(p, _)| p == pattern) {
            None => said.push(format!("`{pattern}` added")),
            Some((_, before)) if before != price => said.push(format!("`{pattern}` {} -> {}", price_words(before), price_words(price))),
            Some(_) => {}
        }
    }
    said.extend(a.models.iter().filter(|(p, _)| !b.models.iter().any(|(q, _)| q == p)).map(|(p, _)| format!("`{p}` removed (priced as unpriced: {})", b.unpriced.name())));
    if a.unpriced != b.unpriced {
        said.push(format!("unpriced {} -> {}", a.unpriced.name(), b.unpriced.name()));
    }
    if a.currency != b.currency {
        said.push(format!("currency {} -> {}", a.currency, b.currency));
    }
    said
}

/// Windows matched by length: raised, lowered, added, removed. Of a GCRA
/// row (`algorithm`: the one that wrote the rows), a window's state is
/// kept by its place among the limits.
fn limit_changes(old: &[Limit], new: &[Limit], algorithm: Algorithm, changes: &mut Vec<ConfigChange>) {
    let same = |a: &Limit, b: &Limit| a.window_ms == b.window_ms && a.calendar == b.calendar;
    let mut added = Vec::new();
    for (i, limit) in new.iter().enumerate() {
        let window = window_text(limit);
        let to = limit.requests.get();
        match old.iter().position(|l| same(l, limit)) {
            None => added.push(limit),
            Some(at) => {
                let from = old[at].requests.get();
                // GCRA reads cell i with the i-th limit.
                if algorithm == Algorithm::Gcra && at != i {
                    changes.push(ConfigChange::Moved { window: window.clone() });
                }
                if to < from {
                    changes.push(ConfigChange::Tightened { window, from, to, algorithm });
                } else if to > from {
                    changes.push(ConfigChange::Loosened { window, from, to, algorithm });
                }
            }
        }
    }
    let mut removed: Vec<&Limit> = old.iter().filter(|l| !new.iter().any(|n| same(n, l))).collect();
    for limit in added {
        // A window that changed between rolling and calendar (or its
        // calendar's unit or zone) pairs with a removed one of the other
        // kind, or another calendar, in order.
        let paired = removed.iter().position(|r| limit.calendar.is_some() || r.calendar.is_some());
        match paired.map(|at| removed.remove(at)) {
            Some(was) => changes.push(ConfigChange::Period {
                from: format!("{} per {}", was.requests.get(), window_text(was)),
                to: window_text(limit),
                requests: limit.requests.get(),
                calendar: limit.calendar.is_some(),
            }),
            None => changes.push(ConfigChange::WindowAdded { window: window_text(limit), requests: limit.requests.get(), algorithm }),
        }
    }
    for limit in removed {
        changes.push(ConfigChange::WindowRemoved { window: window_text(limit), requests: limit.requests.get() });
    }
}

fn limits_text(limits: &[Limit]) -> String {
    limits.iter().map(|l| format!("{}/{}", l.requests.get(), window_text(l))).collect::<Vec<_>>().join(", ")
}

/// Static overrides, matched by the key they resolve to.
fn override_changes(old: &Rule, new: &Rule, changes: &mut Vec<ConfigChange>) {
    let key_of = |o: &crate::config::overrides::Override| o.key.clone().unwrap_or_else(|| o.value.clone());
    for o in new.overrides.entries() {
        let before = old.overrides.entries().iter().find(|b| key_of(b) == key_of(o));
        let to = Some(limits_text(&o.limits));
        let from = before.map(|b| limits_text(&b.limits));
        if from != to {
            changes.push(ConfigChange::Override { value: o.value.clone(), from, to });
        }
    }
    for o in old.overrides.entries().iter().filter(|b| !new.overrides.entries().iter().any(|n| key_of(n) == key_of(b))) {
        changes.push(ConfigChange::Override { value: o.value.clone(), from: Some(limits_text(&o.limits)), to: None });
    }
}

/// What `tollgate diff` says of the configs' spellings
/// ([`crate::config::spelling`]): a config read from the older spelling
/// is the same rules as its current spelling, so a migration changes no
/// count (the rules' diff says nothing of it); `None` when neither uses it.
pub(crate) fn spelling_note(old: &Config, new: &Config) -> Option<String> {
    use crate::config::spelling::{OLD_SPELLING, SPELLING};
    let fields = |c: &Config| c.respelled.len();
    match (fields(old), fields(new)) {
        (0, 0) => None,
        (n, 0) => Some(format!(
            "spelling: OLD writes {n} field(s) in the {OLD_SPELLING} spelling, NEW is in the {SPELLING} spelling: the same rules, read alike by this release (a respelling alone changes no count)\n"
        )),
        (_, n) => Some(format!(
            "spelling: NEW writes {n} field(s) in the {OLD_SPELLING} spelling (read, with a warning each; `tollgate migrate` rewrites them into the {SPELLING} spelling)\n"
        )),
    }
}

/// The report `tollgate diff` prints: one block per changed rule.
pub(crate) fn report(diffs: &[RuleDiff]) -> String {
    if diffs.is_empty() {
        return "no rule changes: every count carries over as it is\n".to_string();
    }
    let mut out = String::new();
    for d in diffs {
        match d.table {
            true => out.push_str(&format!("prices `{}` (a shared table):\n", d.rule)),
            false => out.push_str(&format!("rule `{}`:\n", d.rule)),
        }
        for c in &d.changes {
            let mark = if c.resets() { "RESET" } else { "     " };
            out.push_str(&format!("  {mark} {c}\n"));
            if let Some(why) = c.needs_all_at_once() {
                out.push_str(&format!("  100%  deploy this to 100% at once, never as a gradual deployment (a versions split): {why}\n"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn config(value: Value) -> Config {
        Config::from_json(&value).unwrap()
    }

    fn api(extra: Value) -> Value {
        let mut rule = json!({ "name": "api", "path": "/api/*", "limits": [{ "requests": 10, "window": "1m" }] });
        rule.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        rule
    }

    /// The changes of `api` (or of every rule) from OLD to NEW rules.
    fn changes(old: Value, new: Value) -> Vec<RuleDiff> {
        diff(&config(json!({ "rules": old })), &config(json!({ "rules": new })))
    }

    fn one(old: Value, new: Value) -> Vec<ConfigChange> {
        let diffs = changes(json!([old]), json!([new]));
        diffs.into_iter().flat_map(|d| d.changes).collect()
    }

    #[test]
    fn an_unchanged_config_changes_nothing() {
        assert!(one(api(json!({})), api(json!({ "ratelimit_headers": true }))).is_empty());
        assert_eq!(report(&[]), "no rule changes: every count carries over as it is\n");
    }

    #[test]
    fn a_renamed_rule_starts_from_zero_and_an_added_or_removed_one_is_said() {
        let d = changes(json!([api(json!({}))]), json!([api(json!({ "name": "api-v2" }))]));
        assert_eq!(d, vec![RuleDiff { rule: "api-v2".into(), table: false, changes: vec![ConfigChange::Renamed { from: "api".into() }] }]);
        assert!(d[0].changes[0].resets());
        let d = changes(json!([api(json!({}))]), json!([api(json!({ "name": "other", "path": "/other" }))]));
        assert_eq!(d.iter().map(|d| (d.rule.as_str(), d.changes.clone())).collect::<Vec<_>>(), vec![("other", vec![ConfigChange::Added]), ("api", vec![ConfigChange::Removed])]);
        assert!(report(&d).contains("RESET new rule: every key starts from zero"), "{}", report(&d));
    }

    #[test]
    fn a_rule_changed_from_rolling_to_calendar_and_back_is_stated() {
        let rolling = api(json!({ "limits": [{ "requests": 10, "window": "1m" }, { "requests": 300, "window": "1d" }] }));
        let calendar = api(json!({ "limits": [{ "requests": 10, "window": "1m" }, { "requests": 300, "window": "day", "time_zone": "Asia/Tokyo" }] }));
        let to = one(rolling.clone(), calendar.clone());
        let stated = ConfigChange::Period { from: "300 per 1d".into(), to: "calendar day in Asia/Tokyo".into(), requests: 300, calendar: true };
        assert_eq!(to, vec![stated]);
        assert!(!to[0].resets(), "the hits each row holds carry over");
        assert!(to[0].to_string().contains("window 300 per 1d -> 300 per calendar day in Asia/Tokyo: counts each row's hits since the period began"), "{}", to[0]);
        let back = one(calendar.clone(), rolling);
        assert_eq!(back, vec![ConfigChange::Period { from: "300 per calendar day in Asia/Tokyo".into(), to: "1d".into(), requests: 300, calendar: false }]);
        assert!(back[0].to_string().contains("rolling again"), "{}", back[0]);
        // Another zone is another period; a tightened calendar window says so.
        let paris = api(json!({ "limits": [{ "requests": 10, "window": "1m" }, { "requests": 200, "window": "day", "time_zone": "Europe/Paris" }] }));
        assert!(matches!(&one(calendar.clone(), paris)[..], [ConfigChange::Period { to, calendar: true, .. }] if to == "calendar day in Europe/Paris"));
        let tighter = api(json!({ "limits": [{ "requests": 10, "window": "1m" }, { "requests": 200, "window": "day", "time_zone": "Asia/Tokyo" }] }));
        let tightened = one(calendar, tighter);
        assert_eq!(tightened, vec![ConfigChange::Tightened { window: "calendar day in Asia/Tokyo".into(), from: 300, to: 200, algorithm: Algorithm::SlidingLog }]);
    }

    #[test]
    fn a_changed_key_or_ipv6_prefix_starts_from_zero() {
        let key = one(api(json!({})), api(json!({ "key": ["header:x-api-key"] })));
        assert_eq!(key, vec![ConfigChange::KeyChanged { from: "ip".into(), to: "header:x-api-key".into() }]);
        assert!(key[0].resets());
        let rules = json!([api(json!({})), api(json!({ "name": "tenant", "path": "/t", "key": ["header:x-tenant"] }))]);
        let d = diff(&config(json!({ "rules": rules })), &config(json!({ "ipv6_prefix": 48, "rules": rules })));
        assert_eq!(d, vec![RuleDiff { rule: "api".into(), table: false, changes: vec![ConfigChange::Ipv6Prefix { from: 64, to: 48 }] }], "only the rule keyed on ip");
        assert!(d[0].changes[0].to_string().contains("IPv4 clients carry over"));
    }

    #[test]
    fn limits_tighten_loosen_appear_and_vanish() {
        let limits = |pairs: Value| api(json!({ "limits": pairs }));
        let old = limits(json!([{ "requests": 10, "window": "1m" }, { "requests": 100, "window": "1h" }]));
        let new = limits(json!([{ "requests": 5, "window": "1m" }, { "requests": 1000, "window": "1d" }]));
        let c = one(old.clone(), new);
        assert_eq!(
            c,
            vec![
                ConfigChange::Tightened { window: "1m".into(), from: 10, to: 5, algorithm: Algorithm::SlidingLog },
                ConfigChange::WindowAdded { window: "1d".into(), requests: 1000, algorithm: Algorithm::SlidingLog },
                ConfigChange::WindowRemoved { window: "1h".into(), requests: 100 },
            ]
        );
        assert_eq!(c[0].to_string(), "tightens 10 -> 5 per 1m: keys already over 5 are blocked at once");
        assert!(!c.iter().any(ConfigChange::resets), "a log's hits carry over");
        let up = one(old, limits(json!([{ "requests": 20, "window": "1m" }, { "requests": 100, "window": "1h" }])));
        assert_eq!(up, vec![ConfigChange::Loosened { window: "1m".into(), from: 10, to: 20, algorithm: Algorithm::SlidingLog }]);
    }

    #[test]
    fn a_gcra_window_whose_limit_changes_carries_the_units_owed() {
        let gcra = |requests: u32| api(json!({ "algorithm": "gcra", "limits": [{ "requests": requests, "window": "1m" }] }));
        let c = one(gcra(10), gcra(5));
        assert_eq!(c, vec![ConfigChange::Tightened { window: "1m".into(), from: 10, to: 5, algorithm: Algorithm::Gcra }]);
        assert!(!c[0].resets());
        assert!(c[0].to_string().ends_with("blocked at once (the units they owe drain at the new rate)"), "{}", c[0]);
        assert!(!one(gcra(10), gcra(20))[0].resets());
        let two = |first: Value, second: Value| api(json!({ "algorithm": "gcra", "limits": [first, second] }));
        let (s, h) = (json!({ "requests": 10, "window": "1s" }), json!({ "requests": 100, "window": "1h" }));
        let swapped = one(two(s.clone(), h.clone()), two(h, s));
        assert_eq!(swapped, vec![ConfigChange::Moved { window: "1h".into() }, ConfigChange::Moved { window: "1s".into() }]);
    }

    #[test]
    fn an_algorithm_switch_reads_the_other_rows_towards_blocking() {
        let to_gcra = one(api(json!({})), api(json!({ "algorithm": "gcra" })));
        assert_eq!(to_gcra, vec![ConfigChange::Algorithm { from: Algorithm::SlidingLog, to: Algorithm::Gcra }]);
        assert!(!to_gcra[0].resets());
        assert!(to_gcra[0].to_string().contains("read towards blocking, never as empty"));
        let to_log = one(api(json!({ "algorithm": "gcra" })), api(json!({})));
        assert_eq!(to_log, vec![ConfigChange::Algorithm { from: Algorithm::Gcra, to: Algorithm::SlidingLog }]);
        // A limit changed with it carries over too.
        let both = one(api(json!({})), api(json!({ "algorithm": "gcra", "limits": [{ "requests": 5, "window": "1m" }] })));
        assert!(!both.iter().any(ConfigChange::resets), "{both:?}");
        let back = one(api(json!({ "algorithm": "gcra" })), api(json!({ "limits": [{ "requests": 5, "window": "1m" }] })));
        assert!(!back.iter().any(ConfigChange::resets), "{back:?}");
    }

    #[test]
    fn static_overrides_appear_vanish_and_change() {
        let with = |o: Value| api(json!({ "key": ["header:x-tenant"], "overrides": o }));
        let old = with(json!({ "acme": [{ "requests": 100, "window": "1m" }], "umbrella": [{ "requests": 50, "window": "1m" }] }));
        let new = with(json!({ "acme": [{ "requests": 200, "window": "1m" }], "initech": [{ "requests": 5, "window": "1s" }] }));
        let c = one(old, new);
        let by = |v: &str| c.iter().find(|c| matches!(c, ConfigChange::Override { value, .. } if value == v)).unwrap().to_string();
        assert_eq!(by("acme"), "override `acme`: 100/1m -> 200/1m, at once");
        assert_eq!(by("initech"), "override `initech` appears: 5/1s, at once");
        assert_eq!(by("umbrella"), "override `umbrella` vanishes: 50/1m -> the rule's limits, at once");
    }

    #[test]
    fn two_phase_counting_leases_and_shadow_mode_switching() {
        let two_phase = one(api(json!({})), api(json!({ "count_statuses": [401] })));
        assert!(two_phase.contains(&ConfigChange::TwoPhase { on: true }), "{two_phase:?}");
        assert_eq!(one(api(json!({ "count_statuses": [401] })), api(json!({}))), vec![ConfigChange::TwoPhase { on: false }]);
        let big = |lease: &str| api(json!({ "key": ["global"], "limits": [{ "requests": 5000, "window": "1m" }], "lease": lease }));
        assert_eq!(one(big("off"), big("auto")), vec![ConfigChange::Leases { on: true }]);
        assert_eq!(one(big("auto"), big("off")), vec![ConfigChange::Leases { on: false }]);
        assert_eq!(one(api(json!({ "action": "log" })), api(json!({}))), vec![ConfigChange::Action { blocks: true }]);
        assert_eq!(one(api(json!({})), api(json!({ "action": "log" }))), vec![ConfigChange::Action { blocks: false }]);
    }

    #[test]
    fn metering_fields_switched_on_say_to_wait_for_the_objects() {
        let on = one(api(json!({})), api(json!({ "penalty": "1h", "concurrency": 3 })));
        assert_eq!(on, vec![ConfigChange::Metering { field: "penalty", on: true }, ConfigChange::Metering { field: "concurrency", on: true }]);
        assert!(on[0].to_string().contains("deploy it once every object runs 0.2.0"), "{}", on[0]);
        let usage = api(json!({ "metering": { "header": "x-units", "reserve": 5, "max": 5 }, "counting": { "mode": "response" } }));
        assert_eq!(one(usage, api(json!({}))), vec![ConfigChange::Metering { field: "metering", on: false }]);
    }

    /// A change of `metering.refusal` is stated.
    #[test]
    fn a_refusal_shape_changed_is_stated() {
        let llm = |metering: serde_json::Value| api(json!({ "metering": metering, "counting": { "mode": "response" } }));
        let anthropic = llm(json!({ "usage": "anthropic", "reserve": 5, "max": 5 }));
        let problem = llm(json!({ "usage": "anthropic", "reserve": 5, "max": 5, "refusal": "problem" }));
        let changed = one(anthropic, problem.clone());
        assert_eq!(changed, vec![ConfigChange::Refusal { from: Some(Provider::Anthropic), to: None }]);
        assert!(changed[0].to_string().starts_with("refusals anthropic's error JSON -> problem+json: "), "{}", changed[0]);
        assert_eq!(one(problem, llm(json!({ "usage": { "json": "usage.total_tokens" }, "reserve": 5, "max": 5 }))), vec![], "problem+json both");
        assert_eq!(one(api(json!({})), llm(json!({ "usage": "gemini", "reserve": 5, "max": 5 }))), vec![ConfigChange::Metering { field: "metering", on: true }]);
    }

    /// A sliding log past 10,000 needs this release's
    /// objects (they coalesce) and its config reader.
    #[test]
    fn a_sliding_log_limit_raised_past_10_000_says_to_wait_for_the_objects() {
        let day = |n: u32| json!([{ "requests": n, "window": "1d" }]);
        let raised = one(api(json!({ "limits": day(10_000) })), api(json!({ "limits": day(1_000_000) })));
        assert_eq!(raised.last(), Some(&ConfigChange::LargeLog), "{raised:?}");
        assert!(raised.last().unwrap().to_string().contains("deploy it once every object runs this release"));
        assert!(!one(api(json!({ "limits": day(1_000_000) })), api(json!({ "limits": day(2_000_000) }))).contains(&ConfigChange::LargeLog), "already large");
        assert!(!one(api(json!({ "limits": day(10_000) })), api(json!({ "limits": day(1_000_000) , "algorithm": "gcra" }))).contains(&ConfigChange::LargeLog), "GCRA");
    }

    /// The older spelling and the current one are the same rules.
    #[test]
    fn a_respelled_config_changes_no_count_and_the_spelling_is_said() {
        let usage = json!({ "header": "x-units", "reserve": 5, "max": 5 });
        let old = config(json!({ "rules": [api(json!({ "count_statuses": [401], "cost": usage, "key": ["header:k"], "concurrency": 2 }))] }));
        let new = config(json!({ "rules": [api(json!({ "counting": { "mode": "response", "statuses": [401] }, "metering": usage, "key": ["header:k"], "concurrency": 2 }))] }));
        assert_eq!(diff(&old, &new), vec![]);
        let migrated = spelling_note(&old, &new).unwrap_or_default();
        assert!(migrated.contains("OLD writes 2 field(s) in the 0.1 spelling") && migrated.contains("changes no count"), "{migrated}");
        assert!(spelling_note(&new, &old).unwrap_or_default().contains("`tollgate migrate` rewrites them"));
        assert_eq!(spelling_note(&new, &new), None);
    }

    /// During a gradual deployment an old edge whose config
    /// lacked `penalty` admitted 12 of 45 requests inside a 30 s penalty.
    #[test]
    fn fields_old_edges_cannot_apply_and_moved_counts_go_to_100_percent_at_once() {
        let usage = api(json!({ "cost": { "header": "x-units", "reserve": 5, "max": 5 } }));
        let added = [api(json!({ "penalty": "5m" })), api(json!({ "concurrency": 1 })), usage.clone(), api(json!({ "key": ["header:x-user"] }))];
        for new in added {
            let c = one(api(json!({})), new.clone());
            assert!(c.iter().any(|c| c.needs_all_at_once().is_some()), "{new}: {c:?}");
            let text = report(&changes(json!([api(json!({}))]), json!([new])));
            assert!(text.contains("100%  deploy this to 100% at once, never as a gradual deployment"), "{text}");
        }
        assert!(report(&changes(json!([api(json!({}))]), json!([api(json!({ "name": "v2" }))]))).contains("both budgets"));
        // Taking them away, or a change both versions count alike, splits safely.
        let safe = [
            one(api(json!({ "penalty": "5m" })), api(json!({}))),
            one(usage, api(json!({}))),
            one(api(json!({})), api(json!({ "limits": [{ "requests": 5, "window": "1m" }] }))),
            one(api(json!({})), api(json!({ "algorithm": "gcra" }))),
            one(api(json!({})), api(json!({ "count_statuses": [401] }))),
        ];
        for c in safe {
            assert!(c.iter().all(|c| c.needs_all_at_once().is_none()), "{c:?}");
        }
    }
}
