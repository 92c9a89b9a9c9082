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
//!
//! This module is the entry ([`Config::from_json`]), the top-level table
//! and what a whole config is ([`Config`], [`ConfigFacts`], errors and
//! warnings). The reading is table-driven: `reader` (a `Field` list per
//! table, read by `read_table`), `rule_fields` (a rule's table), `limits`
//! (`limits` and `overrides`), `exempt_fields`; `checks` holds what spans
//! a rule's fields, and `tollgate check`'s warnings and notes. [`describe`]
//! writes a rule back in the config's vocabulary, [`schema`] writes the
//! tables as a JSON Schema. The layer uses `request` and `count`, never
//! `pipeline`.

pub(crate) mod access;
mod checks;
pub(crate) mod cost;
mod cost_fields;
pub(crate) mod describe;
mod exempt_fields;
pub(crate) mod headers;
mod limits;
pub(crate) mod price;
mod price_fields;
pub(crate) mod lockout;
mod reader;
mod rule_fields;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) mod schema;
pub(crate) mod overrides;
pub(crate) mod policy;
mod regexp;
pub(crate) mod response;
pub mod rules;
pub(crate) mod spelling;
pub(crate) mod upstream;
pub(crate) mod written;
pub(crate) mod words;

#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) use checks::{relief_note, unit_note};

use crate::config::exempt_fields::read_exempt;
use crate::config::policy::{FailPolicy, Named, DEFAULT_BODY_TIMEOUT_MS, DEFAULT_MEMORY_BUDGET, MAX_BODY_TIMEOUT_MS, MAX_MEMORY_BUDGET, MEMORY_CLIENT_SHARES, MEMORY_PER_READ_BYTE, MEMORY_PER_UPLOAD_BYTE, MIN_MEMORY_BUDGET};
use crate::config::reader::{read_table, valid_admin_prefix, Errors, Field, Input, Shape};
use crate::config::rule_fields::{read_rules, RuleDraft};
use crate::config::rules::Rule;
use crate::request::canon::Source;
use crate::request::exempt::Exemptions;
use crate::request::key::KeyPart;
use serde_json::Value;
use std::fmt;

/// Default IPv6 grouping: one /64 is what a single subscriber is usually
/// given, so keying on the full address would let a client rotate through
/// 2^64 keys.
pub(crate) const DEFAULT_IPV6_PREFIX: u8 = 64;

/// Default wait for the counter before the rule's fail policy applies.
pub(crate) const DEFAULT_TIMEOUT_MS: u32 = 2_000;

/// The longest `timeout` a rule may set.
pub(crate) const MAX_TIMEOUT_MS: u32 = 30_000;

/// How long a reservation waits for the origin by default, beyond the
/// reserve and commit calls' own `timeout`s: 100 s, after which Cloudflare
/// gives up on a proxied origin (HTTP 524). A reservation held longer only
/// keeps a lost request's slot taken (towards blocking); one held shorter
/// than a slow origin frees the slot before the answer commits (towards
/// admitting). So the default rule `reservation_ttl` is `2 × timeout` plus
/// this; set it lower for a short limit window whose origin is fast.
pub(crate) const ORIGIN_ALLOWANCE_MS: u64 = 100_000;

/// How long, by default, a `concurrency` rule's answer keeps its slot once
/// the client has stopped reading it (`idle_release`): 10 s, so a client
/// that reads at all (64 KiB in 10 s is 6.5 KB/s) keeps its answer, and a
/// stranger that asks for a large answer and never reads it holds the
/// key's slot for seconds, not `reservation_ttl` ([`crate::count::slots`]).
pub(crate) const DEFAULT_IDLE_RELEASE_MS: u64 = 10_000;

/// Format suffixes folded into the bare path unless a rule lists its own
/// (`/api/example.json` is `/api/example`, as Rails and Express routers do).
pub const DEFAULT_SUFFIXES: &[&str] = &["json", "xml", "html", "htm", "txt", "csv", "yaml", "yml"];

/// Default prefix of the admin API (active only with a token set).
pub(crate) const DEFAULT_ADMIN_PREFIX: &str = "/.tollgate";

/// Default cap on the bytes read to find a `body:` key (16 KiB): login and
/// signup forms are far smaller; anything larger is not buffered.
pub(crate) const DEFAULT_BODY_LIMIT: u32 = 16 * 1024;

/// How long a log episode lasts by default (`log_episode`): one line per
/// (event, rule, key) per minute ([`crate::pipeline::episodes`]).
pub(crate) const DEFAULT_LOG_EPISODE_MS: i64 = 60_000;

/// How often an isolate writes its allowed totals by default
/// (`metrics_interval`; [`crate::pipeline::metrics::AllowedTotals`]).
pub(crate) const DEFAULT_METRICS_INTERVAL_MS: i64 = 60_000;

/// The whole validated config.
///
/// Read from the `TOLLGATE` var's JSON (a `wrangler.toml` table becomes
/// JSON the same way), every error found at once, each naming its rule
/// and field:
///
/// ```
/// use tollgate::Config;
///
/// let config = Config::from_json_str(r#"{ "rules": [
///     { "name": "api", "path": "/api/*", "key": ["ip"], "limits": [{ "requests": 10, "window": "1m" }] }
/// ] }"#)?;
/// assert_eq!(config.rules.len(), 1);
/// assert!(config.warnings().is_empty());
/// # Ok::<(), Vec<tollgate::ConfigError>>(())
/// ```
#[derive(Debug)]
pub struct Config {
    pub(crate) ipv6_prefix: u8,
    pub rules: Vec<Rule>,
    /// Path prefix of the admin API, e.g. `/.tollgate`.
    pub(crate) admin_prefix: String,
    /// The Cloudflare Access application in front of the admin prefix
    /// (`admin_access`): its tokens sign the operator in.
    pub(crate) admin_access: Option<access::AdminAccess>,
    /// Most body bytes read for `body:` keys.
    pub body_limit: u32,
    /// Most bytes of isolate memory tollgate holds of request bodies at
    /// once (`memory_budget`, formerly `upload_budget`;
    /// [`crate::pipeline::upload::MemoryBudget`]).
    pub(crate) memory_budget: u32,
    /// The longest a body read for `body:` keys and form parameters may
    /// take (`body_timeout`): then 408.
    pub(crate) body_timeout_ms: u32,
    /// Most (rule, key) entries the isolate's blocked-until cache holds.
    pub(crate) blocked_cache_capacity: usize,
    /// How long one log episode of a (rule, key) lasts (`log_episode`).
    pub(crate) log_episode_ms: i64,
    /// How often an isolate writes its allowed totals (`metrics_interval`).
    pub(crate) metrics_interval_ms: i64,
    /// The built-in rule counting failed admin authentications per client
    /// ([`lockout::LOCKOUT_RULE`]); not among `rules`, never matched
    /// against a request.
    pub(crate) admin_lockout: Rule,
    /// What the Worker does once the config turns out invalid at runtime
    /// (vars edited in the dashboard): see [`on_invalid_config`].
    pub(crate) on_invalid_config: FailPolicy,
    /// What the rules ask of requests, computed once from `rules`.
    pub(crate) facts: ConfigFacts,
    /// Requests no rule counts or limits (`exempt` at the top level).
    pub(crate) exempt: Exemptions,
    /// Where allowed requests go: the origin, or a service binding.
    pub(crate) upstream: crate::config::upstream::Upstream,
    /// One warning per field a rule wrote in the 0.2.0 spelling
    /// ([`spelling`]), read as its current spelling.
    pub(crate) respelled: Vec<ConfigWarning>,
    /// The price tables shared by name (`prices`), in config
    /// order: rules name them in `metering.price`, and keep a copy.
    pub(crate) prices: Vec<(String, price::PriceTable)>,
}

/// Facts about the rules that decide what the plan reads of a request,
/// computed once when the config is parsed: a request that no rule could
/// concern costs no pass over the rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ConfigFacts {
    /// Some rule has query conditions: a form body's parameters can change
    /// a match, so the body is read.
    pub(crate) any_query_conditions: bool,
    /// Some rule lists `methods`: overrides (headers, `_method` in the
    /// query or a form body) can change a match, so they are read.
    pub(crate) any_method_restriction: bool,
    /// Every method some rule lists, each once, in config order: what a
    /// POST whose form body tollgate cannot read may be overridden to.
    pub(crate) listed_methods: Vec<String>,
    /// Some rule with query conditions reads cookies (`query_sources`).
    pub(crate) any_cookie_source: bool,
    /// Some key or exemption reads `request.cf` (a `country` or `asn` key
    /// part, an `asns` or `verified_bots` exemption, top-level or per
    /// rule): otherwise the Worker never reads it.
    pub(crate) reads_cf: bool,
    /// Some rule has a `trusted_device`, whose cookies expire: the plan
    /// reads the clock, so it is never replayed ([`crate::pipeline::memo`]).
    pub(crate) reads_clock: bool,
}

impl ConfigFacts {
    /// The facts of `rules` under the top-level exemptions `exempt`.
    pub(crate) fn of(rules: &[Rule], exempt: &Exemptions) -> ConfigFacts {
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
    pub(crate) fn reads_body_parameters(&self) -> bool {
        self.any_query_conditions || self.any_method_restriction
    }
}

/// What the Worker does with requests when its config is invalid: read
/// from the top-level `on_invalid_config` of a config that fails to parse
/// (`"allow"`: forward everything unlimited; `"deny"`, the default and
/// the reading of anything else: answer 503). The trade-off is an outage
/// against no limiting at all; `deny` is the default because a limiter that
/// silently stops limiting is the failure nobody notices.
pub(crate) fn on_invalid_config(value: &Value) -> FailPolicy {
    let named = value.get("on_invalid_config").and_then(Value::as_str).and_then(FailPolicy::from_name);
    named.unwrap_or(FailPolicy::Deny)
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
        match self.rule.as_str() {
            "" => write!(f, "field `{}`: {}", self.field, self.message),
            rule => write!(f, "rule `{rule}`, field `{}`: {}", self.field, self.message),
        }
    }
}

impl Config {
    /// Parses the config from its JSON form (what `env.TOLLGATE` holds, or a
    /// TOML table converted to JSON). Returns every error found.
    ///
    /// ```
    /// use serde_json::json;
    /// use tollgate::Config;
    ///
    /// // A typo in a field's value: the error names the rule and the field, once.
    /// let errors = Config::from_json(&json!({ "rules": [
    ///     { "name": "login", "path": "/login", "limits": [{ "requests": 5, "window": "1 fortnight" }] },
    /// ] })).unwrap_err();
    /// assert_eq!(errors.len(), 1);
    /// assert_eq!(errors[0].rule.as_deref(), Some("login"));
    /// assert!(errors[0].to_string().starts_with("rule `login`, field `limits"), "{}", errors[0]);
    /// ```
    pub fn from_json(value: &Value) -> Result<Config, Vec<ConfigError>> {
        let Some(table) = value.as_object() else {
            return Err(vec![top_error("TOLLGATE", "must be a table with a `rules` list")]);
        };
        let admin_lockout = admin_lockout_rule().map_err(|e| vec![top_error("(built-in admin lockout)", &e.to_string())])?;
        let mut config = Config {
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
            rules: Vec::new(),
            admin_prefix: DEFAULT_ADMIN_PREFIX.to_string(),
            admin_access: None,
            body_limit: DEFAULT_BODY_LIMIT,
            memory_budget: DEFAULT_MEMORY_BUDGET,
            body_timeout_ms: DEFAULT_BODY_TIMEOUT_MS,
            blocked_cache_capacity: crate::count::blocked::DEFAULT_CAPACITY,
            log_episode_ms: DEFAULT_LOG_EPISODE_MS,
            metrics_interval_ms: DEFAULT_METRICS_INTERVAL_MS,
            on_invalid_config: FailPolicy::Deny,
            admin_lockout,
            facts: ConfigFacts::default(),
            exempt: Exemptions::default(),
            upstream: crate::config::upstream::Upstream::Origin,
            respelled: Vec::new(),
            prices: Vec::new(),
        };
        let mut errors = Errors { rule: None, list: Vec::new() };
        // Before the rules, which name them (fields are read in any order).
        config.prices = price_fields::read_prices(table.get("prices"), &mut errors);
        read_table(table, TOP_FIELDS, &mut config, &mut errors, "");
        config.facts = ConfigFacts::of(&config.rules, &config.exempt);
        for rule in config.rules.iter_mut().filter(|r| config.ipv6_prefix != DEFAULT_IPV6_PREFIX && !r.overrides.is_empty()) {
            let (parts, case_insensitive) = (rule.spec.key.clone(), rule.spec.case_insensitive);
            for e in rule.spec.overrides.resolve(&parts, case_insensitive, config.ipv6_prefix) {
                let field = if e.value.is_empty() { "overrides".to_string() } else { format!("overrides.{}", e.value) };
                errors.list.push(ConfigError { rule: Some(rule.name.clone()), field, message: e.message });
            }
        }
        if table.contains_key("memory_budget") && table.contains_key("upload_budget") {
            errors.list.push(top_error("upload_budget", "the older name of memory_budget: give only memory_budget"));
        }
        bodies_fit(&config, &mut errors);
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
    ///
    /// ```
    /// use tollgate::Config;
    ///
    /// // Shadow mode never blocks, so failing closed is ignored: said, not refused.
    /// let config = Config::from_json_str(r#"{ "rules": [{ "name": "trial", "path": "/api/*",
    ///     "action": "log", "on_error": "deny", "limits": [{ "requests": 10, "window": "1m" }] }] }"#)?;
    /// let warnings = config.warnings();
    /// assert_eq!(warnings.len(), 1);
    /// assert_eq!((warnings[0].rule.as_str(), warnings[0].field), ("trial", "on_error"));
    /// # Ok::<(), Vec<tollgate::ConfigError>>(())
    /// ```
    pub fn warnings(&self) -> Vec<ConfigWarning> {
        let mut out = self.respelled.clone();
        out.extend(self.rules.iter().flat_map(checks::warnings));
        out.extend(checks::client_chosen(&self.rules));
        let named = |name: &str| self.rules.iter().any(|r| r.usage.as_ref().and_then(|u| u.price.as_ref()).is_some_and(|p| p.name.as_deref() == Some(name)));
        for (name, _) in self.prices.iter().filter(|(name, _)| !named(name)) {
            out.push(ConfigWarning { rule: String::new(), field: "prices", message: format!("the table `{name}` is named by no rule's metering.price: it prices nothing") });
        }
        out
    }

    /// Parses the config from JSON text; text that is not JSON is one error
    /// of the `TOLLGATE` field.
    ///
    /// ```
    /// let errors = tollgate::Config::from_json_str("{ rules: [] }").unwrap_err();
    /// assert_eq!((errors.len(), errors[0].rule.as_deref(), errors[0].field.as_str()), (1, None, "TOLLGATE"));
    /// ```
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

/// Every rule's `upload_buffer`, and `body_limit`, within a client's
/// share of `memory_budget` at what each byte held costs
/// ([`MEMORY_PER_UPLOAD_BYTE`], [`MEMORY_PER_READ_BYTE`]): a larger body
/// could never be held (it would stream, or go unread, whatever the
/// buffer or the limit says).
fn bodies_fit(config: &Config, errors: &mut Errors) {
    let share = config.memory_budget / MEMORY_CLIENT_SHARES;
    let over = |bytes: u32, per_byte: u32| {
        (bytes > share / per_byte).then(|| {
            format!(
                "{bytes} bytes is over a client's share of memory_budget: {} ({share} bytes of isolate memory, a quarter of {}, at {per_byte} bytes held per byte); lower it, or raise memory_budget (at most {MAX_MEMORY_BUDGET})",
                share / per_byte,
                config.memory_budget
            )
        })
    };
    for rule in &config.rules {
        if let Some(message) = over(rule.upload.buffer, MEMORY_PER_UPLOAD_BYTE) {
            errors.list.push(ConfigError { rule: Some(rule.name.clone()), field: "counting.upload_buffer".into(), message });
        }
    }
    if let Some(message) = over(config.body_limit, MEMORY_PER_READ_BYTE) {
        errors.list.push(top_error("body_limit", &message));
    }
}

/// What `tollgate check` says of the isolate's memory budget for a config
/// whose rules hold bodies (a body read for keys or form parameters, an
/// upload received before a reserve): the arithmetic of
/// [`crate::pipeline::upload`], in the config's own numbers, one line.
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) fn memory_note(config: &Config) -> Option<String> {
    let reads = config.facts.reads_body_parameters() || config.rules.iter().any(Rule::reads_body);
    let holding = |r: &&Rule| r.action == crate::config::policy::Action::Block && r.reserves() && r.upload.buffer > 0;
    let upload = config.rules.iter().filter(holding).map(|r| r.upload.buffer).max();
    let relays = config.rules.iter().any(|r| r.concurrency.is_some());
    let watches = relays || config.rules.iter().any(|r| r.usage.as_ref().is_some_and(|u| matches!(u.source, crate::config::cost::UsageSource::Body(_))));
    if !reads && upload.is_none() && !relays && !watches {
        return None;
    }
    let (budget, share) = (u64::from(config.memory_budget), u64::from(config.memory_budget / MEMORY_CLIENT_SHARES));
    let network = u64::from(config.memory_budget / crate::config::policy::MEMORY_NETWORK_SHARES);
    let held = |bytes: u32, per_byte: u32| u64::from(bytes) * u64::from(per_byte);
    let mut parts = Vec::new();
    if reads {
        let each = held(config.body_limit, MEMORY_PER_READ_BYTE);
        let seconds = crate::config::headers::seconds_ceil(u64::from(config.body_timeout_ms));
        parts.push(format!("{} body reads of {} ({} held) at once, {} a client, {seconds} s each", budget / each, size(u64::from(config.body_limit)), size(each), share / each));
    }
    if let Some(buffer) = upload {
        let each = held(buffer, MEMORY_PER_UPLOAD_BYTE);
        parts.push(format!("{} uploads of {} ({} held) at once, {} a client", budget / each, size(u64::from(buffer)), size(each), share / each));
    }
    if relays {
        let per = u64::from(crate::config::policy::MEMORY_PER_RELAY_BYTE);
        let message = crate::config::policy::MEMORY_PER_RELAY_MESSAGE;
        parts.push(format!("{} of relayed WebSocket messages not yet read, {} a client, {} more a message", size(budget / per), size(share / per), size(u64::from(message))));
    }
    if watches {
        use crate::config::policy::{ANSWER_AHEAD, MEMORY_PER_AHEAD_BYTE, MEMORY_PER_ANSWER_BEHIND};
        let (each, behind) = (u64::from(ANSWER_AHEAD) * u64::from(MEMORY_PER_AHEAD_BYTE), u64::from(MEMORY_PER_ANSWER_BEHIND));
        let (ahead, tee) = (size(u64::from(ANSWER_AHEAD)), size(behind));
        parts.push(format!("{} watched answers {ahead} ahead of their clients ({} held) at once, {} a client, {} a client read behind ({tee} held; past that, less ahead, down to none)", budget / each, size(each), share / each, share / behind));
    }
    // The isolate's 128 MB (10^6 bytes, as Cloudflare states it).
    let rest = 128_000_000_u64.saturating_sub(budget) / 1_000_000;
    let (v4, v6) = (crate::config::policy::NETWORK_V4_PREFIX, crate::config::policy::NETWORK_V6_PREFIX);
    Some(format!("memory_budget {} ({} a client, {} a network: an IPv4 /{v4}, an IPv6 /{v6}): {}; about {rest} MB of the isolate's 128 MB left for everything else", size(budget), size(share), size(network), parts.join("; ")))
}

/// `bytes` in the largest whole binary unit (`32 MiB`, `16 KiB`, `1000 B`).
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1_048_576 && b % 1_048_576 == 0 => format!("{} MiB", b / 1_048_576),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b / 1024),
        b => format!("{b} B"),
    }
}

/// The built-in admin lockout rule: a config rule's defaults, with what
/// [`lockout::lockout_spec`] sets.
fn admin_lockout_rule() -> Result<Rule, crate::config::rules::PatternError> {
    let mut spec = RuleDraft::new().spec;
    lockout::lockout_spec(&mut spec);
    Rule::compile(spec)
}

/// A duration from 1s to 1h, in ms (`log_episode`, `metrics_interval`).
fn second_to_hour(i: &mut Input<'_>) -> Option<i64> {
    let ms = i64::try_from(i.duration("\"1m\"")?.get()).ok().filter(|ms| (1_000..=3_600_000).contains(ms));
    if ms.is_none() {
        i.report("must be from 1s to 1h");
    }
    ms
}

/// A duration from 1s to 10m, in ms (`body_timeout`).
fn second_to_ten_minutes(i: &mut Input<'_>) -> Option<u32> {
    let ms = u32::try_from(i.duration("\"10s\"")?.get()).ok().filter(|ms| (1_000..=MAX_BODY_TIMEOUT_MS).contains(ms));
    if ms.is_none() {
        i.report("must be from 1s to 10m");
    }
    ms
}

/// The top level of the `TOLLGATE` var.
const TOP_FIELDS: &[Field<Config>] = &[
    Field::optional("ipv6_prefix", Shape::Integer(1, 128), "How many leading bits of an IPv6 client address make one `ip` key (default 64: one subscriber's /64).", |c, i| {
        if let Some(prefix) = i.number(1..=128, "whole number") {
            c.ipv6_prefix = prefix;
        }
    }),
    Field::required("rules", "missing: list at least one rule", Shape::List(&Shape::Table(rule_fields::rule_infos), 0), "The rate-limit rules, matched in order; every matching rule is checked.", |c, i| {
        if let Some((rules, respelled)) = read_rules(i, &c.prices) {
            c.rules = rules;
            c.respelled = respelled;
        }
    }),
    // Read first, by `Config::from_json`: the rules name them.
    Field::optional("prices", Shape::Map(&Shape::Table(price_fields::table_infos)), "Price tables shared by name: { openai = { currency = \"USD\", models = { \"gpt-4o-mini*\" = { input = 0.15, output = 0.6 } } } }, each as a rule's metering.price, which names one: price = \"openai\".", |_, _| {}),
    Field::optional("admin_prefix", Shape::Text("^/.*[^/]$"), "Path prefix of the admin API, active only with the TOLLGATE_ADMIN_TOKEN secret set or admin_access (default \"/.tollgate\"; a canonical path, no trailing slash).", |c, i| {
        let message = "must be a canonical path such as \"/.tollgate\" (no trailing slash)";
        if let Some(prefix) = i.text(valid_admin_prefix, message) {
            c.admin_prefix = prefix;
        }
    }),
    Field::optional("admin_access", Shape::Table(access::access_infos), "Cloudflare Access in front of the console and the admin API: { team_domain, audience }. A request under admin_prefix whose Cf-Access-Jwt-Assertion holds a valid token of that application is the operator's (the admin API is then on even without TOLLGATE_ADMIN_TOKEN, which stays for API clients and the CLI).", |c, i| {
        c.admin_access = access::read_access(i);
    }),
    Field::optional("body_limit", Shape::Integer(1, 1_048_576), "Most bytes of a request body read for `body:` keys and form parameters (default 16384).", |c, i| {
        if let Some(bytes) = i.number(1..=1_048_576, "number of bytes") {
            c.body_limit = bytes;
        }
    }),
    Field::optional("memory_budget", Shape::Integer(MIN_MEMORY_BUDGET as u64, MAX_MEMORY_BUDGET as u64), "Most bytes of isolate memory tollgate holds of request bodies (uploads received before a failures-only rule's check, bodies read for body: keys and form parameters) across each isolate's requests, and of relayed messages and watched answers, counted as measured; one client (its address) at most a quarter, one network (IPv4 /24, IPv6 /48) at most half. Past it an upload streams under upload_timeout, a body is not read (as one over body_limit), a relayed session is closed and an answer is watched with less read-ahead (default 33554432, 32 MiB; 2 MiB to 64 MiB of the isolate's 128 MB).", |c, i| {
        if let Some(bytes) = i.number(u64::from(MIN_MEMORY_BUDGET)..=u64::from(MAX_MEMORY_BUDGET), "number of bytes") {
            c.memory_budget = bytes;
        }
    }),
    Field::optional("upload_budget", Shape::Integer(MIN_MEMORY_BUDGET as u64, MAX_MEMORY_BUDGET as u64), "The older name of memory_budget (the same bytes of isolate memory); give only one.", |c, i| {
        if let Some(bytes) = i.number(u64::from(MIN_MEMORY_BUDGET)..=u64::from(MAX_MEMORY_BUDGET), "number of bytes") {
            c.memory_budget = bytes;
        }
    }),
    Field::optional("body_timeout", Shape::Duration, "The longest a body read for body: keys and form parameters may take; a client still sending then is answered 408 and its hold in memory_budget given back (default \"10s\"; 1s to 10m).", |c, i| {
        if let Some(ms) = second_to_ten_minutes(i) {
            c.body_timeout_ms = ms;
        }
    }),
    Field::optional("blocked_cache_capacity", Shape::Integer(1, 1_000_000), "Most (rule, key) entries in each isolate's blocked-until cache (default 10000).", |c, i| {
        if let Some(entries) = i.number(1..=1_000_000, "number of entries") {
            c.blocked_cache_capacity = entries;
        }
    }),
    Field::optional("log_episode", Shape::Duration, "How long one log episode of a (rule, key) lasts: its first block, shadow_block, counter_error or exempt line is written, the repeats are counted into a summary (default \"1m\"; 1s to 1h).", |c, i| {
        if let Some(ms) = second_to_hour(i) {
            c.log_episode_ms = ms;
        }
    }),
    Field::optional("metrics_interval", Shape::Duration, "How often each isolate writes the allowed totals of rules whose metrics are \"limited\": one allowed_total data point per rule per interval (default \"1m\"; 1s to 1h).", |c, i| {
        if let Some(ms) = second_to_hour(i) {
            c.metrics_interval_ms = ms;
        }
    }),
    Field::optional(crate::config::upstream::FIELD, Shape::Custom(crate::config::upstream::schema), "Where allowed requests go: \"origin\" (the default: the zone's origin) or { service = \"BINDING\" } (a [[services]] binding).", |c, i| match crate::config::upstream::read(i.value) {
        Ok(upstream) => c.upstream = upstream,
        Err(message) => i.report(message),
    }),
    Field::optional("on_invalid_config", Shape::Names(FailPolicy::names), "What the Worker does when this config turns out invalid at runtime: \"deny\" (the default: 503 to everything) or \"allow\" (forward everything, unlimited).", |c, i| {
        if let Some(policy) = i.choice(Some(FailPolicy::Deny)) {
            c.on_invalid_config = policy;
        }
    }),
    Field::optional("exempt", Shape::Table(exempt_fields::exempt_infos), "Requests no rule counts or limits: { ips, asns, verified_bots, header }.", |c, i| c.exempt = read_exempt(i)),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::policy::{Counting, MissingKey, SuccessAction, UploadLimits};
    use crate::count::lease::{LeaseMode, LeaseSettings, OFF_TWO_PHASE};
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
        assert_eq!(errors(json!({"rules": [], "log_episode": "500ms"})), ["field `log_episode`: must be from 1s to 1h"]);
        assert_eq!(
            Config::from_json(&json!({"rules": [], "log_episode": "5s"})).map(|c| c.log_episode_ms).ok(),
            Some(5_000)
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
            (json!({"counting": {"mode": "response", "statuses": [401, 700]}}), "counting.statuses"),
            (json!({"counting": {"mode": "response", "statuses": []}}), "counting.statuses"),
            (json!({"clear_on_success": true, "key": ["body:email"]}), "on_success"),
            (json!({"clear_on_success": true, "count_statuses": [401], "key": ["ip", "body:email"]}), "on_success"),
            (json!({"clear_on_success": "yes"}), "clear_on_success"),
            (json!({"ratelimit_headers": 1}), "ratelimit_headers"),
            (json!({"header": {"x-plan": 1}}), "header.x-plan"),
            (json!({"header": {"bad name": "x"}}), "header.bad name"),
            (json!({"header": "x-plan"}), "header"),
            (json!({"algorithm": "token_bucket"}), "algorithm"),
            (json!({"limits": []}), "limits"),
            (json!({"limits": vec![json!({"requests": 1, "window": "1s"}); 9]}), "limits"),
            (json!({"key": ["body:email"], "fallback_key": ["ip"], "count_statuses": [401], "clear_on_success": true}), "on_success"),
            (json!({"key": ["body:email"], "on_success": "forget", "counting": {"mode": "response", "statuses": [401]}}), "on_success"),
            (json!({"key": ["ip"], "on_success": "decrement", "counting": {"mode": "response", "statuses": [401]}}), "on_success"),
            (json!({"key": ["body:email"], "on_success": "clear"}), "on_success"),
            (json!({"key": ["body:email"], "count_statuses": [401], "on_success": "clear", "clear_on_success": true}), "clear_on_success"),
            (json!({"key": ["body:email"], "success_statuses": [200], "counting": {"mode": "response", "statuses": [401]}}), "success_statuses"),
            (json!({"key": ["body:email"], "on_success": "clear", "success_statuses": [], "counting": {"mode": "response", "statuses": [401]}}), "success_statuses"),
            (json!({"key": ["body:email"], "on_success": "clear", "success_statuses": [200, 450], "counting": {"mode": "response", "statuses": [401]}}), "success_statuses"),
            (json!({"key": ["body:email"], "on_success": "clear", "counting": {"mode": "response", "statuses": [200]}}), "success_statuses"),
            (json!({"key": ["body:email"], "success_identity_header": "x-user", "counting": {"mode": "response", "statuses": [401]}}), "success_identity_header"),
            (json!({"key": ["body:email"], "on_success": "clear", "success_identity_header": "x user", "counting": {"mode": "response", "statuses": [401]}}), "success_identity_header"),
            (json!({"key": ["body:email", "path:tenant"], "path": "/t/:tenant", "on_success": "clear", "success_identity_header": "x-user", "counting": {"mode": "response", "statuses": [401]}}), "success_identity_header"),
            (json!({"counting": {"mode": "request", "reservation_ttl": "30s"}}), "counting.reservation_ttl"),
            (json!({"counting": {"mode": "response", "statuses": [200], "reservation_ttl": "4s"}}), "counting.reservation_ttl"),
            (json!({"timeout": "1s", "counting": {"mode": "response", "statuses": [200], "reservation_ttl": "2s"}}), "counting.reservation_ttl"),
            (json!({"counting": {"mode": "response", "statuses": [200], "reservation_ttl": "2h"}}), "counting.reservation_ttl"),
            (json!({"counting": {"mode": "response", "statuses": [200], "reservation_ttl": 30}}), "counting.reservation_ttl"),
            (json!({"counting": {"mode": "request", "upload_buffer": 1024}}), "counting.upload_buffer"),
            (json!({"counting": {"mode": "request", "upload_timeout": "5s"}}), "counting.upload_timeout"),
            (json!({"counting": {"mode": "response", "statuses": [200], "upload_buffer": -1}}), "counting.upload_buffer"),
            (json!({"counting": {"mode": "response", "statuses": [200], "upload_buffer": 16777217}}), "counting.upload_buffer"),
            (json!({"counting": {"mode": "response", "statuses": [200], "upload_buffer": "1MB"}}), "counting.upload_buffer"),
            (json!({"counting": {"mode": "response", "statuses": [200], "upload_buffer": 8388609}}), "counting.upload_buffer"),
            (json!({"counting": {"mode": "response", "statuses": [200], "upload_timeout": "11m"}}), "counting.upload_timeout"),
            (json!({"counting": {"mode": "response", "statuses": [200], "upload_timeout": 10}}), "counting.upload_timeout"),
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
            (json!({"penalty": "59s"}), "penalty"),
            (json!({"penalty": "10m", "limits": [{"requests": 1, "window": "1s"}, {"requests": 10, "window": "1h"}]}), "penalty"),
            (json!({"penalty": "10m", "overrides": {"1.2.3.4": [{"requests": 1, "window": "1d"}]}}), "penalty"),
            (json!({"penalty": "0s"}), "penalty"),
            (json!({"penalty": "32d"}), "penalty"),
            (json!({"penalty": true}), "penalty"),
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
        assert_eq!(mode(json!({"limits": big, "counting": {"mode": "response", "statuses": [401]}})), LeaseMode::ForcedOff(OFF_TWO_PHASE));
        let clears = json!({"limits": big, "key": ["body:email"], "counting": {"mode": "response", "statuses": [401]}, "on_success": "clear"});
        assert!(matches!(mode(clears), LeaseMode::ForcedOff(_)));
        assert!(mode(json!({"limits": big, "lease": "off"})).describe().starts_with("off"));
        assert!(mode(json!({"limits": big, "counting": {"mode": "response", "statuses": [401]}})).describe().contains("mode = \"response\""));
    }

    #[test]
    fn failures_only_and_fallback_parse() {
        // The 0.2.0 spelling, kept here to show it still reads, one warning
        // per old field (`spelling`).
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
        let respelled: Vec<&str> = config.respelled.iter().map(|w| w.field).collect();
        assert_eq!(respelled, ["count_statuses", "clear_on_success"]);
        assert!(config.warnings().iter().any(|w| w.field == "success_identity_header"), "and the warnings of the rule itself");
    }

    #[test]
    fn success_and_reservation_fields_parse() {
        let config = Config::from_json(&rule(json!({
            "key": ["body:email"], "counting": {"mode": "response", "statuses": [401], "reservation_ttl": "1100ms"}, "on_success": "decrement", "success_statuses": [200, 302],
            "success_identity_header": "X-Authenticated-User", "timeout": "500ms"
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
        let given = json!({"counting": {"mode": "response", "statuses": [200], "upload_buffer": 0, "upload_timeout": "1500ms"}});
        assert_eq!(limits(given), UploadLimits { buffer: 0, timeout_ms: 1_500 }, "0: every body streams under the deadline");
        let ttl = Config::from_json(&rule(json!({"counting": {"mode": "response", "statuses": [200], "upload_timeout": "30s"}}))).unwrap().rules[0].reservation_ttl_ms;
        assert_eq!(ttl, 134_000, "the default reservation_ttl covers the upload_timeout");
        let config = Config::from_json(&rule(json!({"key": ["body:email"], "counting": {"mode": "response", "statuses": [401]}}))).unwrap();
        assert_eq!(config.rules[0].on_success, None);
    }

    /// The isolate's memory budget (in
    /// bytes of memory, 2 per body byte held), and a buffer or body limit
    /// no client's share of it could hold.
    #[test]
    fn memory_budget_bounds_every_upload_buffer_and_the_body_limit() {
        let with = |field: &str, budget: Value, buffer: u32| {
            let mut c = rule(json!({"counting": {"mode": "response", "statuses": [200], "upload_buffer": buffer}}));
            c[field] = budget;
            c
        };
        let config = Config::from_json(&rule(json!({}))).unwrap();
        assert_eq!((config.memory_budget, config.body_timeout_ms), (32 * 1_048_576, 10_000), "32 MiB, 10 s by default");
        let largest = Config::from_json(&with("memory_budget", json!(64 * 1_048_576), 8 * 1_048_576)).unwrap();
        assert_eq!((largest.memory_budget, largest.rules[0].upload.buffer), (64 * 1_048_576, 8 * 1_048_576), "8 MiB fits a 64 MiB budget's quarter, held twice");
        let older = Config::from_json(&with("upload_budget", json!(48 * 1_048_576), 1024)).unwrap();
        assert_eq!(older.memory_budget, 48 * 1_048_576, "upload_budget is the older name");
        let mut both = with("memory_budget", json!(64 * 1_048_576), 1024);
        both["upload_budget"] = json!(64 * 1_048_576);
        assert_eq!(errors(both), ["field `upload_budget`: the older name of memory_budget: give only memory_budget"]);
        assert_eq!(
            errors(with("upload_budget", json!(64 * 1_048_576), 16 * 1_048_576)),
            ["rule `r`, field `counting.upload_buffer`: 16777216 bytes is over a client's share of memory_budget: 8388608 (16777216 bytes of isolate memory, a quarter of 67108864, at 2 bytes held per byte); lower it, or raise memory_budget (at most 67108864)"],
            "a config the old payload budget took (six such uploads grew workerd by 104 MB)"
        );
        assert_eq!(
            errors(with("memory_budget", json!(32 * 1_048_576), 8 * 1_048_576)),
            ["rule `r`, field `counting.upload_buffer`: 8388608 bytes is over a client's share of memory_budget: 4194304 (8388608 bytes of isolate memory, a quarter of 33554432, at 2 bytes held per byte); lower it, or raise memory_budget (at most 67108864)"]
        );
        for bad in [json!(2 * 1_048_576 - 1), json!(64 * 1_048_576 + 1), json!("32MiB"), json!(-1)] {
            assert_eq!(errors(with("memory_budget", bad.clone(), 1024)), ["field `memory_budget`: must be a number of bytes from 2097152 to 67108864"], "{bad}");
        }
        assert!(errors(with("memory_budget", json!(2 * 1_048_576), 262_144)).is_empty(), "the smallest budget still holds the default buffer");
        let mut small = with("memory_budget", json!(2 * 1_048_576), 1024);
        small["body_limit"] = json!(1_048_576);
        assert_eq!(
            errors(small),
            ["field `body_limit`: 1048576 bytes is over a client's share of memory_budget: 174762 (524288 bytes of isolate memory, a quarter of 2097152, at 3 bytes held per byte); lower it, or raise memory_budget (at most 67108864)"]
        );
        let mut big = with("memory_budget", json!(32 * 1_048_576), 262_144);
        big["body_limit"] = json!(1_048_576);
        big["rules"][0]["key"] = json!(["body:user"]);
        assert_eq!(
            memory_note(&Config::from_json(&big).unwrap()).as_deref(),
            Some("memory_budget 32 MiB (8 MiB a client, 16 MiB a network: an IPv4 /24, an IPv6 /48): 10 body reads of 1 MiB (3 MiB held) at once, 2 a client, 10 s each; 64 uploads of 256 KiB (512 KiB held) at once, 16 a client; about 94 MB of the isolate's 128 MB left for everything else"),
            "check's arithmetic"
        );
        assert_eq!(memory_note(&Config::from_json(&rule(json!({}))).unwrap()), None, "no rule holds a body");
        let mut sessions = rule(json!({}));
        sessions["memory_budget"] = json!(64 * 1_048_576);
        sessions["rules"][0]["concurrency"] = json!(4);
        assert_eq!(
            memory_note(&Config::from_json(&sessions).unwrap()).as_deref(),
            Some("memory_budget 64 MiB (16 MiB a client, 32 MiB a network: an IPv4 /24, an IPv6 /48): 128 uploads of 256 KiB (512 KiB held) at once, 32 a client; 64 MiB of relayed WebSocket messages not yet read, 16 MiB a client, 1536 B more a message; 512 watched answers 64 KiB ahead of their clients (128 KiB held) at once, 128 a client, 8 a client read behind (2 MiB held; past that, less ahead, down to none); about 60 MB of the isolate's 128 MB left for everything else"),
            "a concurrency rule's relay"
        );
        let mut slow = rule(json!({}));
        slow["body_timeout"] = json!("30s");
        assert_eq!(Config::from_json(&slow).unwrap().body_timeout_ms, 30_000);
        for bad in ["500ms", "11m", "soon"] {
            slow["body_timeout"] = json!(bad);
            assert_eq!(errors(slow.clone()).len(), 1, "{bad}");
        }
    }

    /// A success that anyone could forge is worth a warning, not an error:
    /// the rule still works for origins whose logins cannot be confused.
    #[test]
    fn forgeable_successes_are_warned_about() {
        let config = Config::from_json(&json!({ "rules": [
            { "name": "clear", "path": "/login", "key": ["body:email"], "counting": { "mode": "response", "statuses": [401] }, "on_success": "clear",
              "limits": [{ "requests": 10, "window": "15m" }] },
            { "name": "lower", "path": "/login", "key": ["body:email"], "counting": { "mode": "response", "statuses": [401] }, "on_success": "decrement",
              "limits": [{ "requests": 10, "window": "15m" }] },
            { "name": "quota", "path": "/q", "counting": { "mode": "response", "statuses": [200] }, "limits": [{ "requests": 10, "window": "1d" }] },
        ]}))
        .unwrap();
        let warnings: Vec<String> = config.warnings().iter().map(ToString::to_string).collect();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].starts_with("rule `clear`, field `success_identity_header`: not set: "), "{}", warnings[0]);
        assert!(warnings[0].contains("whoever the origin logged in"), "{}", warnings[0]);
        assert!(warnings[1].starts_with("rule `lower`, field `success_identity_header`: not set: "), "{}", warnings[1]);
        assert!(warnings[1].contains("one failure"), "{}", warnings[1]);
    }

    /// The default reject on `/api/*` keyed by a header
    /// turns every header-less call into 400: `check` says so, unless the
    /// policy was written, the path is narrow or the key cannot be missing.
    #[test]
    fn a_default_reject_on_a_broad_path_is_warned_about() {
        let config = Config::from_json(&json!({ "rules": [
            { "name": "api", "path": "/api/*", "key": ["header:x-api-key"], "limits": [{ "requests": 10, "window": "1m" }] },
            { "name": "meant", "path": "/api/*", "key": ["header:x-api-key"], "on_missing_key": "reject", "limits": [{ "requests": 10, "window": "1m" }] },
            { "name": "fallback", "path": "/api/*", "key": ["header:x-api-key"], "fallback_key": ["ip"], "limits": [{ "requests": 10, "window": "1m" }] },
            { "name": "narrow", "path": "/api/export", "key": ["header:x-api-key"], "limits": [{ "requests": 10, "window": "1m" }] },
            { "name": "by-ip", "path": "/*", "key": ["ip"], "limits": [{ "requests": 10, "window": "1m" }] },
        ]}))
        .unwrap();
        let warnings: Vec<String> = config.warnings().iter().map(ToString::to_string).collect();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with("rule `api`, field `on_missing_key`: not set, so \"reject\": every request to `/api/*` without `header:x-api-key` is answered 400"), "{}", warnings[0]);
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
    fn a_penalty_of_at_least_the_longest_window_is_read_and_sent_with_the_calls_that_count() {
        let config = Config::from_json(&rule(json!({"penalty": "10m"}))).unwrap();
        let r = &config.rules[0];
        assert_eq!(r.penalty_ms, Some(600_000));
        let err = errors(rule(json!({"penalty": "30s"})));
        assert_eq!(err, vec!["rule `r`, field `penalty`: must be at least the rule's longest window (60000 ms)".to_string()], "the rule and field, once");
        assert_eq!(Config::from_json(&rule(json!({"penalty": "60s"}))).unwrap().rules[0].penalty_ms, Some(60_000), "equal to the window");
        use crate::count::protocol::Op;
        for op in [Op::Hit, Op::Check, Op::Reserve, Op::Lease, Op::Status] {
            assert_eq!(r.call_for(op, "k").penalty_ms, Some(600_000), "{op:?}");
        }
        for op in [Op::Commit, Op::Release, Op::Forgive, Op::Clear, Op::Record, Op::Refund, Op::Reset, Op::Probe] {
            assert_eq!(r.call_for(op, "k").penalty_ms, None, "{op:?}: settlements, resets and probes carry none");
        }
        let plain = Config::from_json(&rule(json!({}))).unwrap();
        assert_eq!(plain.rules[0].call_for(Op::Hit, "k").penalty_ms, None);
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
        assert!(clock(rule(json!({ "key": ["body:user"], "methods": ["POST"], "counting": { "mode": "response", "statuses": [401] }, "on_success": "decrement",
            "trusted_device": { "secret": "DEVICE_KEY", "cookie": "dev" } }))));
    }

    #[test]
    fn the_sliding_log_takes_a_daily_budget_of_a_billion() {
        let c = Config::from_json(&rule(json!({ "limits": [{ "requests": 1_000_000_000u32, "window": "1d" }, { "requests": 50_000_000, "window": "1h" }] })))
            .unwrap();
        assert_eq!(c.rules[0].algorithm, crate::count::protocol::Algorithm::SlidingLog, "the default, no longer sent to GCRA");
        assert_eq!(c.rules[0].limits[0].requests.get(), 1_000_000_000);
        assert!(c.warnings().iter().all(|w| !w.to_string().contains("gcra")), "{:?}", c.warnings());
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
        for (field, says) in [("overrides.x", "not a value"), ("overrides.1[0].requests", "whole number"), ("overrides.3", "same key")] {
            assert!(bad.iter().any(|e| e.contains(&format!("field `{field}`")) && e.contains(says)), "{field}: {bad:?}");
        }
        assert!(!bad.iter().any(|e| e.contains("overrides.2")), "a sliding log takes an override of any size: {bad:?}");
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
    fn calendar_windows_parse_and_a_malformed_one_names_its_rule_and_field_once() {
        let c = Config::from_json(&rule(json!({ "limits": [{ "requests": 10, "window": "1m" },
            { "requests": 300, "window": "day", "time_zone": "Asia/Tokyo" }] })))
        .unwrap();
        let day = c.rules[0].limits[1];
        assert_eq!(day.calendar.map(|c| c.spelling()), Some("day@Asia/Tokyo".to_string()));
        assert_eq!(c.rules[0].limits[0].calendar, None);
        for (limit, field, says) in [
            (json!({ "requests": 5, "window": "month" }), "limits[0].time_zone", "needs time_zone"),
            (json!({ "requests": 5, "window": "1d", "time_zone": "UTC" }), "limits[0].time_zone", "this window is rolling"),
            (json!({ "requests": 5, "window": "day", "time_zone": "Europe/Atlantis" }), "limits[0].time_zone", "unknown time zone `Europe/Atlantis`"),
            (json!({ "requests": 5, "window": "fortnight", "time_zone": "UTC" }), "limits[0].window", "\"day\", \"week\" or \"month\""),
        ] {
            let bad = errors(rule(json!({ "limits": [limit] })));
            assert_eq!(bad.len(), 1, "{bad:?}");
            assert!(bad[0].contains("rule `r`") && bad[0].contains(&format!("field `{field}`")) && bad[0].contains(says), "{bad:?}");
        }
        let gcra = errors(rule(json!({ "algorithm": "gcra", "limits": [{ "requests": 5, "window": "week", "time_zone": "UTC" }] })));
        assert_eq!(gcra.len(), 1, "{gcra:?}");
        assert!(gcra[0].contains("field `algorithm`") && gcra[0].contains("gcra has no calendar"), "{gcra:?}");
        // A penalty may outlast a calendar month (31 days, not its horizon).
        let month = json!({ "penalty": "31d", "limits": [{ "requests": 5, "window": "month", "time_zone": "UTC" }] });
        assert_eq!(errors(rule(month)), Vec::<String>::new());
        let short = errors(rule(json!({ "penalty": "12h", "limits": [{ "requests": 5, "window": "day", "time_zone": "UTC" }] })));
        assert!(short.len() == 1 && short[0].contains("field `penalty`") && short[0].contains("86400000 ms"), "{short:?}");
        // An override may be a calendar window too.
        let o = Config::from_json(&rule(json!({ "key": ["header:x-school"], "overrides": {
            "big": [{ "requests": 3000, "window": "day", "time_zone": "Europe/Paris" }] } }))).unwrap();
        assert_eq!(o.rules[0].limits_for("header:x-school=big")[0].calendar.map(|c| c.spelling()), Some("day@Europe/Paris".to_string()));
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
