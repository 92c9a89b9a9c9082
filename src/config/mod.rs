//! The `TOLLGATE` config var, parsed once per isolate into validated types.
//!
//! Parse, don't validate: a [`Config`] can only hold non-zero limits, parsed
//! windows and compiled URLPatterns. Every [`ConfigError`] names the rule and
//! the field it is about, and parsing reports all errors at once.
//!
//! The config lives in `wrangler.toml` as a structured var, so each wrangler
//! environment can override it (`[env.staging.vars.TOLLGATE]`):
//!
//! ```toml
//! [vars.TOLLGATE]
//! ipv6_prefix = 64
//!
//! [[vars.TOLLGATE.rules]]
//! name = "heavy-example"
//! path = "/api/example"          # URLPattern pathname, on the canonical path
//! query = { mode = "heavy" }     # "v" equals, ["a", "b"] any of, true present
//! key = ["ip"]
//! limits = [{ requests = 10, window = "60s" }]
//! ```

pub(crate) mod headers;
pub mod lockout;
pub mod overrides;
pub mod policy;
pub mod response;
pub mod rules;
pub mod upstream;

use crate::count::duration::parse_duration_ms;
use crate::request::exempt::{Bots, Exemptions, IpRange, SecretHeader};
use crate::config::overrides::{Override, Overrides};
use crate::config::response::CustomResponse;
use crate::request::canon::{Source, Sources};
use crate::request::key::KeyPart;
use crate::config::policy::{
    Action, Counting, FailPolicy, MetricsLevel, MissingKey, OnSuccess, SuccessAction, TrustedDevice, UploadLimits,
    DEFAULT_DEVICE_COOKIE, DEFAULT_DEVICE_TTL_S, DEFAULT_SUCCESS_STATUSES, MAX_UPLOAD_BUFFER, MAX_UPLOAD_TIMEOUT_MS,
};
use crate::count::lease::{LeaseMode, LeaseSettings, DEFAULT_LEASE_MAX, DEFAULT_LEASE_TTL_MS, OFF_ON_SUCCESS, OFF_TWO_PHASE};
use crate::count::protocol::{Algorithm, MAX_HOLD_MS, MAX_LEASE_TTL_MS, MAX_LEASE_UNITS, MAX_LIMITS};
use crate::config::rules::{Condition, Rule, RuleSpec, Target, Test};
use crate::count::window::Limit;
use serde_json::{Map, Value};
use std::fmt;
use std::num::{NonZeroU32, NonZeroU64};
use std::ops::RangeInclusive;

/// Default IPv6 grouping: one /64 is what a single subscriber is usually
/// given, so keying on the full address would let a client rotate through
/// 2^64 keys.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// Default wait for the counter before the rule's fail policy applies.
pub const DEFAULT_TIMEOUT_MS: u32 = 2_000;

/// The longest `timeout` a rule may set.
const MAX_TIMEOUT_MS: u32 = 30_000;

/// How long a reservation waits for the origin by default, beyond the
/// reserve and commit calls' own `timeout`s: 100 s, after which Cloudflare
/// gives up on a proxied origin (HTTP 524). A reservation held longer only
/// keeps a lost request's slot taken (towards blocking); one held shorter
/// than a slow origin frees the slot before the answer commits (towards
/// admitting). So the default rule `reservation_ttl` is `2 × timeout` plus
/// this; set it lower for a short limit window whose origin is fast.
pub const ORIGIN_ALLOWANCE_MS: u64 = 100_000;

/// Format suffixes folded into the bare path unless a rule lists its own
/// (`/api/example.json` is `/api/example`, as Rails and Express routers do).
pub const DEFAULT_SUFFIXES: &[&str] = &["json", "xml", "html", "htm", "txt", "csv", "yaml", "yml"];

/// The largest `requests` per window the sliding log accepts. The log keeps
/// one entry per hit, read and rewritten on every request: 10,000 entries is
/// ~50-140 KB per call. Above this, use `algorithm = "gcra"` (O(1) state).
pub const MAX_SLIDING_LOG_REQUESTS: u32 = 10_000;

/// Default prefix of the admin API (active only with a token set).
pub const DEFAULT_ADMIN_PREFIX: &str = "/.tollgate";

/// Default cap on the bytes read to find a `body:` key (16 KiB): login and
/// signup forms are far smaller; anything larger is not buffered.
pub const DEFAULT_BODY_LIMIT: u32 = 16 * 1024;

/// The whole validated config.
#[derive(Debug)]
pub struct Config {
    pub ipv6_prefix: u8,
    pub rules: Vec<Rule>,
    /// Path prefix of the admin API, e.g. `/.tollgate`.
    pub admin_prefix: String,
    /// Most body bytes read for `body:` keys.
    pub body_limit: u32,
    /// Most (rule, key) entries the isolate's blocked-until cache holds.
    pub blocked_cache_capacity: usize,
    /// The built-in rule counting failed admin authentications per client
    /// ([`lockout::LOCKOUT_RULE`]); not among `rules`, never matched
    /// against a request.
    pub admin_lockout: Rule,
    /// What the Worker does once the config turns out invalid at runtime
    /// (vars edited in the dashboard): see [`on_invalid_config`].
    pub on_invalid_config: FailPolicy,
    /// What the rules ask of requests, computed once from `rules`.
    pub facts: ConfigFacts,
    /// Requests no rule counts or limits (`exempt` at the top level).
    pub exempt: Exemptions,
    /// Where allowed requests go: the origin, or a service binding.
    pub upstream: crate::config::upstream::Upstream,
}

/// Facts about the rules that decide what the plan reads of a request,
/// computed once when the config is parsed: a request that no rule could
/// concern costs no pass over the rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigFacts {
    /// Some rule has query conditions: a form body's parameters can change
    /// a match, so the body is read.
    pub any_query_conditions: bool,
    /// Some rule lists `methods`: overrides (headers, `_method` in the
    /// query or a form body) can change a match, so they are read.
    pub any_method_restriction: bool,
    /// Every method some rule lists, each once, in config order: what a
    /// POST whose form body tollgate cannot read may be overridden to.
    pub listed_methods: Vec<String>,
    /// Some rule with query conditions reads cookies (`query_sources`).
    pub any_cookie_source: bool,
    /// Some key or exemption reads `request.cf` (a `country` or `asn` key
    /// part, an `asns` or `verified_bots` exemption, top-level or per
    /// rule): otherwise the Worker never reads it.
    pub reads_cf: bool,
    /// Some rule has a `trusted_device`, whose cookies expire: the plan
    /// reads the clock, so it is never replayed ([`crate::pipeline::memo`]).
    pub reads_clock: bool,
}

impl ConfigFacts {
    /// The facts of `rules` under the top-level exemptions `exempt`.
    pub fn of(rules: &[Rule], exempt: &Exemptions) -> ConfigFacts {
        let mut facts = ConfigFacts { reads_cf: exempt.reads_cf(), ..ConfigFacts::default() };
        for rule in rules {
            for method in &rule.methods {
                if !facts.listed_methods.contains(method) {
                    facts.listed_methods.push(method.clone());
                }
            }
            if rule.has_query_conditions() {
                facts.any_query_conditions = true;
                facts.any_cookie_source |= rule.query_sources.contains(Source::Cookie);
            }
            facts.reads_cf |= rule.key.iter().any(|part| matches!(part, KeyPart::Country | KeyPart::Asn))
                || rule.exempt.reads_cf();
            facts.reads_clock |= rule.trusted_device.is_some();
        }
        facts.any_method_restriction = !facts.listed_methods.is_empty();
        facts
    }

    /// Whether a form body's parameters can change a match: the body of a
    /// request that may have one is then read before matching.
    pub fn reads_body_parameters(&self) -> bool {
        self.any_query_conditions || self.any_method_restriction
    }
}

/// What the Worker does with requests when its config is invalid: read
/// from the top-level `on_invalid_config` of a config that fails to parse
/// (`"allow"`: forward everything unlimited; `"deny"`, the default and
/// the reading of anything else: answer 503). The trade-off is an outage
/// against no limiting at all; `deny` is the default because a limiter that
/// silently stops limiting is the failure nobody notices.
pub fn on_invalid_config(value: &Value) -> FailPolicy {
    match value.get("on_invalid_config").and_then(Value::as_str) {
        Some("allow") => FailPolicy::Allow,
        _ => FailPolicy::Deny,
    }
}

/// One problem found in the config, located by rule and field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The rule's name (or `rules[i]` when it has none); `None` for
    /// top-level fields.
    pub rule: Option<String>,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.rule {
            Some(rule) => write!(f, "rule `{}`, field `{}`: {}", rule, self.field, self.message),
            None => write!(f, "field `{}`: {}", self.field, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Something in a valid config that works as written but is probably not
/// what was meant; `tollgate check` prints it (the Worker runs the config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    pub rule: String,
    pub field: &'static str,
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rule `{}`, field `{}`: {}", self.rule, self.field, self.message)
    }
}

impl Config {
    /// Parses the config from its JSON form (what `env.TOLLGATE` holds, or a
    /// TOML table converted to JSON). Returns every error found.
    pub fn from_json(value: &Value) -> Result<Config, Vec<ConfigError>> {
        let Some(table) = value.as_object() else {
            return Err(vec![top_error("TOLLGATE", "must be a table with a `rules` list")]);
        };
        let admin_lockout = admin_lockout_rule().map_err(|e| vec![top_error("(built-in admin lockout)", &e.to_string())])?;
        let mut config = Config {
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
            rules: Vec::new(),
            admin_prefix: DEFAULT_ADMIN_PREFIX.to_string(),
            body_limit: DEFAULT_BODY_LIMIT,
            blocked_cache_capacity: crate::count::blocked::DEFAULT_CAPACITY,
            on_invalid_config: FailPolicy::Deny,
            admin_lockout,
            facts: ConfigFacts::default(),
            exempt: Exemptions::default(),
            upstream: crate::config::upstream::Upstream::Origin,
        };
        let mut errors = Errors { rule: None, list: Vec::new() };
        read_table(table, TOP_FIELDS, &mut config, &mut errors, "");
        config.facts = ConfigFacts::of(&config.rules, &config.exempt);
        for rule in config.rules.iter_mut().filter(|r| config.ipv6_prefix != DEFAULT_IPV6_PREFIX && !r.overrides.is_empty()) {
            let (parts, case_insensitive) = (rule.spec.key.clone(), rule.spec.case_insensitive);
            for e in rule.spec.overrides.resolve(&parts, case_insensitive, config.ipv6_prefix) {
                let field = if e.value.is_empty() { "overrides".to_string() } else { format!("overrides.{}", e.value) };
                errors.list.push(ConfigError { rule: Some(rule.name.clone()), field, message: e.message });
            }
        }
        let mut seen = std::collections::HashSet::new();
        for rule in &config.rules {
            if !seen.insert(rule.name.as_str()) {
                errors.list.push(ConfigError {
                    rule: Some(rule.name.clone()),
                    field: "name".into(),
                    message: "another rule has the same name; names key the counters".into(),
                });
            }
        }
        errors.or_ok(config)
    }

    /// The rules that apply to `request`, in config order, with their match.
    /// Allocates nothing when no rule matches (but see [`Rule::matches`]).
    pub fn matching<'c>(&'c self, request: &crate::config::rules::RequestView<'_>) -> Vec<(&'c Rule, crate::config::rules::Match)> {
        self.rules
            .iter()
            .filter_map(|rule| rule.matches(request).map(|m| (rule, m)))
            .collect()
    }

    /// What `tollgate check` should point out in this valid config:
    /// combinations that work as written but are likely not what the
    /// operator means (route coverage is [`crate::tools::coverage::route_warnings`]).
    pub fn warnings(&self) -> Vec<ConfigWarning> {
        let mut out = Vec::new();
        for rule in &self.rules {
            out.extend(custom_methods(rule));
            out.extend(untyped_ids(rule));
            out.extend(shadow_fail_closed(rule));
            out.extend(forgeable_success(rule));
        }
        out
    }

    /// Parses the config from JSON text.
    pub fn from_json_str(text: &str) -> Result<Config, Vec<ConfigError>> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| vec![top_error("TOLLGATE", &format!("not valid JSON: {e}"))])?;
        Config::from_json(&value)
    }
}

fn top_error(field: &str, message: &str) -> ConfigError {
    ConfigError {
        rule: None,
        field: field.to_string(),
        message: message.to_string(),
    }
}

/// The problems found so far, all tagged with the rule being read.
struct Errors {
    /// The rule's name, or `rules[i]` when it has none; `None` at the top
    /// level.
    rule: Option<String>,
    list: Vec<ConfigError>,
}

impl Errors {
    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.list.push(ConfigError {
            rule: self.rule.clone(),
            field: field.into(),
            message: message.into(),
        });
    }

    /// `value` when nothing was found wrong, or every problem.
    fn or_ok<T>(self, value: T) -> Result<T, Vec<ConfigError>> {
        if self.list.is_empty() {
            Ok(value)
        } else {
            Err(self.list)
        }
    }
}

/// One field of a config table: its name, whether it must be present, and
/// how its value is read into the draft `D`, which starts out holding the
/// defaults. Each table's fields are listed once ([`TOP_FIELDS`],
/// [`RULE_FIELDS`], [`LIMIT_FIELDS`]): that list drives parsing and is the
/// set of names accepted.
struct Field<D> {
    name: &'static str,
    /// The error when the field is absent; `None` when it is optional.
    required: Option<&'static str>,
    /// Reads a present value; on an error it reports it and leaves the
    /// default.
    read: fn(&mut D, &mut Input<'_>),
}

impl<D> Field<D> {
    const fn optional(name: &'static str, read: fn(&mut D, &mut Input<'_>)) -> Field<D> {
        Field { name, required: None, read }
    }

    const fn required(name: &'static str, missing: &'static str, read: fn(&mut D, &mut Input<'_>)) -> Field<D> {
        Field { name, required: Some(missing), read }
    }
}

/// Reads `table` into `draft` by `fields`; `prefix` starts every field
/// name in errors (`limits[0].`). An unknown name, or a required field
/// absent, is an error; an optional field absent keeps the draft's default.
fn read_table<D>(table: &Map<String, Value>, fields: &[Field<D>], draft: &mut D, errors: &mut Errors, prefix: &str) {
    for (name, value) in table {
        let field = format!("{prefix}{name}");
        match fields.iter().find(|f| f.name == name) {
            Some(f) => (f.read)(draft, &mut Input { field: &field, value, errors }),
            None => errors.push(field, "unknown field"),
        }
    }
    for f in fields {
        if let (Some(missing), false) = (f.required, table.contains_key(f.name)) {
            errors.push(format!("{prefix}{}", f.name), missing);
        }
    }
}

/// The top level of the `TOLLGATE` var.
const TOP_FIELDS: &[Field<Config>] = &[
    Field::optional("ipv6_prefix", |c, i| {
        if let Some(prefix) = i.number(1..=128, "whole number") {
            c.ipv6_prefix = prefix;
        }
    }),
    Field::required("rules", "missing: list at least one rule", |c, i| {
        if let Some(rules) = read_rules(i) {
            c.rules = rules;
        }
    }),
    Field::optional("admin_prefix", |c, i| {
        let message = "must be a canonical path such as \"/.tollgate\" (no trailing slash)";
        if let Some(prefix) = i.text(valid_admin_prefix, message) {
            c.admin_prefix = prefix;
        }
    }),
    Field::optional("body_limit", |c, i| {
        if let Some(bytes) = i.number(1..=1_048_576, "number of bytes") {
            c.body_limit = bytes;
        }
    }),
    Field::optional("blocked_cache_capacity", |c, i| {
        if let Some(entries) = i.number(1..=1_000_000, "number of entries") {
            c.blocked_cache_capacity = entries;
        }
    }),
    Field::optional(crate::config::upstream::FIELD, |c, i| match crate::config::upstream::read(i.value) {
        Ok(upstream) => c.upstream = upstream,
        Err(message) => i.report(message),
    }),
    Field::optional("on_invalid_config", |c, i| {
        if let Some(policy) = i.choice(&[("deny", FailPolicy::Deny), ("allow", FailPolicy::Allow)]) {
            c.on_invalid_config = policy;
        }
    }),
    Field::optional("exempt", |c, i| c.exempt = read_exempt(i)),
];

/// A rule while its table is read: its spec with the defaults, and the
/// fields that only together say what to do when a key part is missing,
/// what a success does, and how long a reservation holds.
struct RuleDraft {
    spec: RuleSpec,
    on_missing_key: Option<OnMissingKey>,
    /// Present (its errors reported) even when some part was invalid, so
    /// that it is not also reported missing.
    fallback_key: Option<Vec<KeyPart>>,
    /// `clear_on_success`, the older spelling of `on_success = "clear"`.
    clear_on_success: Option<bool>,
    success_action: Option<SuccessAction>,
    success_statuses: Option<Vec<u16>>,
    identity_header: Option<String>,
    reservation_ttl_ms: Option<u64>,
    /// `upload_buffer` and `upload_timeout`, as given (for the check that
    /// they belong to a rule that counts statuses).
    upload_buffer: Option<u32>,
    upload_timeout_ms: Option<u32>,
    /// `lease`: auto (true) or off (false).
    lease_auto: Option<bool>,
    lease_ttl_ms: Option<u64>,
    lease_max: Option<u32>,
}

/// The names `on_missing_key` accepts; see [`MissingKey`].
#[derive(Debug, Clone, Copy)]
enum OnMissingKey {
    Reject,
    Skip,
    Fallback,
}

impl RuleDraft {
    fn new() -> RuleDraft {
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
            upload: UploadLimits::default(),
            // Built-in rules (the admin lockout) never lease; config rules
            // get theirs in `finish`.
            lease: LeaseMode::Off,
            exempt: Exemptions::default(),
            overrides: Overrides::default(),
            response: None,
            metrics: MetricsLevel::default(),
        };
        RuleDraft {
            spec,
            on_missing_key: None,
            fallback_key: None,
            clear_on_success: None,
            success_action: None,
            success_statuses: None,
            identity_header: None,
            reservation_ttl_ms: None,
            upload_buffer: None,
            upload_timeout_ms: None,
            lease_auto: None,
            lease_ttl_ms: None,
            lease_max: None,
        }
    }

    /// The spec, once the checks that span fields have passed.
    fn finish(self, errors: &mut Errors) -> RuleSpec {
        let mut spec = self.spec;
        spec.on_missing_key = missing_key(self.on_missing_key, self.fallback_key, errors);
        let action = success_action(self.clear_on_success, self.success_action, errors);
        spec.on_success = on_success(&spec, action, self.success_statuses, self.identity_header, errors);
        spec.upload = upload_limits(&spec, self.upload_buffer, self.upload_timeout_ms, errors);
        spec.reservation_ttl_ms = reservation_ttl(&spec, self.reservation_ttl_ms, errors);
        check_on_success(&spec, self.clear_on_success.is_some(), errors);
        check_trusted_device(&spec, errors);
        check_cost(&spec, errors);
        check_algorithm(&spec, errors);
        spec.lease = lease_mode(&spec, self.lease_auto, self.lease_ttl_ms, self.lease_max, errors);
        check_overrides(&mut spec, errors);
        if spec.query_sources != Sources::DEFAULT && !spec.conditions.iter().any(|c| c.target == Target::Query) {
            errors.push("query_sources", "only used with query conditions (set query)");
        }
        spec
    }
}

/// Every field a rule accepts, and how it is read.
const RULE_FIELDS: &[Field<RuleDraft>] = &[
    Field::required("name", "missing", |d, i| {
        if let Some(name) = i.text(valid_name, "use 1-64 characters from a-z, A-Z, 0-9, `-`, `_`, `.`") {
            d.spec.name = name;
        }
    }),
    Field::required("path", "missing", |d, i| {
        if let Some(path) = i.text(|p| p.starts_with('/'), "must be a URLPattern pathname starting with `/`") {
            d.spec.path = path;
        }
    }),
    Field::optional("host", |d, i| {
        if let Some(host) = i.text(|h| !h.is_empty(), "must be a non-empty URLPattern hostname") {
            d.spec.host = Some(host.to_ascii_lowercase());
        }
    }),
    Field::optional("methods", |d, i| {
        let valid = |list: &[String]| !list.is_empty() && list.iter().all(|m| valid_method(m));
        let message = "must be a non-empty list of HTTP methods: standard ones in any case, custom ones in upper case as they are sent";
        if let Some(methods) = i.strings(valid, message) {
            d.spec.methods = methods.iter().map(|m| m.to_ascii_uppercase()).collect();
        }
    }),
    Field::optional("query", |d, i| {
        if let Some(conditions) = i.conditions(Target::Query, "must be a table of key = condition") {
            d.spec.conditions.extend(conditions);
        }
    }),
    Field::optional("query_sources", |d, i| {
        if let Some(sources) = i.sources() {
            d.spec.query_sources = sources;
        }
    }),
    Field::optional("header", |d, i| {
        if let Some(conditions) = i.conditions(Target::Header, "must be a table of header-name = condition") {
            d.spec.conditions.extend(conditions);
        }
    }),
    Field::optional("case_insensitive", |d, i| {
        if let Some(on) = i.flag() {
            d.spec.case_insensitive = on;
        }
    }),
    Field::optional("suffixes", |d, i| {
        let valid = |list: &[String]| list.iter().all(|s| valid_suffix(s));
        if let Some(suffixes) = i.strings(valid, "must be a list of extensions such as \"json\"") {
            d.spec.suffixes = suffixes.iter().map(|s| s.trim_start_matches('.').to_ascii_lowercase()).collect();
        }
    }),
    Field::optional("key", |d, i| d.spec.key = i.key_parts()),
    Field::optional("on_missing_key", |d, i| {
        let names = [("reject", OnMissingKey::Reject), ("skip", OnMissingKey::Skip), ("fallback", OnMissingKey::Fallback)];
        d.on_missing_key = i.choice(&names);
    }),
    Field::optional("fallback_key", |d, i| d.fallback_key = Some(i.key_parts())),
    Field::optional("count_statuses", |d, i| {
        if let Some(statuses) = i.statuses() {
            d.spec.counting = Counting::Statuses(statuses);
        }
    }),
    Field::optional("clear_on_success", |d, i| d.clear_on_success = i.flag()),
    Field::optional("on_success", |d, i| {
        d.success_action = i.choice(&[("clear", SuccessAction::Clear), ("decrement", SuccessAction::Decrement)]);
    }),
    Field::optional("success_statuses", |d, i| d.success_statuses = i.statuses()),
    Field::optional("success_identity_header", |d, i| {
        let name = i.text(valid_header_name, "must be a response header name such as \"x-authenticated-user\"");
        d.identity_header = name.map(|n| n.to_ascii_lowercase());
    }),
    Field::optional("reservation_ttl", |d, i| d.reservation_ttl_ms = i.duration("\"30s\"").map(NonZeroU64::get)),
    Field::optional("upload_buffer", |d, i| {
        d.upload_buffer = i.number(0..=u64::from(MAX_UPLOAD_BUFFER), "number of bytes");
    }),
    Field::optional("upload_timeout", |d, i| {
        if let Some(ms) = i.duration("\"10s\"") {
            match u32::try_from(ms.get()) {
                Ok(ms) if ms <= MAX_UPLOAD_TIMEOUT_MS => d.upload_timeout_ms = Some(ms),
                _ => i.report("must be at most 10m"),
            }
        }
    }),
    Field::optional("trusted_device", |d, i| d.spec.trusted_device = read_trusted_device(i)),
    Field::optional("lease", |d, i| d.lease_auto = i.choice(&[("auto", true), ("off", false)])),
    Field::optional("lease_ttl", |d, i| {
        if let Some(ms) = i.duration("\"1s\"") {
            if ms.get() <= MAX_LEASE_TTL_MS {
                d.lease_ttl_ms = Some(ms.get());
            } else {
                i.report("must be at most 60s");
            }
        }
    }),
    Field::optional("lease_max", |d, i| {
        if let Some(max) = i.number(1..=u64::from(MAX_LEASE_UNITS), "whole number") {
            d.lease_max = Some(max);
        }
    }),
    Field::optional("ratelimit_headers", |d, i| {
        if let Some(on) = i.flag() {
            d.spec.ratelimit_headers = on;
        }
    }),
    Field::optional("algorithm", |d, i| {
        if let Some(algorithm) = i.choice(&[("sliding_log", Algorithm::SlidingLog), ("gcra", Algorithm::Gcra)]) {
            d.spec.algorithm = algorithm;
        }
    }),
    Field::required("limits", "missing", |d, i| {
        if let Some(limits) = read_limits(i) {
            d.spec.limits = limits;
        }
    }),
    Field::optional("cost", |d, i| {
        if let Some(cost) = i.number(1..=u64::from(u32::MAX), "whole number") {
            d.spec.cost = cost;
        }
    }),
    Field::optional("action", |d, i| {
        if let Some(action) = i.choice(&[("block", Action::Block), ("log", Action::Log)]) {
            d.spec.action = action;
        }
    }),
    Field::optional("on_error", |d, i| {
        if let Some(policy) = i.choice(&[("allow", FailPolicy::Allow), ("deny", FailPolicy::Deny)]) {
            d.spec.on_error = policy;
        }
    }),
    Field::optional("exempt", |d, i| d.spec.exempt = read_exempt(i)),
    Field::optional("overrides", |d, i| d.spec.overrides = read_overrides(i)),
    Field::optional("response", |d, i| d.spec.response = read_response(i)),
    Field::optional("metrics", |d, i| {
        let names = [("off", MetricsLevel::Off), ("limited", MetricsLevel::Limited), ("all", MetricsLevel::All)];
        if let Some(level) = i.choice(&names) {
            d.spec.metrics = level;
        }
    }),
    Field::optional("timeout", |d, i| {
        if let Some(ms) = i.duration("\"2s\"") {
            match u32::try_from(ms.get()) {
                Ok(ms) if ms <= MAX_TIMEOUT_MS => d.spec.timeout_ms = ms,
                _ => i.report("must be at most 30s"),
            }
        }
    }),
];

/// One `limits` entry while its table is read.
#[derive(Default)]
struct LimitDraft {
    requests: Option<NonZeroU32>,
    window_ms: Option<NonZeroU64>,
}

/// The fields of one `limits` entry.
const LIMIT_FIELDS: &[Field<LimitDraft>] = &[
    Field::required("requests", "missing", |d, i| {
        d.requests = i.number(1..=u64::from(u32::MAX), "whole number").and_then(NonZeroU32::new);
    }),
    Field::required("window", "missing", |d, i| {
        d.window_ms = i.duration("\"60s\", \"1m\", \"1h\" or \"1d\"");
    }),
];

/// `overrides = { "42" = [{ requests = 1000, window = "1d" }] }`: each
/// key value's own limits, read as `limits` is. Keys are resolved once the
/// whole config is read ([`Overrides::resolve`]: the IPv6 prefix is a
/// top-level field).
fn read_overrides(input: &mut Input<'_>) -> Overrides {
    let Some(table) = input.value.as_object() else {
        input.report("must be a table of key value = limits, such as { \"42\" = [{ requests = 1000, window = \"1d\" }] }");
        return Overrides::default();
    };
    let mut entries = Vec::new();
    for (value, limits) in table {
        let field = format!("{}.{value}", input.field);
        if let Some(limits) = read_limits(&mut Input { field: &field, value: limits, errors: input.errors }) {
            entries.push(Override { value: value.clone(), key: None, limits });
        }
    }
    Overrides::new(entries)
}

/// An override's limits obey the rule's: cost within the smallest, the
/// sliding log's size.
fn check_overrides(spec: &mut RuleSpec, errors: &mut Errors) {
    // Resolved here so that their errors come with the rule's others; again
    // once the whole config is read, under its `ipv6_prefix`.
    let key = spec.key.clone();
    for e in spec.overrides.resolve(&key, spec.case_insensitive, DEFAULT_IPV6_PREFIX) {
        errors.push(if e.value.is_empty() { "overrides".to_string() } else { format!("overrides.{}", e.value) }, e.message);
    }
    for entry in spec.overrides.entries() {
        let field = format!("overrides.{}", entry.value);
        for message in [cost_error(&entry.limits, spec.cost), algorithm_error(&entry.limits, spec.algorithm)].into_iter().flatten() {
            errors.push(field.clone(), message);
        }
    }
}

/// `response = { status, content_type, body }` while it is read.
#[derive(Default)]
struct ResponseDraft {
    status: Option<u16>,
    content_type: Option<String>,
    body: Option<String>,
}

/// The fields of `response`.
const RESPONSE_FIELDS: &[Field<ResponseDraft>] = &[
    Field::optional("status", |d, i| {
        match i.value.as_u64().and_then(|s| u16::try_from(s).ok()).filter(|s| response::STATUSES.contains(s)) {
            Some(status) => d.status = Some(status),
            None => i.report("must be 429 or 503 (both carry Retry-After)"),
        }
    }),
    Field::optional("content_type", |d, i| {
        let valid = |t: &str| t.contains('/') && !t.is_empty() && t.bytes().all(|b| (b' '..=b'~').contains(&b));
        d.content_type = i.text(valid, "must be a media type such as \"text/html; charset=utf-8\"");
    }),
    Field::optional("body", |d, i| {
        d.body = i.text(|b| b.len() <= response::MAX_BODY_BYTES, "must be text of at most 64 KiB, with {retry_after} and {rule} as placeholders");
    }),
];

/// A rule's own block response, its body prepared once here.
fn read_response(input: &mut Input<'_>) -> Option<CustomResponse> {
    let Some(table) = input.value.as_object() else {
        return input.fail("must be a table { status = 429, content_type = \"text/html; charset=utf-8\", body = \"... {retry_after} ... {rule} ...\" }");
    };
    let mut draft = ResponseDraft::default();
    let before = input.errors.list.len();
    read_table(table, RESPONSE_FIELDS, &mut draft, input.errors, &format!("{}.", input.field));
    if input.errors.list.len() != before {
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

/// The fields of an `exempt` table.
const EXEMPT_FIELDS: &[Field<Exemptions>] = &[
    Field::optional("ips", |e, i| {
        let Some(list) = i.strings(|_| true, "must be a list of CIDR ranges such as [\"10.0.0.0/8\", \"2001:db8::/32\"]") else {
            return;
        };
        for (n, text) in list.iter().enumerate() {
            match IpRange::parse(text.trim()) {
                Ok(range) => e.ips.push(range),
                Err(message) => i.errors.push(format!("{}[{n}]", i.field), message),
            }
        }
    }),
    Field::optional("asns", |e, i| {
        let asn = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|n| *n > 0);
        match i.value.as_array().and_then(|list| list.iter().map(asn).collect::<Option<Vec<u32>>>()) {
            Some(asns) => e.asns = asns,
            None => i.report("must be a list of AS numbers such as [13335]"),
        }
    }),
    Field::optional("verified_bots", |e, i| {
        e.bots = match i.value {
            Value::Bool(true) => Bots::Any,
            Value::Bool(false) => Bots::None,
            _ => match i.strings(|l| !l.is_empty() && l.iter().all(|c| !c.trim().is_empty()), VERIFIED_BOTS) {
                Some(list) => Bots::Categories(list.iter().map(|c| c.trim().to_string()).collect()),
                None => Bots::None,
            },
        };
    }),
    Field::optional("header", |e, i| e.header = read_secret_header(i)),
];

const VERIFIED_BOTS: &str =
    "must be true (every verified bot) or a list of verified bot categories such as [\"Search Engine Crawler\", \"Monitoring & Analytics\"]";

/// `exempt = { ips, asns, verified_bots, header }`, at the top level or in
/// a rule.
fn read_exempt(input: &mut Input<'_>) -> Exemptions {
    let mut exemptions = Exemptions::default();
    match input.value.as_object() {
        Some(table) => read_table(table, EXEMPT_FIELDS, &mut exemptions, input.errors, &format!("{}.", input.field)),
        None => input.report("must be a table { ips = [...], asns = [...], verified_bots = true, header = { name, secret } }"),
    }
    exemptions
}

/// The fields of `exempt.header`.
const SECRET_HEADER_FIELDS: &[Field<SecretHeader>] = &[
    Field::required("name", "missing", |h, i| {
        if let Some(name) = i.text(valid_header_name, "must be a request header name such as \"x-tollgate-exempt\"") {
            h.name = name.to_ascii_lowercase();
        }
    }),
    Field::required("secret", SPOOFABLE_HEADER, |h, i| {
        if let Some(secret) = i.text(valid_secret_name, "must be a Workers secret name such as \"TOLLGATE_EXEMPT_KEY\"") {
            h.secret = secret;
        }
    }),
];

/// Why `tollgate check` refuses a header exemption without a secret.
const SPOOFABLE_HEADER: &str = "missing: any client can send any header, so a header exempts only when its value equals a Workers secret; name it (secret = \"TOLLGATE_EXEMPT_KEY\", then `wrangler secret put TOLLGATE_EXEMPT_KEY`)";

/// `header = { name = "x-tollgate-exempt", secret = "TOLLGATE_EXEMPT_KEY" }`.
fn read_secret_header(input: &mut Input<'_>) -> Option<SecretHeader> {
    let Some(table) = input.value.as_object() else {
        return input.fail(format!("must be a table {{ name, secret }}; a bare header name is spoofable ({SPOOFABLE_HEADER})"));
    };
    let mut header = SecretHeader { name: String::new(), secret: String::new() };
    let before = input.errors.list.len();
    read_table(table, SECRET_HEADER_FIELDS, &mut header, input.errors, &format!("{}.", input.field));
    (input.errors.list.len() == before).then_some(header)
}

/// The built-in admin lockout rule: a config rule's defaults, with what
/// [`lockout::lockout_spec`] sets.
fn admin_lockout_rule() -> Result<Rule, crate::config::rules::PatternError> {
    let mut spec = RuleDraft::new().spec;
    lockout::lockout_spec(&mut spec);
    Rule::compile(spec)
}

/// Reads one rule; `index` names it in errors when it has no name.
fn parse_rule(index: usize, raw: &Value) -> Result<Rule, Vec<ConfigError>> {
    let label = match raw.get("name").and_then(Value::as_str) {
        Some(name) => name.to_string(),
        None => format!("rules[{index}]"),
    };
    let mut errors = Errors { rule: Some(label), list: Vec::new() };
    let Some(table) = raw.as_object() else {
        errors.push("", "must be a table");
        return Err(errors.list);
    };
    let mut draft = RuleDraft::new();
    read_table(table, RULE_FIELDS, &mut draft, &mut errors, "");
    let spec = draft.finish(&mut errors);
    if errors.list.is_empty() {
        match Rule::compile(spec) {
            Ok(rule) => return Ok(rule),
            Err(e) => errors.push(e.field, e.message),
        }
    }
    Err(errors.list)
}

/// The `rules` list: every rule, each read on its own.
fn read_rules(input: &mut Input<'_>) -> Option<Vec<Rule>> {
    let Some(list) = input.value.as_array() else {
        return input.fail("must be a list of tables");
    };
    let mut rules = Vec::new();
    for (index, raw) in list.iter().enumerate() {
        match parse_rule(index, raw) {
            Ok(rule) => rules.push(rule),
            Err(mut errors) => input.errors.list.append(&mut errors),
        }
    }
    Some(rules)
}

/// A rule's `limits`: 1 to [`MAX_LIMITS`] windows.
fn read_limits(input: &mut Input<'_>) -> Option<Vec<Limit>> {
    let list = match input.value.as_array() {
        Some(list) if list.len() > MAX_LIMITS => {
            return input.fail(format!("at most {MAX_LIMITS} windows per rule ({} given)", list.len()));
        }
        Some(list) if !list.is_empty() => list,
        _ => return input.fail("must be a non-empty list of { requests, window }"),
    };
    let mut limits = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let field = format!("{}[{i}]", input.field);
        let Some(table) = item.as_object() else {
            input.errors.push(field, "must be a table { requests, window }");
            continue;
        };
        let mut draft = LimitDraft::default();
        read_table(table, LIMIT_FIELDS, &mut draft, input.errors, &format!("{field}."));
        if let (Some(requests), Some(window_ms)) = (draft.requests, draft.window_ms) {
            limits.push(Limit { requests, window_ms });
        }
    }
    Some(limits)
}

/// The fields of `trusted_device`, with their defaults.
const DEVICE_FIELDS: &[Field<TrustedDevice>] = &[
    Field::required("secret", "missing: the name of the Workers secret that signs the cookies, such as \"TOLLGATE_DEVICE_KEY\"", |d, i| {
        if let Some(secret) = i.text(valid_secret_name, "must be a Workers secret name such as \"TOLLGATE_DEVICE_KEY\"") {
            d.secret = secret;
        }
    }),
    Field::optional("cookie", |d, i| {
        if let Some(cookie) = i.text(valid_cookie_name, "must be a cookie name (letters, digits, `_`, `-`)") {
            d.cookie = cookie;
        }
    }),
    Field::optional("ttl", |d, i| {
        if let Some(ms) = i.duration("\"30d\"") {
            d.ttl_s = ms.get().div_ceil(1000);
        }
    }),
];

/// `trusted_device = { secret = "TOLLGATE_DEVICE_KEY", cookie, ttl }`.
fn read_trusted_device(input: &mut Input<'_>) -> Option<TrustedDevice> {
    let Some(table) = input.value.as_object() else {
        return input.fail("must be a table { secret = \"TOLLGATE_DEVICE_KEY\", cookie = \"tollgate_device\", ttl = \"30d\" }");
    };
    let mut device = TrustedDevice {
        secret: String::new(),
        cookie: DEFAULT_DEVICE_COOKIE.to_string(),
        ttl_s: DEFAULT_DEVICE_TTL_S,
    };
    let before = input.errors.list.len();
    read_table(table, DEVICE_FIELDS, &mut device, input.errors, &format!("{}.", input.field));
    (input.errors.list.len() == before).then_some(device)
}

/// A device cookie is handed out on a proven success and names an account:
/// the rule must settle successes and be keyed by the account alone.
fn check_trusted_device(spec: &RuleSpec, errors: &mut Errors) {
    if spec.trusted_device.is_none() {
        return;
    }
    if spec.on_success.is_none() {
        errors.push("trusted_device", "needs on_success: a device earns its cookie by a success that settles the count");
    }
    if let Some(part) = spec.key.iter().find(|p| p.identifies_client()) {
        errors.push(
            "trusted_device",
            format!("the key part `{part}` identifies the client; a device cookie is for a limit per account (e.g. key = [\"body:email\"])"),
        );
    }
}

fn valid_secret_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn valid_cookie_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// What to do when a key part is missing, from `on_missing_key` and
/// `fallback_key` together: a fallback key alone means "fallback".
fn missing_key(chosen: Option<OnMissingKey>, fallback: Option<Vec<KeyPart>>, errors: &mut Errors) -> MissingKey {
    match (chosen, fallback) {
        (None | Some(OnMissingKey::Reject), None) => MissingKey::Reject,
        (Some(OnMissingKey::Skip), None) => MissingKey::Skip,
        (None | Some(OnMissingKey::Fallback), Some(parts)) => MissingKey::Fallback(parts),
        (Some(OnMissingKey::Fallback), None) => {
            errors.push("fallback_key", "missing: on_missing_key = \"fallback\" needs a fallback_key such as [\"ip\"]");
            MissingKey::Reject
        }
        (Some(OnMissingKey::Reject | OnMissingKey::Skip), Some(_)) => {
            errors.push("fallback_key", "only used with on_missing_key = \"fallback\"");
            MissingKey::Reject
        }
    }
}

/// `on_success`, or its older spelling `clear_on_success = true`; not both.
fn success_action(clear: Option<bool>, action: Option<SuccessAction>, errors: &mut Errors) -> Option<SuccessAction> {
    match (clear, action) {
        (Some(_), Some(action)) => {
            errors.push("on_success", "use on_success alone (clear_on_success = true is on_success = \"clear\")");
            Some(action)
        }
        (Some(true), None) => Some(SuccessAction::Clear),
        (_, action) => action,
    }
}

/// What a success does, from `on_success` and the fields that refine it
/// (`success_statuses`, `success_identity_header`), which need it.
fn on_success(
    spec: &RuleSpec,
    action: Option<SuccessAction>,
    statuses: Option<Vec<u16>>,
    identity_header: Option<String>,
    errors: &mut Errors,
) -> Option<OnSuccess> {
    let Some(action) = action else {
        for (field, given) in [("success_statuses", statuses.is_some()), ("success_identity_header", identity_header.is_some())] {
            if given {
                errors.push(field, "only used with on_success (or clear_on_success)");
            }
        }
        return None;
    };
    let statuses = statuses.unwrap_or_else(|| DEFAULT_SUCCESS_STATUSES.to_vec());
    if statuses.iter().any(|s| *s >= 400) {
        errors.push("success_statuses", "a success is a status below 400");
    }
    if let Counting::Statuses(counted) = &spec.counting {
        if let Some(both) = statuses.iter().find(|s| counted.contains(s)) {
            errors.push("success_statuses", format!("{both} is also in count_statuses: a status either counts or is a success"));
        }
    }
    if identity_header.is_some() && spec.key.len() != 1 {
        errors.push(
            "success_identity_header",
            "compares the identity the origin names with the key: use a key of one part, the account (e.g. [\"body:email\"])",
        );
    }
    Some(OnSuccess { action, statuses, identity_header })
}

/// `on_success` only for a failures-only rule keyed by the target of the
/// attempts, never by the client (who could clear its own count).
/// `flag`: the rule spelled it `clear_on_success`, which errors then name.
fn check_on_success(spec: &RuleSpec, flag: bool, errors: &mut Errors) {
    if spec.on_success.is_none() {
        return;
    }
    let field = if flag { "clear_on_success" } else { "on_success" };
    if spec.counting == Counting::All {
        errors.push(field, "only for rules that count failures (set count_statuses)");
    }
    let fallback = spec.on_missing_key.fallback_parts();
    if let Some(part) = spec.key.iter().chain(fallback).find(|p| p.identifies_client()) {
        errors.push(
            field,
            format!("the key part `{part}` (in key or fallback_key) identifies the client: a client could clear its own count by succeeding on its own account; clear only a rule keyed by the target (e.g. body:email) with on_missing_key = \"reject\""),
        );
    }
}

/// How a failures-only rule receives a body before it reserves
/// ([`crate::pipeline::upload`]): as given, or the defaults; both fields only for
/// rules that count statuses.
fn upload_limits(spec: &RuleSpec, buffer: Option<u32>, timeout_ms: Option<u32>, errors: &mut Errors) -> UploadLimits {
    let mut limits = UploadLimits::default();
    for (field, given) in [("upload_buffer", buffer.is_some()), ("upload_timeout", timeout_ms.is_some())] {
        if given && spec.counting == Counting::All {
            errors.push(field, "only for rules that count statuses (set count_statuses)");
        }
    }
    limits.buffer = buffer.unwrap_or(limits.buffer);
    limits.timeout_ms = timeout_ms.unwrap_or(limits.timeout_ms);
    limits
}

/// How long a failures-only rule's reservation holds its slot: as given
/// (longer than the reserve and commit calls' timeouts together, at most
/// [`MAX_HOLD_MS`]), or `2 × timeout` + `upload_timeout` (the longest the
/// rest of a body over `upload_buffer` streams after the reserve) +
/// [`ORIGIN_ALLOWANCE_MS`].
fn reservation_ttl(spec: &RuleSpec, given: Option<u64>, errors: &mut Errors) -> u64 {
    let calls = 2 * u64::from(spec.timeout_ms);
    let Some(ms) = given else { return calls + u64::from(spec.upload.timeout_ms) + ORIGIN_ALLOWANCE_MS };
    if spec.counting == Counting::All {
        errors.push("reservation_ttl", "only for rules that count statuses (set count_statuses)");
    } else if ms <= calls || ms > MAX_HOLD_MS {
        errors.push(
            "reservation_ttl",
            format!("must be longer than twice the timeout ({calls} ms: the reserve and the commit calls) and at most 1h"),
        );
    }
    ms
}

/// A custom method is matched exactly as written: likely a typo.
fn custom_methods(rule: &Rule) -> Vec<ConfigWarning> {
    rule.methods
        .iter()
        .filter(|m| !is_standard_method(m))
        .map(|custom| ConfigWarning {
            rule: rule.name.clone(),
            field: "methods",
            message: format!(
                "`{custom}` is not a standard method (a typo?); the rule matches only requests sent with exactly this method"
            ),
        })
        .collect()
}

/// An id-like key part without a type counts `042` and `42` apart, though
/// `parseInt`, Werkzeug's `<int:>` and PHP's `(int)` read them as one.
fn untyped_ids(rule: &Rule) -> Vec<ConfigWarning> {
    rule.key
        .iter()
        .chain(rule.on_missing_key.fallback_parts())
        .filter(|p| p.untyped_id())
        .map(|p| ConfigWarning {
            rule: rule.name.clone(),
            field: "key",
            message: format!(
                "`{p}` names an id but has no type: spellings the origin reads as one id (`042`, `+42`, `42 `) would each get a bucket; add `:int`, `:uuid` or `:raw` (`{p}:int`)"
            ),
        })
        .collect()
}

/// Shadow mode never blocks, so a fail-closed policy on it does nothing.
fn shadow_fail_closed(rule: &Rule) -> Option<ConfigWarning> {
    (rule.action == Action::Log && rule.on_error == FailPolicy::Deny).then(|| ConfigWarning {
        rule: rule.name.clone(),
        field: "on_error",
        message: "action = \"log\" never blocks, so on_error = \"deny\" is ignored (shadow mode forwards even when the counter is down)".into(),
    })
}

/// A success that settles a count without `success_identity_header`:
/// tollgate cannot tell whom the origin authenticated, so a success for
/// any request naming the account settles it (issue 16).
fn forgeable_success(rule: &Rule) -> Option<ConfigWarning> {
    let on = rule.on_success.as_ref().filter(|on| on.identity_header.is_none())?;
    let effect = match on.action {
        SuccessAction::Clear => "clears the whole count (a whole limit of new guesses per forged success)",
        SuccessAction::Decrement => "forgives one failure (one more guess per forged success)",
    };
    Some(ConfigWarning {
        rule: rule.name.clone(),
        field: "success_identity_header",
        message: format!(
            "not set: a success {effect} for the account the request names, spelled as it names it, whoever \
             the origin logged in (the attacker's own account, named in a field the origin reads and tollgate \
             does not). Have the origin name the account it authenticated in a response header and set \
             success_identity_header to it"
        ),
    })
}

/// `tollgate check`'s one line on the trade-off left in a rule whose
/// success relieves (issue 25): relief is bound to the exact spelling, the
/// count to the folded key.
pub fn relief_note(rule: &Rule) -> Option<String> {
    rule.on_success.as_ref()?;
    Some(format!(
        "rule `{}`: a success or device cookie relieves only the account exactly as the request spelled it \
         (`Victim@example.com` never relieves `victim@example.com`), but spellings the key folds together share \
         one count: a look-alike's failures count against the account, and a count holding failures of two \
         spellings is relieved by no success until it expires",
        rule.name
    ))
}

/// A cost above the smallest limit would block every request.
fn check_cost(spec: &RuleSpec, errors: &mut Errors) {
    if let Some(message) = cost_error(&spec.limits, spec.cost) {
        errors.push("cost", message);
    }
}

/// The rule's lease mode: `auto` unless `lease = "off"`, forced off where
/// leasing cannot be exact (two-phase counting; a success that clears or
/// forgives). `lease_ttl` must be shorter than the shortest window.
fn lease_mode(spec: &RuleSpec, auto: Option<bool>, ttl_ms: Option<u64>, max: Option<u32>, errors: &mut Errors) -> LeaseMode {
    let smallest = spec.limits.iter().map(|l| l.requests.get()).min().unwrap_or(1);
    let shortest = spec.limits.iter().map(|l| l.window_ms.get()).min().unwrap_or(u64::MAX);
    if auto == Some(false) {
        for (field, given) in [("lease_ttl", ttl_ms.is_some()), ("lease_max", max.is_some())] {
            if given {
                errors.push(field, "only used with lease = \"auto\" (this rule has lease = \"off\")");
            }
        }
        return LeaseMode::Off;
    }
    if ttl_ms.is_some_and(|ttl| ttl >= shortest) {
        errors.push("lease_ttl", format!("must be shorter than the rule's shortest window ({shortest} ms)"));
    }
    // By default one second, or half the shortest window if that is less.
    let ttl_ms = ttl_ms.unwrap_or(DEFAULT_LEASE_TTL_MS.min(shortest / 2).max(1));
    if spec.counting != Counting::All {
        return LeaseMode::ForcedOff(OFF_TWO_PHASE);
    }
    if spec.on_success.is_some() {
        return LeaseMode::ForcedOff(OFF_ON_SUCCESS);
    }
    LeaseMode::Auto(LeaseSettings::new(ttl_ms, max.unwrap_or(DEFAULT_LEASE_MAX), smallest))
}

fn cost_error(limits: &[Limit], cost: u32) -> Option<String> {
    let smallest = limits.iter().map(|l| l.requests.get()).min()?;
    (cost > smallest).then(|| format!("{cost} is above the smallest limit ({smallest}): every request would be blocked"))
}

/// The sliding log holds at most [`MAX_SLIDING_LOG_REQUESTS`] per window.
fn check_algorithm(spec: &RuleSpec, errors: &mut Errors) {
    if let Some(message) = algorithm_error(&spec.limits, spec.algorithm) {
        errors.push("algorithm", message);
    }
}

fn algorithm_error(limits: &[Limit], algorithm: Algorithm) -> Option<String> {
    if algorithm != Algorithm::SlidingLog {
        return None;
    }
    let big = limits.iter().find(|l| l.requests.get() > MAX_SLIDING_LOG_REQUESTS)?;
    Some(format!(
        "a limit of {} requests is too large for the sliding log (at most {MAX_SLIDING_LOG_REQUESTS}); set algorithm = \"gcra\"",
        big.requests
    ))
}

/// One field's value being read; what is wrong with it is reported under
/// the field's name.
struct Input<'a> {
    field: &'a str,
    value: &'a Value,
    errors: &'a mut Errors,
}

impl Input<'_> {
    /// Reports `message` about this field.
    fn report(&mut self, message: impl Into<String>) {
        self.errors.push(self.field, message);
    }

    /// Reports `message`; `None`, for readers to return.
    fn fail<T>(&mut self, message: impl Into<String>) -> Option<T> {
        self.report(message);
        None
    }

    /// A whole number in `range`, `what` naming it in the error ("number of
    /// bytes").
    fn number<T: TryFrom<u64>>(&mut self, range: RangeInclusive<u64>, what: &str) -> Option<T> {
        match self.value.as_u64().filter(|n| range.contains(n)).map(T::try_from) {
            Some(Ok(n)) => Some(n),
            _ => self.fail(format!("must be a {what} from {} to {}", range.start(), range.end())),
        }
    }

    /// One of `names`, given by name; the error lists them.
    fn choice<T: Copy>(&mut self, names: &[(&str, T)]) -> Option<T> {
        let given = self.value.as_str();
        if let Some((_, value)) = names.iter().find(|(name, _)| Some(*name) == given) {
            return Some(*value);
        }
        let quoted: Vec<String> = names.iter().map(|(name, _)| format!("\"{name}\"")).collect();
        let listed = match quoted.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        self.fail(format!("must be {listed}"))
    }

    /// `true` or `false`.
    fn flag(&mut self) -> Option<bool> {
        match self.value.as_bool() {
            Some(on) => Some(on),
            None => self.fail("must be true or false"),
        }
    }

    /// A string that `valid` accepts; `message` otherwise.
    fn text(&mut self, valid: impl Fn(&str) -> bool, message: &str) -> Option<String> {
        match self.value.as_str().filter(|text| valid(text)) {
            Some(text) => Some(text.to_string()),
            None => self.fail(message),
        }
    }

    /// A list of strings that `valid` accepts as a whole; `message`
    /// otherwise.
    fn strings(&mut self, valid: impl Fn(&[String]) -> bool, message: &str) -> Option<Vec<String>> {
        let list: Option<Vec<String>> = match self.value.as_array() {
            Some(items) => items.iter().map(|v| v.as_str().map(str::to_string)).collect(),
            None => None,
        };
        match list.filter(|list| valid(list)) {
            Some(list) => Some(list),
            None => self.fail(message),
        }
    }

    /// A window or timeout such as `"60s"`; `examples` in the error for a
    /// value that is not a string.
    fn duration(&mut self, examples: &str) -> Option<NonZeroU64> {
        match self.value.as_str().map(parse_duration_ms) {
            Some(Ok(ms)) => Some(ms),
            Some(Err(e)) => self.fail(e.to_string()),
            None => self.fail(format!("must be a duration such as {examples}")),
        }
    }

    /// A non-empty list of key parts such as `["ip", "header:x-api-key"]`.
    /// Each bad part is reported at `field[i]`; the good ones are returned
    /// (none when the list itself is wrong).
    fn key_parts(&mut self) -> Vec<KeyPart> {
        let Some(list) = self.strings(|list| !list.is_empty(), "must be a non-empty list such as [\"ip\"]") else {
            return Vec::new();
        };
        let mut parts = Vec::new();
        for (i, item) in list.iter().enumerate() {
            match KeyPart::parse(item) {
                Ok(part) => parts.push(part),
                Err(message) => self.errors.push(format!("{}[{i}]", self.field), message),
            }
        }
        parts
    }

    /// A non-empty list of parameter sources: `"query"`, `"body"`,
    /// `"cookie"`.
    fn sources(&mut self) -> Option<Sources> {
        let names = [Source::Query, Source::Body, Source::Cookie];
        let message = "must be a non-empty list of \"query\", \"body\" and \"cookie\"";
        let list = self.strings(|list| !list.is_empty() && list.iter().all(|s| names.iter().any(|n| n.name() == s)), message)?;
        Some(names.iter().filter(|n| list.iter().any(|s| s == n.name())).fold(Sources::NONE, |set, n| set.with(*n)))
    }

    /// A non-empty list of HTTP statuses, 100 to 599.
    fn statuses(&mut self) -> Option<Vec<u16>> {
        let list = match self.value.as_array() {
            Some(list) if !list.is_empty() => list,
            _ => return self.fail("must be a non-empty list of HTTP statuses such as [401, 403]"),
        };
        let status = |v: &Value| v.as_u64().filter(|s| (100..=599).contains(s)).and_then(|s| u16::try_from(s).ok());
        match list.iter().map(status).collect() {
            Some(statuses) => Some(statuses),
            None => self.fail("must be a list of HTTP statuses from 100 to 599"),
        }
    }

    /// A table of `name = condition` on `target`; `shape` is the error
    /// when it is not a table. Each bad condition is reported at
    /// `field.name`.
    fn conditions(&mut self, target: Target, shape: &str) -> Option<Vec<Condition>> {
        let Some(table) = self.value.as_object() else {
            return self.fail(shape);
        };
        let mut conditions = Vec::new();
        for (name, value) in table {
            match condition(target, name, value) {
                Ok(condition) => conditions.push(condition),
                Err(message) => self.errors.push(format!("{}.{name}", self.field), message),
            }
        }
        Some(conditions)
    }
}

/// One condition: `"v"` equals, `["a", "b"]` any of, `true` present.
fn condition(target: Target, name: &str, value: &Value) -> Result<Condition, &'static str> {
    let test = match value {
        Value::String(v) => Test::Equals(v.clone()),
        Value::Bool(true) => Test::Present,
        Value::Array(items) => {
            let list: Option<Vec<String>> = items.iter().map(|v| v.as_str().map(str::to_string)).collect();
            match list {
                Some(list) if !list.is_empty() => Test::AnyOf(list),
                _ => return Err("an any-of condition must be a non-empty list of strings"),
            }
        }
        _ => return Err("must be a string (equals), a list of strings (any of) or true (present)"),
    };
    Condition::new(target, name, test)
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The methods of RFC 9110 §9 and PATCH (RFC 5789), matched in any case.
pub const STANDARD_METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];

/// A standard method in any case, or a custom one written as it is sent:
/// upper-case letters only (`PSOT` passes, with a warning from
/// [`Config::warnings`]; `psot` does not).
fn valid_method(method: &str) -> bool {
    is_standard_method(method) || (!method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase()))
}

fn is_standard_method(method: &str) -> bool {
    STANDARD_METHODS.iter().any(|m| m.eq_ignore_ascii_case(method))
}

/// Visible ASCII without `:` (RFC 9110 §5.1 allows less, but nothing more
/// can be sent).
fn valid_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b':')
}

fn valid_suffix(suffix: &str) -> bool {
    let s = suffix.trim_start_matches('.');
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// `/.tollgate`: a canonical path, not the root, without a trailing slash.
fn valid_admin_prefix(prefix: &str) -> bool {
    prefix.len() > 1
        && prefix.starts_with('/')
        && !prefix.ends_with('/')
        && crate::request::canon::canonical_path(prefix).as_deref() == Ok(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(value: Value) -> Vec<String> {
        match Config::from_json(&value) {
            Ok(_) => vec![],
            Err(e) => e.iter().map(ToString::to_string).collect(),
        }
    }

    fn rule(extra: Value) -> Value {
        let mut base = json!({
            "name": "r",
            "path": "/api/example",
            "limits": [{ "requests": 10, "window": "60s" }],
        });
        if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        json!({ "rules": [base] })
    }

    #[test]
    fn on_invalid_config_is_read_even_from_a_broken_config() {
        let broken = json!({ "on_invalid_config": "allow", "rules": [{ "name": "r", "path": "/x", "limts": [] }] });
        assert!(Config::from_json(&broken).is_err());
        assert_eq!(on_invalid_config(&broken), FailPolicy::Allow);
        assert_eq!(on_invalid_config(&json!({ "rules": 1 })), FailPolicy::Deny, "deny by default");
        assert_eq!(on_invalid_config(&json!("not a table")), FailPolicy::Deny);
        assert_eq!(on_invalid_config(&json!({ "on_invalid_config": "alow" })), FailPolicy::Deny);
        let mut valid = rule(json!({}));
        valid["on_invalid_config"] = json!("allow");
        assert_eq!(Config::from_json(&valid).unwrap().on_invalid_config, FailPolicy::Allow);
        valid["on_invalid_config"] = json!("alow");
        assert_eq!(errors(valid), ["field `on_invalid_config`: must be \"deny\" or \"allow\""]);
    }

    #[test]
    fn upstream_is_the_origin_or_a_named_service_binding() {
        use crate::config::upstream::Upstream;
        assert_eq!(Config::from_json(&rule(json!({}))).unwrap().upstream, Upstream::Origin);
        let mut value = rule(json!({}));
        value["upstream"] = json!({ "service": "APP" });
        assert_eq!(Config::from_json(&value).unwrap().upstream, Upstream::Service("APP".into()));
        value["upstream"] = json!({ "service": "my-app" });
        assert_eq!(
            errors(value),
            ["field `upstream`: `my-app` is not a binding name (letters, digits, `_` and `$`, not starting with a digit)"]
        );
    }

    #[test]
    fn methods_standard_in_any_case_custom_only_in_upper_case_with_a_warning() {
        let config = Config::from_json(&rule(json!({ "methods": ["get", "PSOT", "Patch"] }))).unwrap();
        assert_eq!(config.rules[0].methods, ["GET", "PSOT", "PATCH"]);
        let warnings = config.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].to_string().contains("`PSOT` is not a standard method"), "{warnings:?}");
        assert_eq!(errors(rule(json!({ "methods": ["psot"] }))).len(), 1);
        assert!(Config::from_json(&rule(json!({ "methods": ["GET"] }))).unwrap().warnings().is_empty());
    }

    #[test]
    fn shipped_shape_parses() {
        let config = Config::from_json(&rule(json!({
            "query": { "mode": "heavy" }, "key": ["ip"], "action": "block", "on_error": "allow"
        })))
        .unwrap();
        assert_eq!(config.ipv6_prefix, 64);
        assert_eq!(config.rules.len(), 1);
        assert_eq!(config.rules[0].limits[0].window_ms.get(), 60_000);
    }

    #[test]
    fn every_error_names_rule_and_field() {
        assert_eq!(errors(json!([])), ["field `TOLLGATE`: must be a table with a `rules` list"]);
        assert_eq!(errors(json!({})), ["field `rules`: missing: list at least one rule"]);
        assert_eq!(errors(json!({"rules": [], "x": 1})), ["field `x`: unknown field"]);
        assert_eq!(
            errors(json!({"rules": [], "ipv6_prefix": 129})),
            ["field `ipv6_prefix`: must be a whole number from 1 to 128"]
        );
        assert_eq!(
            errors(json!({"rules": [], "admin_prefix": "/admin/"})),
            ["field `admin_prefix`: must be a canonical path such as \"/.tollgate\" (no trailing slash)"]
        );
        assert_eq!(
            errors(json!({"rules": [], "blocked_cache_capacity": 0})),
            ["field `blocked_cache_capacity`: must be a number of entries from 1 to 1000000"]
        );
        assert_eq!(
            errors(json!({"rules": [], "body_limit": 0})),
            ["field `body_limit`: must be a number of bytes from 1 to 1048576"]
        );
        assert_eq!(errors(json!({"rules": [1]})), ["rule `rules[0]`, field ``: must be a table"]);
        assert_eq!(
            errors(json!({"rules": [{"path": "/a", "limits": [{"requests": 1, "window": "1s"}]}]})),
            ["rule `rules[0]`, field `name`: missing"]
        );
        let cases = [
            (json!({"name": "bad name"}), "name"),
            (json!({"path": "api"}), "path"),
            (json!({"path": "/api/(unclosed"}), "path"),
            (json!({"host": ""}), "host"),
            (json!({"host": "bücher.example"}), "host"),
            (json!({"methods": ["GET", "P0ST"]}), "methods"),
            (json!({"query": {"mode": 3}}), "query.mode"),
            (json!({"query": {"mode": []}}), "query.mode"),
            (json!({"query": []}), "query"),
            (json!({"case_insensitive": "yes"}), "case_insensitive"),
            (json!({"suffixes": [".js on"]}), "suffixes"),
            (json!({"key": []}), "key"),
            (json!({"key": ["ip", "colour"]}), "key[1]"),
            (json!({"on_missing_key": "ignore"}), "on_missing_key"),
            (json!({"on_missing_key": "fallback"}), "fallback_key"),
            (json!({"on_missing_key": "skip", "fallback_key": ["ip"]}), "fallback_key"),
            (json!({"fallback_key": ["nope"]}), "fallback_key[0]"),
            (json!({"count_statuses": [401, 700]}), "count_statuses"),
            (json!({"count_statuses": []}), "count_statuses"),
            (json!({"clear_on_success": true, "key": ["body:email"]}), "clear_on_success"),
            (json!({"clear_on_success": true, "count_statuses": [401], "key": ["ip", "body:email"]}), "clear_on_success"),
            (json!({"clear_on_success": "yes"}), "clear_on_success"),
            (json!({"ratelimit_headers": 1}), "ratelimit_headers"),
            (json!({"header": {"x-plan": 1}}), "header.x-plan"),
            (json!({"header": {"bad name": "x"}}), "header.bad name"),
            (json!({"header": "x-plan"}), "header"),
            (json!({"algorithm": "token_bucket"}), "algorithm"),
            (json!({"limits": [{"requests": 100000, "window": "1h"}]}), "algorithm"),
            (json!({"limits": []}), "limits"),
            (json!({"limits": vec![json!({"requests": 1, "window": "1s"}); 9]}), "limits"),
            (json!({"key": ["body:email"], "fallback_key": ["ip"], "count_statuses": [401], "clear_on_success": true}), "clear_on_success"),
            (json!({"key": ["body:email"], "count_statuses": [401], "on_success": "forget"}), "on_success"),
            (json!({"key": ["ip"], "count_statuses": [401], "on_success": "decrement"}), "on_success"),
            (json!({"key": ["body:email"], "on_success": "clear"}), "on_success"),
            (json!({"key": ["body:email"], "count_statuses": [401], "on_success": "clear", "clear_on_success": true}), "on_success"),
            (json!({"key": ["body:email"], "count_statuses": [401], "success_statuses": [200]}), "success_statuses"),
            (json!({"key": ["body:email"], "count_statuses": [401], "on_success": "clear", "success_statuses": []}), "success_statuses"),
            (json!({"key": ["body:email"], "count_statuses": [401], "on_success": "clear", "success_statuses": [200, 450]}), "success_statuses"),
            (json!({"key": ["body:email"], "count_statuses": [200], "on_success": "clear"}), "success_statuses"),
            (json!({"key": ["body:email"], "count_statuses": [401], "success_identity_header": "x-user"}), "success_identity_header"),
            (json!({"key": ["body:email"], "count_statuses": [401], "on_success": "clear", "success_identity_header": "x user"}), "success_identity_header"),
            (json!({"key": ["body:email", "path:tenant"], "path": "/t/:tenant", "count_statuses": [401], "on_success": "clear", "success_identity_header": "x-user"}), "success_identity_header"),
            (json!({"reservation_ttl": "30s"}), "reservation_ttl"),
            (json!({"count_statuses": [200], "reservation_ttl": "4s"}), "reservation_ttl"),
            (json!({"count_statuses": [200], "timeout": "1s", "reservation_ttl": "2s"}), "reservation_ttl"),
            (json!({"count_statuses": [200], "reservation_ttl": "2h"}), "reservation_ttl"),
            (json!({"count_statuses": [200], "reservation_ttl": 30}), "reservation_ttl"),
            (json!({"upload_buffer": 1024}), "upload_buffer"),
            (json!({"upload_timeout": "5s"}), "upload_timeout"),
            (json!({"count_statuses": [200], "upload_buffer": -1}), "upload_buffer"),
            (json!({"count_statuses": [200], "upload_buffer": 16_777_217}), "upload_buffer"),
            (json!({"count_statuses": [200], "upload_buffer": "1MB"}), "upload_buffer"),
            (json!({"count_statuses": [200], "upload_timeout": "11m"}), "upload_timeout"),
            (json!({"count_statuses": [200], "upload_timeout": 10}), "upload_timeout"),
            (json!({"limits": [{"requests": 0, "window": "1s"}]}), "limits[0].requests"),
            (json!({"limits": [{"requests": 1, "window": "1w"}]}), "limits[0].window"),
            (json!({"limits": [{"requests": 1, "window": 60}]}), "limits[0].window"),
            (json!({"limits": [{"requests": 1, "window": "1s", "burst": 2}]}), "limits[0].burst"),
            (json!({"cost": 0}), "cost"),
            (json!({"cost": 11}), "cost"),
            (json!({"action": "drop"}), "action"),
            (json!({"on_error": "fail"}), "on_error"),
            (json!({"timeout": "1m"}), "timeout"),
            (json!({"timeout": 5}), "timeout"),
            (json!({"colour": "red"}), "colour"),
            (json!({"lease": "always"}), "lease"),
            (json!({"lease": true}), "lease"),
            (json!({"lease_ttl": "2m"}), "lease_ttl"),
            (json!({"lease_ttl": "1s", "limits": [{"requests": 100, "window": "1s"}]}), "lease_ttl"),
            (json!({"lease_max": 0}), "lease_max"),
            (json!({"lease_max": 1_000_001}), "lease_max"),
            (json!({"lease": "off", "lease_max": 10}), "lease_max"),
            (json!({"lease": "off", "lease_ttl": "1s"}), "lease_ttl"),
        ];
        for (extra, field) in cases {
            let errs = errors(rule(extra.clone()));
            assert_eq!(errs.len(), 1, "{extra}: {errs:?}");
            let expected_rule = if field == "name" { "bad name" } else { "r" };
            assert!(
                errs[0].starts_with(&format!("rule `{expected_rule}`, field `{field}`: ")),
                "{extra}: {}",
                errs[0]
            );
        }
    }

    #[test]
    fn lease_settings_parse_and_are_forced_off_where_not_exact() {
        let mode = |extra: Value| Config::from_json(&rule(extra)).unwrap().rules[0].lease;
        let big = json!([{"requests": 5000, "window": "60s"}]);
        assert_eq!(mode(json!({"limits": big})), LeaseMode::Auto(LeaseSettings::new(1_000, 1_000, 5_000)), "auto by default");
        assert!(mode(json!({"limits": big})).leases());
        assert!(!mode(json!({})).leases(), "10 per minute never leases");
        assert_eq!(
            mode(json!({"limits": big, "lease_ttl": "250ms", "lease_max": 50})),
            LeaseMode::Auto(LeaseSettings::new(250, 50, 5_000))
        );
        assert_eq!(mode(json!({"limits": [{"requests": 5000, "window": "1s"}]})).settings().map(|s| s.ttl_ms), Some(500), "half a short window");
        assert_eq!(mode(json!({"limits": big, "lease": "off"})), LeaseMode::Off);
        assert_eq!(mode(json!({"limits": big, "count_statuses": [401]})), LeaseMode::ForcedOff(OFF_TWO_PHASE));
        let clears = json!({"limits": big, "key": ["body:email"], "count_statuses": [401], "on_success": "clear"});
        assert!(matches!(mode(clears), LeaseMode::ForcedOff(_)));
        assert!(mode(json!({"limits": big, "lease": "off"})).describe().starts_with("off"));
        assert!(mode(json!({"limits": big, "count_statuses": [401]})).describe().contains("count_statuses"));
    }

    #[test]
    fn failures_only_and_fallback_parse() {
        let config = Config::from_json(&rule(json!({
            "key": ["body:email"], "count_statuses": [401, 403], "clear_on_success": true,
            "fallback_key": ["header:x-account"], "ratelimit_headers": true
        })))
        .unwrap();
        let r = &config.rules[0];
        assert_eq!(r.counting, Counting::Statuses(vec![401, 403]));
        assert!(r.ratelimit_headers);
        let on = r.on_success.as_ref().unwrap();
        assert_eq!((on.action, on.statuses.as_slice(), on.identity_header.as_deref()), (SuccessAction::Clear, &[200, 204][..], None));
        assert_eq!(r.reservation_ttl_ms, 114_000, "2 × the 2 s timeout + the 10 s upload_timeout + 100 s");
        assert_eq!(r.upload, UploadLimits { buffer: 262_144, timeout_ms: 10_000 }, "256 KiB, 10 s");
        assert_eq!(r.on_missing_key, MissingKey::Fallback(vec![KeyPart::Header("x-account".into(), None)]));
        assert_eq!(config.admin_prefix, "/.tollgate");
        assert_eq!(config.body_limit, 16 * 1024);
    }

    #[test]
    fn success_and_reservation_fields_parse() {
        let config = Config::from_json(&rule(json!({
            "key": ["body:email"], "count_statuses": [401], "on_success": "decrement", "success_statuses": [200, 302],
            "success_identity_header": "X-Authenticated-User", "timeout": "500ms", "reservation_ttl": "1100ms"
        })))
        .unwrap();
        let r = &config.rules[0];
        let on = r.on_success.as_ref().unwrap();
        assert_eq!(on.action, SuccessAction::Decrement);
        assert_eq!(on.statuses, [200, 302]);
        assert_eq!(on.identity_header.as_deref(), Some("x-authenticated-user"), "lowercased");
        assert_eq!(r.reservation_ttl_ms, 1_100);
        assert!(config.warnings().is_empty(), "{:?}", config.warnings());
        let limits = |extra: Value| Config::from_json(&rule(extra)).unwrap().rules[0].upload;
        let given = json!({"count_statuses": [200], "upload_buffer": 0, "upload_timeout": "1500ms"});
        assert_eq!(limits(given), UploadLimits { buffer: 0, timeout_ms: 1_500 }, "0: every body streams under the deadline");
        let ttl = Config::from_json(&rule(json!({"count_statuses": [200], "upload_timeout": "30s"}))).unwrap().rules[0].reservation_ttl_ms;
        assert_eq!(ttl, 134_000, "the default reservation_ttl covers the upload_timeout");
        let config = Config::from_json(&rule(json!({"key": ["body:email"], "count_statuses": [401], "clear_on_success": false}))).unwrap();
        assert_eq!(config.rules[0].on_success, None);
    }

    /// A success that anyone could forge is worth a warning, not an error:
    /// the rule still works for origins whose logins cannot be confused.
    #[test]
    fn forgeable_successes_are_warned_about() {
        let config = Config::from_json(&json!({ "rules": [
            { "name": "clear", "path": "/login", "key": ["body:email"], "count_statuses": [401], "clear_on_success": true,
              "limits": [{ "requests": 10, "window": "15m" }] },
            { "name": "lower", "path": "/login", "key": ["body:email"], "count_statuses": [401], "on_success": "decrement",
              "limits": [{ "requests": 10, "window": "15m" }] },
            { "name": "quota", "path": "/q", "count_statuses": [200], "limits": [{ "requests": 10, "window": "1d" }] },
        ]}))
        .unwrap();
        let warnings: Vec<String> = config.warnings().iter().map(ToString::to_string).collect();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].starts_with("rule `clear`, field `success_identity_header`: not set: "), "{}", warnings[0]);
        assert!(warnings[0].contains("whoever the origin logged in"), "{}", warnings[0]);
        assert!(warnings[1].starts_with("rule `lower`, field `success_identity_header`: not set: "), "{}", warnings[1]);
        assert!(warnings[1].contains("one failure"), "{}", warnings[1]);
    }

    #[test]
    fn duplicate_names_are_refused() {
        let r = json!({"name": "a", "path": "/a", "limits": [{"requests": 1, "window": "1s"}]});
        assert_eq!(
            errors(json!({"rules": [r.clone(), r]})),
            ["rule `a`, field `name`: another rule has the same name; names key the counters"]
        );
    }

    #[test]
    fn all_errors_are_reported_at_once() {
        let errs = errors(json!({"rules": [
            {"name": "a", "path": "x", "limits": []},
            {"name": "b", "path": "/b"}
        ]}));
        assert_eq!(errs.len(), 3, "{errs:?}");
    }

    #[test]
    fn exemptions_parse_at_both_levels_and_a_bare_header_is_refused() {
        let mut value = rule(json!({ "exempt": {
            "verified_bots": ["Search Engine Crawler"],
            "header": { "name": "X-Health", "secret": "TOLLGATE_EXEMPT_KEY" } } }));
        value["exempt"] = json!({ "ips": ["10.0.0.0/8", "2001:db8::/32"], "asns": [13335], "verified_bots": true });
        let c = Config::from_json(&value).unwrap();
        assert_eq!(c.exempt.ips.len(), 2);
        assert_eq!(c.exempt.asns, [13335]);
        assert_eq!(c.exempt.bots, crate::request::exempt::Bots::Any);
        let header = c.rules[0].exempt.header.clone().unwrap();
        assert_eq!((header.name.as_str(), header.secret.as_str()), ("x-health", "TOLLGATE_EXEMPT_KEY"));
        // A header anyone can send, with no secret to compare: spoofable.
        let bare = errors(rule(json!({ "exempt": { "header": { "name": "x-internal" } } })));
        assert_eq!(bare.len(), 1, "{bare:?}");
        assert!(bare[0].contains("rule `r`, field `exempt.header.secret`: missing: any client can send any header"), "{bare:?}");
        let string = errors(json!({ "rules": [], "exempt": { "header": "x-internal" } }));
        assert!(string[0].contains("field `exempt.header`") && string[0].contains("spoofable"), "{string:?}");
        let bad = errors(rule(json!({ "exempt": {
            "ips": ["10.1.0.0/8", "nope"], "asns": ["AS13335"], "verified_bots": [], "other": 1 } })));
        for field in ["exempt.ips[0]", "exempt.ips[1]", "exempt.asns", "exempt.verified_bots", "exempt.other"] {
            assert!(bad.iter().any(|e| e.contains(&format!("field `{field}`"))), "{field}: {bad:?}");
        }
        assert!(errors(json!({ "rules": [], "exempt": 1 }))[0].contains("field `exempt`: must be a table"));
    }

    /// `request.cf` is read only for a config whose keys or exemptions need it.
    #[test]
    fn reads_cf_only_for_cf_keys_and_exemptions() {
        let reads = |value: Value| Config::from_json(&value).unwrap().facts.reads_cf;
        assert!(!reads(rule(json!({}))));
        assert!(!reads(rule(json!({ "key": ["ip", "header:x-api-key"], "exempt": { "ips": ["10.0.0.0/8"] } }))));
        assert!(reads(rule(json!({ "key": ["ip", "country"] }))));
        assert!(reads(rule(json!({ "key": ["asn"] }))));
        assert!(reads(rule(json!({ "exempt": { "asns": [13335] } }))));
        assert!(reads(rule(json!({ "exempt": { "verified_bots": true } }))));
        let mut top = rule(json!({}));
        top["exempt"] = json!({ "verified_bots": ["Search Engine Crawler"] });
        assert!(reads(top));
    }

    /// Only a `trusted_device` rule makes the plan read the clock (so it
    /// is never replayed from the plan memo).
    #[test]
    fn reads_the_clock_only_for_trusted_devices() {
        let clock = |value: Value| Config::from_json(&value).unwrap().facts.reads_clock;
        assert!(!clock(rule(json!({ "key": ["ip", "country"], "exempt": { "asns": [13335] } }))));
        assert!(clock(rule(json!({ "key": ["body:user"], "methods": ["POST"], "count_statuses": [401], "on_success": "decrement",
            "trusted_device": { "secret": "DEVICE_KEY", "cookie": "dev" } }))));
    }

    #[test]
    fn overrides_parse_resolve_typed_and_name_their_value_in_errors() {
        let c = Config::from_json(&rule(json!({ "key": ["path:school:int"], "path": "/s/:school/*",
            "overrides": { "042": [{ "requests": 1000, "window": "1d" }] } })))
        .unwrap();
        assert_eq!(c.rules[0].limits_for("path:school:int=42")[0].requests.get(), 1000);
        assert_eq!(c.rules[0].limits_for("path:school:int=43")[0].requests.get(), 10, "everyone else: the rule's");
        let bad = errors(rule(json!({ "key": ["path:school:int"], "path": "/s/:school/*", "overrides": {
            "x": [{ "requests": 1, "window": "1d" }],
            "1": [{ "requests": 0, "window": "1d" }],
            "2": [{ "requests": 20000, "window": "1d" }],
            "3": [{ "requests": 5, "window": "1d" }], "+3": [{ "requests": 5, "window": "1d" }] } })));
        for (field, says) in [("overrides.x", "not a value"), ("overrides.1[0].requests", "whole number"),
            ("overrides.2", "sliding log"), ("overrides.3", "same key")] {
            assert!(bad.iter().any(|e| e.contains(&format!("field `{field}`")) && e.contains(says)), "{field}: {bad:?}");
        }
        let two = errors(rule(json!({ "key": ["ip", "header:x-a"], "overrides": { "a": [{ "requests": 1, "window": "1d" }] } })));
        assert!(two[0].contains("field `overrides`: only for a rule whose key has one part"), "{two:?}");
        let cost = errors(rule(json!({ "cost": 5, "overrides": { "1.2.3.4": [{ "requests": 2, "window": "1d" }] } })));
        assert!(cost[0].contains("field `overrides.1.2.3.4`: 5 is above the smallest limit"), "{cost:?}");
        // The IPv6 prefix is read whatever the field order.
        let v6 = Config::from_json(&json!({ "ipv6_prefix": 48, "rules": [{ "name": "r", "path": "/a",
            "limits": [{ "requests": 1, "window": "1m" }],
            "overrides": { "2001:db8:1:2::9": [{ "requests": 5, "window": "1m" }] } }] })).unwrap();
        assert_eq!(v6.rules[0].limits_for("ip=2001:db8:1::/48")[0].requests.get(), 5);
    }

    #[test]
    fn custom_responses_parse_once_and_errors_name_the_field() {
        let c = Config::from_json(&rule(json!({ "response": { "status": 503, "body": "<p>{rule}: {retry_after} s</p>" } }))).unwrap();
        let r = c.rules[0].response.as_ref().unwrap();
        assert_eq!((r.status, r.content_type.as_str()), (503, "text/html; charset=utf-8"));
        assert_eq!(r.render("r", 7).unwrap(), "<p>r: 7 s</p>");
        let status_only = Config::from_json(&rule(json!({ "response": { "status": 503 } }))).unwrap();
        assert!(!status_only.rules[0].response.as_ref().unwrap().has_body());
        for (response, field, says) in [
            (json!({ "status": 418 }), "response.status", "429 or 503"),
            (json!({ "status": 500 }), "response.status", "429 or 503"),
            (json!({ "content_type": "html", "body": "x" }), "response.content_type", "media type"),
            (json!({ "body": "x".repeat(70_000) }), "response.body", "64 KiB"),
            (json!({ "content_type": "text/plain" }), "response", "without a body"),
            (json!({ "bogus": 1 }), "response.bogus", "unknown field"),
            (json!("429"), "response", "must be a table"),
        ] {
            let e = errors(rule(json!({ "response": response })));
            assert!(e.iter().any(|e| e.contains(&format!("field `{field}`")) && e.contains(says)), "{field}: {e:?}");
        }
    }
}
