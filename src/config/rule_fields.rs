//! A rule's table: [`RULE_FIELDS`] (every field a rule accepts, and how it
//! is read into a [`RuleDraft`]) and the tables only a rule has
//! (`response`, `trusted_device`). A draft starts out holding the defaults;
//! [`RuleDraft::finish`] runs the checks that span fields
//! ([`crate::config::checks`]) and yields the [`RuleSpec`], which
//! [`parse_rule`] compiles. Every problem is reported under the rule's name.

use crate::config::checks;
use crate::config::exempt_fields::read_exempt;
use crate::config::limits::{read_limits, read_overrides};
use crate::config::price::PriceTable;
use crate::config::overrides::Overrides;
use crate::config::policy::{
    Action, Counting, FailPolicy, LeaseChoice, MetricsLevel, MissingKey, OnMissingKey, SuccessAction, TrustedDevice, UploadLimits, DEFAULT_DEVICE_COOKIE,
    DEFAULT_DEVICE_TTL_S, MAX_UPLOAD_BUFFER, MAX_UPLOAD_TIMEOUT_MS,
};
use crate::config::exempt_fields;
use crate::config::limits::LIMIT_FIELDS;
use crate::config::policy::{CountingMode, Named};
use crate::config::spelling;
use crate::config::written::{self, conditions, numbers, parts, text, texts};
use crate::config::reader::{infos, source_names, FieldInfo, Shape, CONDITION, HEADER_NAME, KEY, SECRET_NAME, STATUSES, valid_cookie_name, valid_header_name, valid_method, valid_name, valid_secret_name, valid_suffix, Errors, Field, Input, read_table};
use crate::config::response::{self, CustomResponse};
use crate::config::rules::{Rule, RuleSpec, Target};
use crate::config::{ConfigError, ConfigWarning, DEFAULT_SUFFIXES, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS};
use crate::count::lease::LeaseMode;
use crate::count::protocol::{Algorithm, MAX_CONCURRENCY, MAX_LEASE_TTL_MS, MAX_LEASE_UNITS};
use crate::request::canon::Sources;
use crate::request::exempt::Exemptions;
use crate::request::key::KeyPart;
use serde_json::Value;
use std::num::NonZeroU64;

/// A rule while its table is read: its spec with the defaults, and what
/// was written of the fields that only together say what to do ([`Given`]).
pub(super) struct RuleDraft {
    pub(super) spec: RuleSpec,
    pub(super) given: Given,
}

/// The fields that only together say what to do when a key part is
/// missing, what a success does, how a rule counts, how long a
/// reservation holds and whether it leases: as written, for
/// [`RuleDraft::finish`].
#[derive(Default)]
pub(super) struct Given {
    pub(super) on_missing_key: Option<OnMissingKey>,
    /// Present (its errors reported) even when some part was invalid, so
    /// that it is not also reported missing.
    pub(super) fallback_key: Option<Vec<KeyPart>>,
    /// `counting.mode`, as given (checked against the fields that count
    /// in two phases in [`RuleDraft::finish`]).
    pub(super) mode: Option<CountingMode>,
    pub(super) success_action: Option<SuccessAction>,
    pub(super) success_statuses: Option<Vec<u16>>,
    pub(super) identity_header: Option<String>,
    pub(super) reservation_ttl_ms: Option<u64>,
    /// `idle_release`, as given (checked against `concurrency` and
    /// `reservation_ttl` in [`RuleDraft::finish`]).
    pub(super) idle_release_ms: Option<u64>,
    /// `upload_buffer` and `upload_timeout`, as given (for the check that
    /// they belong to a rule that counts statuses).
    pub(super) upload_buffer: Option<u32>,
    pub(super) upload_timeout_ms: Option<u32>,
    /// `lease`: auto (true) or off (false).
    pub(super) lease_auto: Option<bool>,
    pub(super) lease_ttl_ms: Option<u64>,
    pub(super) lease_max: Option<u32>,
    /// `cost` was written (refused beside `metering`, whose `reserve` is
    /// what a request spends).
    pub(super) cost_given: bool,
    /// `counting.statuses`, `metering` or `concurrency` was written (valid
    /// or not): `mode = "response"` is then not refused for want of them.
    pub(super) two_phase_given: bool,
    /// `limits` was written (valid or not).
    pub(super) limits_given: bool,
    /// `algorithm` was written (refused on a rule without `limits`).
    pub(super) algorithm_given: bool,
    /// The units `limits` and `overrides` were written in: (spend, requests).
    pub(super) units: (bool, bool),
    /// `metering` was written (valid or not: a wrong one is reported once).
    pub(super) metering_given: bool,
    /// The rule's money unit and shared price table, found before its
    /// fields are read.
    pub(super) pricing: crate::config::price_fields::Pricing,
}

impl RuleDraft {
    pub(super) fn new() -> RuleDraft {
        let spec = RuleSpec {
            name: String::new(),
            path: String::new(),
            host: None,
            methods: Vec::new(),
            conditions: Vec::new(),
            query_sources: Sources::DEFAULT,
            // When in doubt, match: Express, ASP.NET and IIS route paths
            // case-insensitively, so rules do too unless told otherwise.
            case_insensitive: true,
            suffixes: DEFAULT_SUFFIXES.iter().map(|s| s.to_string()).collect(),
            key: vec![KeyPart::Ip],
            on_missing_key: MissingKey::Reject,
            missing_key_given: false,
            counting: Counting::All,
            on_success: None,
            trusted_device: None,
            ratelimit_headers: false,
            algorithm: Algorithm::SlidingLog,
            limits: Vec::new(),
            cost: 1,
            action: Action::Block,
            on_error: FailPolicy::Allow,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            reservation_ttl_ms: 0,
            idle_release_ms: crate::config::DEFAULT_IDLE_RELEASE_MS,
            upload: UploadLimits::default(),
            // Built-in rules (the admin lockout) never lease; config rules
            // get theirs in `finish`.
            lease: LeaseMode::Off,
            exempt: Exemptions::default(),
            overrides: Overrides::default(),
            response: None,
            metrics: MetricsLevel::default(),
            metrics_raw_key: false,
            penalty_ms: None,
            usage: None,
            refusal: response::OwnRefusal::Problem,
            concurrency: None,
            windowless: false,
        };
        RuleDraft { spec, given: Given::default() }
    }

    /// The spec, once the checks that span fields have passed.
    pub(super) fn finish(self, errors: &mut Errors) -> RuleSpec {
        let RuleDraft { mut spec, given } = self;
        spec.missing_key_given = given.on_missing_key.is_some() || given.fallback_key.is_some();
        spec.on_missing_key = checks::missing_key(given.on_missing_key, given.fallback_key, errors);
        checks::counting_mode(&spec, given.mode, given.two_phase_given, errors);
        checks::windowless(&mut spec, given.limits_given, given.algorithm_given, errors);
        spec.on_success = checks::on_success(&spec, given.success_action, given.success_statuses, given.identity_header, errors);
        spec.upload = checks::upload_limits(&spec, given.upload_buffer, given.upload_timeout_ms, errors);
        // A two-phase field written but wrong (a bad `metering`) is its own
        // error: `reservation_ttl` is not refused for it too.
        let ttl = given.reservation_ttl_ms.filter(|_| spec.reserves() || !given.two_phase_given);
        spec.reservation_ttl_ms = checks::reservation_ttl(&spec, ttl, errors);
        spec.idle_release_ms = crate::config::cost_fields::idle_release(&spec, given.idle_release_ms, errors);
        checks::check_on_success(&spec, errors);
        checks::check_trusted_device(&spec, errors);
        checks::check_cost(&mut spec, given.cost_given, errors);
        crate::config::cost_fields::check_concurrency(&spec, errors);
        spec.lease = checks::lease_mode(&spec, given.lease_auto, given.lease_ttl_ms, given.lease_max, errors);
        checks::check_overrides(&mut spec, errors);
        checks::check_query_sources(&spec, errors);
        checks::check_penalty(&spec, errors);
        checks::check_calendar(&spec, errors);
        let metering_read = spec.usage.is_some() || !given.metering_given;
        if let Some(why) = crate::config::limits::money_error(spec.counts_money(), given.units).filter(|_| metering_read) {
            errors.push("limits", why);
        }
        spec
    }
}

/// A rule's field: read into the draft, written back from the spec.
type RuleField = Field<RuleDraft, RuleSpec>;

/// Every field a rule accepts, how it is read, and how it is written back
/// ([`crate::config::describe::rule_json`]).
pub(super) const RULE_FIELDS: &[RuleField] = &[
    RuleField::required("name", "missing", Shape::Text("^[A-Za-z0-9._-]{1,64}$"), "The rule's name: 1-64 of a-z A-Z 0-9 - _ . (it names the counters; unique).", |d, i| {
        if let Some(name) = i.text(valid_name, "use 1-64 characters from a-z, A-Z, 0-9, `-`, `_`, `.`") {
            d.spec.name = name;
        }
    }).writes(|r| Some(text(&r.name))),
    RuleField::required("path", "missing", Shape::Text("^/"), "URLPattern pathname matched against the canonical path, e.g. \"/api/login\" or \"/api/schools/:school/*\".", |d, i| {
        if let Some(path) = i.text(|p| p.starts_with('/'), "must be a URLPattern pathname starting with `/`") {
            d.spec.path = path;
        }
    }).writes(|r| Some(text(&r.path))),
    RuleField::optional("host", Shape::NonEmptyText, "URLPattern hostname the request must have, e.g. \"api.example.com\" or \"*.example.com\" (default: any host).", |d, i| {
        if let Some(host) = i.text(|h| !h.is_empty(), "must be a non-empty URLPattern hostname") {
            d.spec.host = Some(host.to_ascii_lowercase());
        }
    }).writes(|r| r.host.as_deref().map(text)),
    RuleField::optional("methods", Shape::List(&Shape::Text("^[A-Za-z]+$"), 1), "HTTP methods the rule applies to, e.g. [\"POST\"] (standard ones in any case, custom ones in upper case; default: every method). Method overrides are honoured.", |d, i| {
        let valid = |list: &[String]| !list.is_empty() && list.iter().all(|m| valid_method(m));
        let message = "must be a non-empty list of HTTP methods: standard ones in any case, custom ones in upper case as they are sent";
        if let Some(methods) = i.strings(valid, message) {
            d.spec.methods = methods.iter().map(|m| m.to_ascii_uppercase()).collect();
        }
    }).writes(|r| (!r.methods.is_empty()).then(|| texts(&r.methods))),
    RuleField::optional("query", Shape::Map(&CONDITION), "Query conditions, all of which must hold: name = \"value\" (equals), [\"a\", \"b\"] (any of) or true (present).", |d, i| {
        if let Some(conditions) = i.conditions(Target::Query, "must be a table of key = condition") {
            d.spec.conditions.extend(conditions);
        }
    }).writes(|r| Some(conditions(&r.conditions, Target::Query))),
    RuleField::optional("query_sources", Shape::List(&Shape::Names(source_names), 1), "Where query conditions look: any of \"query\", \"body\" (form and JSON bodies), \"cookie\" (default [\"query\", \"body\"]).", |d, i| {
        if let Some(sources) = i.sources() {
            d.spec.query_sources = sources;
        }
    }).writes(|r| Some(written::query_sources(r.query_sources))),
    RuleField::optional("header", Shape::Map(&CONDITION), "Header conditions, all of which must hold: header-name = \"value\" (equals), [\"a\", \"b\"] (any of) or true (present).", |d, i| {
        if let Some(conditions) = i.conditions(Target::Header, "must be a table of header-name = condition") {
            d.spec.conditions.extend(conditions);
        }
    }).writes(|r| Some(conditions(&r.conditions, Target::Header))),
    RuleField::optional("case_insensitive", Shape::Flag, "Whether the path matches in any case (default true, as most routers match).", |d, i| {
        if let Some(on) = i.flag() {
            d.spec.case_insensitive = on;
        }
    }).writes(|r| Some(r.case_insensitive.into())),
    RuleField::optional("suffixes", Shape::List(&Shape::Text("^\\.*[A-Za-z0-9]+$"), 0), "Format suffixes folded into the bare path (\"/a.json\" is \"/a\"); default [\"json\", \"xml\", \"html\", \"htm\", \"txt\", \"csv\", \"yaml\", \"yml\"].", |d, i| {
        let valid = |list: &[String]| list.iter().all(|s| valid_suffix(s));
        if let Some(suffixes) = i.strings(valid, "must be a list of extensions such as \"json\"") {
            d.spec.suffixes = suffixes.iter().map(|s| s.trim_start_matches('.').to_ascii_lowercase()).collect();
        }
    }).writes(|r| Some(texts(&r.suffixes))),
    RuleField::optional("key", KEY, "What a client is counted by: a list of parts, e.g. [\"ip\"], [\"header:x-api-key\"], [\"body:email:lower\"], [\"path:school:int\"], [\"cookie:session\"], [\"query:id\"], [\"country\"], [\"asn\"], [\"global\"] (default [\"ip\"]).", |d, i| d.spec.key = i.key_parts()).writes(|r| Some(parts(&r.key))),
    RuleField::optional("on_missing_key", Shape::Names(OnMissingKey::names), "When a key part is missing from a request: \"reject\" (400; the default), \"skip\" (the rule does not apply) or \"fallback\" (count by fallback_key).", |d, i| {
        d.given.on_missing_key = i.choice::<OnMissingKey>(None);
    }).writes(|r| Some(written::on_missing_key(&r.on_missing_key))),
    RuleField::optional("fallback_key", KEY, "The key to count by when a part of key is missing (implies on_missing_key = \"fallback\"), e.g. [\"ip\"].", |d, i| d.given.fallback_key = Some(i.key_parts())).writes(|r| match &r.on_missing_key {
        MissingKey::Fallback(fallback) => Some(parts(fallback)),
        _ => None,
    }),
    RuleField::optional(spelling::COUNTING, Shape::Table(counting_infos), "When a request is counted: { mode = \"request\" } (the default: as it arrives; may lease) or { mode = \"response\", statuses, reservation_ttl, upload_buffer, upload_timeout } (reserved as it arrives, settled once the origin answered: for statuses, metering and concurrency; never leases).", read_counting).writes(|r| Some(written::counting_mode(r))),
    RuleField::optional("on_success", Shape::Names(SuccessAction::names), "What a success does to a failures-only rule's count: \"clear\" (forget every failure) or \"decrement\" (forgive one). Needs counting.statuses.", |d, i| {
        d.given.success_action = i.choice::<SuccessAction>(None);
    }).writes(|r| r.on_success.as_ref().map(|on| on.action.name().into())),
    RuleField::optional("success_statuses", STATUSES, "The statuses that are a success (below 400; default [200, 204]). Needs on_success.", |d, i| d.given.success_statuses = i.statuses()).writes(|r| r.on_success.as_ref().map(|on| numbers(&on.statuses))),
    RuleField::optional("success_identity_header", HEADER_NAME, "A response header in which the origin names the account it authenticated: a success applies only to that account. Needs on_success.", |d, i| {
        let name = i.text(valid_header_name, "must be a response header name such as \"x-authenticated-user\"");
        d.given.identity_header = name.map(|n| n.to_ascii_lowercase());
    }).writes(|r| r.on_success.as_ref().and_then(|on| on.identity_header.as_deref()).map(text)),
    RuleField::optional("trusted_device", Shape::Table(device_infos), "A device that logged in to an account gets a signed cookie and a bucket of its own: { secret, cookie, ttl }. Needs on_success.", |d, i| d.spec.trusted_device = read_trusted_device(i)).writes(|r| r.trusted_device.as_ref().map(written::trusted_device)),
    RuleField::optional("lease", Shape::Names(LeaseChoice::names), "Leased budgets: \"auto\" (the default: each isolate takes a share of the budget where that stays exact) or \"off\".", |d, i| d.given.lease_auto = i.choice::<LeaseChoice>(None).map(|c| c == LeaseChoice::Auto)).writes(|r| Some(written::lease(r.lease))),
    RuleField::optional("lease_ttl", Shape::Duration, "How long a lease lasts, e.g. \"1s\" (the default, or half the shortest window; at most 60s).", |d, i| {
        if let Some(ms) = i.duration("\"1s\"") {
            if ms.get() <= MAX_LEASE_TTL_MS {
                d.given.lease_ttl_ms = Some(ms.get());
            } else {
                i.report("must be at most 60s");
            }
        }
    }).writes(|r| r.lease.settings().map(|s| written::duration(s.ttl_ms).into())),
    RuleField::optional("lease_max", Shape::Integer(1, MAX_LEASE_UNITS as u64), "The most units one lease asks for.", |d, i| {
        if let Some(max) = i.number(1..=u64::from(MAX_LEASE_UNITS), "whole number") {
            d.given.lease_max = Some(max);
        }
    }).writes(|r| r.lease.settings().map(|s| s.max.into())),
    RuleField::optional("ratelimit_headers", Shape::Flag, "Whether allowed responses carry RateLimit and RateLimit-Policy fields (default false; blocked ones always do).", |d, i| {
        if let Some(on) = i.flag() {
            d.spec.ratelimit_headers = on;
        }
    }).writes(|r| Some(r.ratelimit_headers.into())),
    RuleField::optional("algorithm", Shape::Names(Algorithm::names), "How the counter counts: \"sliding_log\" (exact; the default; up to 10000 requests per window) or \"gcra\" (O(1) state).", |d, i| {
        d.given.algorithm_given = true;
        if let Some(algorithm) = i.choice::<Algorithm>(None) {
            d.spec.algorithm = algorithm;
        }
    }).writes(|r| (!r.windowless).then(|| r.algorithm.name().into())),
    RuleField::optional("limits", Shape::List(&Shape::Table(limit_infos), 1), "The windows, all enforced at once (at most 8): [{ requests = 10, window = \"60s\" }]. Required, but for a concurrency rule that limits only what is in flight.", |d, i| {
        d.given.limits_given = true;
        if let Some(limits) = read_limits(i, &mut d.given.units, d.given.pricing.step) {
            d.spec.limits = limits;
        }
    }).writes(|r| (!r.windowless).then(|| written::limits(&r.limits, r.money_step()))),
    RuleField::optional("cost", Shape::Integer(1, u32::MAX as u64), "Units each request spends (default 1; at most the smallest limit). Usage the origin reports is metering.", |d, i| {
        if let Some(cost) = i.number(1..=u64::from(u32::MAX), "whole number (usage the origin reports is metering = { header, reserve, max })") {
            d.spec.cost = cost;
            d.given.cost_given = true;
        }
    }).writes(|r| r.usage.is_none().then(|| r.cost.into())),
    RuleField::optional("metering", Shape::Table(crate::config::cost_fields::usage_infos), "Usage reported by the origin, counted in two phases (needs counting = { mode = \"response\" }): { header = \"x-usage-units\", reserve = 1000, max = 100000, expose = false }.", |d, i| {
        d.given.two_phase_given = true;
        d.given.metering_given = true;
        if let Some((usage, refusal)) = crate::config::cost_fields::read_usage(i, &d.given.pricing) {
            d.spec.usage = Some(usage);
            d.spec.refusal = refusal;
        }
    }).writes(|r| r.usage.as_ref().map(|u| written::metering(u, r.refusal))),
    RuleField::optional("concurrency", Shape::Integer(1, MAX_CONCURRENCY as u64), "At most this many requests of one key in flight at once, across every isolate (needs counting = { mode = \"response\" }: a slot is held until the response has been sent, or the client went away; counting.reservation_ttl frees a lost one).", |d, i| {
        d.given.two_phase_given = true;
        d.spec.concurrency = i.number(1..=u64::from(MAX_CONCURRENCY), "whole number");
    }).writes(|r| r.concurrency.map(Value::from)),
    RuleField::optional("idle_release", Shape::Duration, "With concurrency: an answer the client stops reading for this long is cut and its slot given back, e.g. \"5s\" (default: 10 s; at most counting.reservation_ttl).", |d, i| d.given.idle_release_ms = i.duration("\"5s\"").map(NonZeroU64::get)).writes(|r| r.concurrency.map(|_| written::duration(r.idle_release_ms).into())),
    RuleField::optional("action", Shape::Names(Action::names), "What a request over the limit gets: \"block\" (429; the default) or \"log\" (shadow mode: logged, never blocked).", |d, i| {
        if let Some(action) = i.choice::<Action>(None) {
            d.spec.action = action;
        }
    }).writes(|r| Some(r.action.name().into())),
    RuleField::optional("on_error", Shape::Names(FailPolicy::names), "When the counter cannot be reached in time: \"allow\" (fail open; the default) or \"deny\" (fail closed: 503).", |d, i| {
        if let Some(policy) = i.choice::<FailPolicy>(None) {
            d.spec.on_error = policy;
        }
    }).writes(|r| Some(r.on_error.name().into())),
    RuleField::optional("exempt", Shape::Table(exempt_fields::exempt_infos), "Requests this rule does not count or limit: { ips, asns, verified_bots, header }.", |d, i| d.spec.exempt = read_exempt(i)).writes(|r| Some(written::exempt(&r.exempt))),
    RuleField::optional("overrides", Shape::Map(&Shape::List(&Shape::Table(limit_infos), 1)), "A key value's own limits, e.g. { \"42\" = [{ requests = 1000, window = \"1d\" }] } (one-part keys).", |d, i| d.spec.overrides = read_overrides(i, &mut d.given.units, d.given.pricing.step)).writes(|r| Some(written::overrides(&r.overrides, r.money_step()))),
    RuleField::optional("response", Shape::Table(response_infos), "The rule's own block response: { status = 429 or 503, content_type, body } ({retry_after} and {rule} are placeholders).", |d, i| d.spec.response = read_response(i)).writes(|r| r.response.as_ref().map(written::custom_response)),
    RuleField::optional("metrics", Shape::Names(MetricsLevel::names), "What the rule writes to the TOLLGATE_METRICS Analytics Engine dataset: \"off\", \"limited\" (the default: all but allowed requests) or \"all\".", |d, i| {
        if let Some(level) = i.choice::<MetricsLevel>(None) {
            d.spec.metrics = level;
        }
    }).writes(|r| Some(r.metrics.name().into())),
    RuleField::optional("metrics_raw_key", Shape::Flag, "Whether the rule's metric points carry the raw key beside its hash, for the console's events view (default false: only the hash; a raw key is personal data, such as an IP address or an account id).", |d, i| {
        if let Some(on) = i.flag() {
            d.spec.metrics_raw_key = on;
        }
    }).writes(|r| Some(r.metrics_raw_key.into())),
    RuleField::optional("penalty", Shape::Duration, "How long a key refused by one of the rule's limits stays refused, from that first refusal, e.g. \"10m\" (at least the longest window; default: none).", |d, i| d.spec.penalty_ms = i.duration("\"10m\"").map(NonZeroU64::get)).writes(|r| r.penalty_ms.map(|ms| written::duration(ms).into())),
    RuleField::optional("timeout", Shape::Duration, "How long to wait for the counter before on_error applies, e.g. \"2s\" (the default; at most 30s).", |d, i| {
        if let Some(ms) = i.duration("\"2s\"") {
            match u32::try_from(ms.get()) {
                Ok(ms) if ms <= MAX_TIMEOUT_MS => d.spec.timeout_ms = ms,
                _ => i.report("must be at most 30s"),
            }
        }
    }).writes(|r| Some(written::duration(u64::from(r.timeout_ms)).into())),
];

/// The fields of `counting`, read into the rule's draft: the mode and
/// what the two-phase mode unlocks.
const COUNTING_FIELDS: &[Field<RuleDraft>] = &[
    Field::required("mode", "missing: \"request\" (counted as it arrives) or \"response\" (reserved, then settled once the origin answered)", Shape::Names(CountingMode::names), "\"request\" (counted as the request arrives; the default) or \"response\" (reserved as it arrives, settled once the origin answered).", |d, i| {
        d.given.mode = i.choice::<CountingMode>(None);
    }),
    Field::optional("statuses", STATUSES, "Count only requests whose origin answer has one of these statuses (failures-only, e.g. [401, 403]); checked before, counted after the origin answers.", |d, i| {
        d.given.two_phase_given = true;
        if let Some(statuses) = i.statuses() {
            d.spec.counting = Counting::Statuses(statuses);
        }
    }),
    Field::optional("reservation_ttl", Shape::Duration, "How long a reservation holds its slot waiting for the origin, e.g. \"30s\" (default: 2 x timeout + upload_timeout + 100 s).", |d, i| d.given.reservation_ttl_ms = i.duration("\"30s\"").map(NonZeroU64::get)),
    Field::optional("upload_buffer", Shape::Integer(0, MAX_UPLOAD_BUFFER as u64), "Bytes of a body received before the reservation (default 262144); a larger body streams under upload_timeout.", |d, i| {
        d.given.upload_buffer = i.number(0..=u64::from(MAX_UPLOAD_BUFFER), "number of bytes");
    }),
    Field::optional("upload_timeout", Shape::Duration, "How long a two-phase rule waits for a whole request body, e.g. \"10s\" (the default; at most 10m).", |d, i| {
        if let Some(ms) = i.duration("\"10s\"") {
            match u32::try_from(ms.get()) {
                Ok(ms) if ms <= MAX_UPLOAD_TIMEOUT_MS => d.given.upload_timeout_ms = Some(ms),
                _ => i.report("must be at most 10m"),
            }
        }
    }),
];

/// `counting = { mode, ... }`, read into the rule's own draft.
fn read_counting(draft: &mut RuleDraft, input: &mut Input<'_>) {
    let Some(table) = input.value.as_object() else {
        return input.report("must be a table { mode = \"request\" } or { mode = \"response\", statuses = [401, 403] }");
    };
    read_table(table, COUNTING_FIELDS, draft, input.errors, &format!("{}.", input.field));
}

fn counting_infos() -> Vec<FieldInfo> {
    infos(COUNTING_FIELDS)
}

/// `response = { status, content_type, body }` while it is read.
#[derive(Default)]
pub(super) struct ResponseDraft {
    pub(super) status: Option<u16>,
    pub(super) content_type: Option<String>,
    pub(super) body: Option<String>,
}

/// The fields of `response`.
pub(super) const RESPONSE_FIELDS: &[Field<ResponseDraft>] = &[
    Field::optional("status", Shape::OneOf(&response::STATUSES), "The status of a block: 429 (the default) or 503.", |d, i| {
        match i.value.as_u64().and_then(|s| u16::try_from(s).ok()).filter(|s| response::STATUSES.contains(s)) {
            Some(status) => d.status = Some(status),
            None => i.report("must be 429 or 503 (both carry Retry-After)"),
        }
    }),
    Field::optional("content_type", Shape::Text("/"), "The body's media type (default \"text/html; charset=utf-8\"); needs body.", |d, i| {
        let valid = |t: &str| t.contains('/') && !t.is_empty() && t.bytes().all(|b| (b' '..=b'~').contains(&b));
        d.content_type = i.text(valid, "must be a media type such as \"text/html; charset=utf-8\"");
    }),
    Field::optional("body", Shape::Text(""), "The body served to clients that do not ask for JSON, and to every client when content_type is JSON (at most 64 KiB); {retry_after} and {rule} are replaced.", |d, i| {
        d.body = i.text(|b| b.len() <= response::MAX_BODY_BYTES, "must be text of at most 64 KiB, with {retry_after} and {rule} as placeholders");
    }),
];

/// A rule's own block response, its body prepared once here.
pub(super) fn read_response(input: &mut Input<'_>) -> Option<CustomResponse> {
    let Some(table) = input.value.as_object() else {
        return input.fail("must be a table { status = 429, content_type = \"text/html; charset=utf-8\", body = \"... {retry_after} ... {rule} ...\" }");
    };
    let mut draft = ResponseDraft::default();
    if !input.read_fields(table, RESPONSE_FIELDS, &mut draft) {
        return None;
    }
    if draft.content_type.is_some() && draft.body.is_none() {
        return input.fail("content_type without a body: give the body too");
    }
    match CustomResponse::new(draft.status.unwrap_or(429), draft.content_type, draft.body.as_deref()) {
        Ok(response) => Some(response),
        Err(message) => input.fail(message),
    }
}

/// Reads one rule; `index` names it in errors when it has no name. A rule
/// in the older spelling is respelled first ([`spelling::plan`]): each old
/// field is one warning, or one error where its new spelling is given too.
pub(super) fn parse_rule(index: usize, raw: &Value, prices: &[(String, PriceTable)]) -> Result<(Rule, Vec<ConfigWarning>), Vec<ConfigError>> {
    let label = match raw.get("name").and_then(Value::as_str) {
        Some(name) => name.to_string(),
        None => format!("rules[{index}]"),
    };
    let mut errors = Errors { rule: Some(label.clone()), list: Vec::new() };
    let Some(given) = raw.as_object() else {
        errors.push("", "must be a table");
        return Err(errors.list);
    };
    let (steps, notes) = spelling::plan(given);
    let mut table = given.clone();
    spelling::apply(&mut table, &steps);
    let mut warnings = Vec::new();
    for note in notes {
        if note.refused {
            table.remove(note.field);
            errors.push(note.field, note.message);
        } else {
            warnings.push(ConfigWarning { rule: label.clone(), field: note.field, message: note.message });
        }
    }
    let mut draft = RuleDraft::new();
    draft.given.pricing = crate::config::price_fields::Pricing::of(&table, prices);
    read_table(&table, RULE_FIELDS, &mut draft, &mut errors, "");
    let spec = draft.finish(&mut errors);
    if errors.list.is_empty() {
        match Rule::compile(spec) {
            Ok(rule) => return Ok((rule, warnings)),
            Err(e) => errors.push(e.field, e.message),
        }
    }
    Err(errors.list)
}

/// The `rules` list: every rule, each read on its own, and the warnings of
/// the older spelling ([`spelling::OLD_SPELLING`]) they use.
/// `prices`: the top-level tables rules may name.
pub(super) fn read_rules(input: &mut Input<'_>, prices: &[(String, PriceTable)]) -> Option<(Vec<Rule>, Vec<ConfigWarning>)> {
    let Some(list) = input.value.as_array() else {
        return input.fail("must be a list of tables");
    };
    let (mut rules, mut warnings) = (Vec::new(), Vec::new());
    for (index, raw) in list.iter().enumerate() {
        match parse_rule(index, raw, prices) {
            Ok((rule, mut respelled)) => {
                rules.push(rule);
                warnings.append(&mut respelled);
            }
            Err(mut errors) => input.errors.list.append(&mut errors),
        }
    }
    Some((rules, warnings))
}

/// The fields of `trusted_device`, with their defaults.
pub(super) const DEVICE_FIELDS: &[Field<TrustedDevice>] = &[
    Field::required("secret", "missing: the name of the Workers secret that signs the cookies, such as \"TOLLGATE_DEVICE_KEY\"", SECRET_NAME, "The Workers secret that signs the cookies, e.g. \"TOLLGATE_DEVICE_KEY\".", |d, i| {
        if let Some(secret) = i.text(valid_secret_name, "must be a Workers secret name such as \"TOLLGATE_DEVICE_KEY\"") {
            d.secret = secret;
        }
    }),
    Field::optional("cookie", Shape::Text("^[A-Za-z0-9_-]{1,64}$"), "The cookie's name (default \"tollgate_device\").", |d, i| {
        if let Some(cookie) = i.text(valid_cookie_name, "must be a cookie name (letters, digits, `_`, `-`)") {
            d.cookie = cookie;
        }
    }),
    Field::optional("ttl", Shape::Duration, "How long a cookie is good for (default \"30d\").", |d, i| {
        if let Some(ms) = i.duration("\"30d\"") {
            d.ttl_s = ms.get().div_ceil(1000);
        }
    }),
];

/// `trusted_device = { secret = "TOLLGATE_DEVICE_KEY", cookie, ttl }`.
pub(super) fn read_trusted_device(input: &mut Input<'_>) -> Option<TrustedDevice> {
    let Some(table) = input.value.as_object() else {
        return input.fail("must be a table { secret = \"TOLLGATE_DEVICE_KEY\", cookie = \"tollgate_device\", ttl = \"30d\" }");
    };
    let mut device = TrustedDevice {
        secret: String::new(),
        cookie: DEFAULT_DEVICE_COOKIE.to_string(),
        ttl_s: DEFAULT_DEVICE_TTL_S,
    };
    input.read_fields(table, DEVICE_FIELDS, &mut device).then_some(device)
}

/// The schema's view of [`RULE_FIELDS`].
pub(super) fn rule_infos() -> Vec<FieldInfo> {
    infos(RULE_FIELDS)
}

fn limit_infos() -> Vec<FieldInfo> {
    infos(LIMIT_FIELDS)
}

fn device_infos() -> Vec<FieldInfo> {
    infos(DEVICE_FIELDS)
}

fn response_infos() -> Vec<FieldInfo> {
    infos(RESPONSE_FIELDS)
}
