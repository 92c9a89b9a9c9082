//! Rules and matching: which rules a canonical request falls under, and why.
//!
//! URLPatterns are compiled once, when the config is parsed (once per
//! isolate), never per request. Matching runs the compiled pathname matcher
//! directly on the canonical path from [`crate::request::canon`].

use crate::request::canon::{CanonicalQuery, Sources};
use crate::request::key::KeyPart;
use crate::config::policy::{Action, Counting, FailPolicy, MissingKey, OnSuccess, TrustedDevice};
use crate::count::window::Limit;
use std::fmt;
use std::ops::Range;
use urlpattern::matcher::{InnerMatcher, Matcher};
use urlpattern::regexp::RegExp;
use urlpattern::{UrlPatternInit, UrlPatternOptions};
use crate::config::regexp::Pattern;

/// Where a [`Condition`] looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// The canonical query. Keys compare as [`CanonicalQuery`] stores them
    /// (case-insensitively, bracket suffixes removed, ...); values exactly.
    Query,
    /// A request header, looked up by lowercased name. A header holding a
    /// comma-separated list passes if the whole value or any item does
    /// (each trimmed).
    Header,
}

/// What a [`Condition`] asks of the values found under its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Test {
    /// Some value equals this one.
    Equals(String),
    /// Some value equals one of these.
    AnyOf(Vec<String>),
    /// The name is there at all, with any value (even empty).
    Present,
}

/// A condition on the query or on a header, all of a rule's conditions
/// must hold. A repeated query key or a header list passes if *any* of its
/// values does: a client cannot hide a value behind another one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub(crate) target: Target,
    /// The name as the config wrote it (a header name lowercased), as
    /// [`Condition`]'s `Display` shows it.
    pub(crate) name: String,
    pub(crate) test: Test,
    /// The name as requests are searched for it, computed once: the query
    /// key normalized as [`CanonicalQuery`] normalizes keys, or the
    /// lowercased header name.
    key: String,
}

impl Condition {
    /// A condition on `name`. A header name must be visible ASCII without
    /// `:` (RFC 9110 §5.1 allows less, but nothing more could be sent);
    /// `Err` says why it is not.
    pub(crate) fn new(target: Target, name: &str, test: Test) -> Result<Condition, &'static str> {
        let (name, key) = match target {
            Target::Query => (name.to_string(), crate::request::canon::normalize_key(name)),
            Target::Header => {
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
                    return Err("is not a header name");
                }
                let lowered = name.to_ascii_lowercase();
                (lowered.clone(), lowered)
            }
        };
        Ok(Condition { target, name, test, key })
    }

    /// Whether the parameters from `sources` satisfy this condition
    /// (`false` for a header condition). Allocates nothing.
    ///
    /// Fail safe: when `sources` include the body and the body may hold
    /// parameters tollgate could not read
    /// ([`CanonicalQuery::body_unreadable`]: over the cap, compressed, an
    /// unknown charset, malformed multipart), the condition holds, whatever
    /// the URL query says: the body could hold the value, and PHP's
    /// `$_REQUEST` (`request_order = "GP"`) and Laravel's `input()` let a
    /// body value win over the URL's. There are no negative conditions, so
    /// this only ever matches more.
    pub(crate) fn holds_in_query(&self, query: &CanonicalQuery, sources: Sources) -> bool {
        self.target == Target::Query
            && ((sources.contains(crate::request::canon::Source::Body) && query.body_unreadable())
                || self.passes(query.pairs_from(sources).filter(|(k, _)| *k == self.key).map(|(_, v)| v.as_str())))
    }

    /// Whether the headers satisfy this condition (`false` for a query
    /// condition); `header` looks a header up by lowercased name.
    pub(crate) fn holds_in_headers(&self, header: &dyn Fn(&str) -> Option<String>) -> bool {
        if self.target != Target::Header {
            return false;
        }
        let Some(value) = header(&self.key) else { return false };
        self.passes(std::iter::once(value.trim()).chain(value.split(',').map(str::trim)))
    }

    /// Whether the values found under the name pass the test.
    fn passes<'v>(&self, mut values: impl Iterator<Item = &'v str>) -> bool {
        match &self.test {
            Test::Equals(want) => values.any(|v| v == want),
            Test::AnyOf(wants) => values.any(|v| wants.iter().any(|w| w == v)),
            Test::Present => values.next().is_some(),
        }
    }
}

/// `mode=heavy`, `mode in [a, b]`, `mode present`; header conditions start
/// with `header ` and use `: ` for equals (`header x-plan: free`).
impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let equals = match self.target {
            Target::Query => "=",
            Target::Header => {
                f.write_str("header ")?;
                ": "
            }
        };
        match &self.test {
            Test::Equals(v) => write!(f, "{}{equals}{v}", self.name),
            Test::AnyOf(vs) => write!(f, "{} in [{}]", self.name, vs.join(", ")),
            Test::Present => write!(f, "{} present", self.name),
        }
    }
}

/// The methods a request may be routed as: its own, then each item of each
/// override (`X-HTTP-Method-Override` and the like, Laravel's `_method`),
/// uppercased, without repeats. An override is a comma-separated list
/// (a header sent twice arrives joined by `", "`): Express's
/// method-override and Symfony read its first item, other readers another,
/// so every item is a candidate. Items that are not letters alone can name
/// no rule's method and are dropped.
pub(crate) fn method_candidates(method: &str, overrides: impl Iterator<Item = String>) -> Vec<String> {
    let mut out = vec![method.to_ascii_uppercase()];
    for o in overrides {
        for item in o.split(',') {
            let item = item.trim().to_ascii_uppercase();
            if !item.is_empty() && item.bytes().all(|b| b.is_ascii_alphabetic()) && !out.contains(&item) {
                out.push(item);
            }
        }
    }
    out
}

/// A rule's fields once validated, before its pattern is compiled: the one
/// place a rule's fields are declared ([`crate::config`] reads them,
/// [`Rule`] adds the compiled pattern).
#[derive(Debug, Clone)]
pub struct RuleSpec {
    /// Names the rule in logs, errors and counter keys (unique per config).
    pub name: String,
    /// URLPattern pathname, matched on the canonical path.
    pub(crate) path: String,
    /// URLPattern hostname, lowercased; `None` for any host.
    pub(crate) host: Option<String>,
    /// Uppercase method names; empty for any method.
    pub(crate) methods: Vec<String>,
    /// Conditions on the query and on request headers, all of which must
    /// hold.
    pub(crate) conditions: Vec<Condition>,
    /// Where query conditions look (`query_sources`): the URL query and
    /// the body by default, cookies too when listed.
    pub(crate) query_sources: Sources,
    pub(crate) case_insensitive: bool,
    /// Format suffixes (`json`, lowercase, no dot) folded into the bare path.
    pub(crate) suffixes: Vec<String>,
    pub(crate) key: Vec<KeyPart>,
    pub(crate) on_missing_key: MissingKey,
    /// `on_missing_key` (or `fallback_key`) was written, not defaulted:
    /// `tollgate check` then keeps quiet about a broad path's 400s.
    pub(crate) missing_key_given: bool,
    pub(crate) counting: Counting,
    /// What a success does to a failures-only rule's count; `None`:
    /// nothing (`on_success`; 0.2.0's `clear_on_success`).
    pub(crate) on_success: Option<OnSuccess>,
    /// Device cookies for lockout-resistant account limits (needs
    /// `on_success`: the cookie is handed out on the same proven success).
    pub(crate) trusted_device: Option<TrustedDevice>,
    /// Add `RateLimit` / `RateLimit-Policy` to allowed responses.
    pub(crate) ratelimit_headers: bool,
    pub(crate) algorithm: crate::count::protocol::Algorithm,
    pub(crate) limits: Vec<Limit>,
    pub(crate) cost: u32,
    pub(crate) action: Action,
    pub(crate) on_error: FailPolicy,
    pub(crate) timeout_ms: u32,
    /// How long a reservation of a two-phase rule holds its slot waiting
    /// for the origin's answer (`counting.reservation_ttl`;
    /// [`crate::count::reservation`]).
    pub(crate) reservation_ttl_ms: u64,
    /// With `concurrency`: how long an answer the client has stopped
    /// reading keeps its slot before it is cut (`idle_release`;
    /// [`crate::count::slots`]).
    pub(crate) idle_release_ms: u64,
    /// How a failures-only rule receives a request body before it reserves
    /// a slot (`upload_buffer`, `upload_timeout`; [`crate::pipeline::upload`]).
    pub(crate) upload: crate::config::policy::UploadLimits,
    /// Leased budgets (`lease`, `lease_ttl`, `lease_max`; [`crate::count::lease`]).
    pub(crate) lease: crate::count::lease::LeaseMode,
    /// Requests this rule neither counts nor limits (`exempt`).
    pub(crate) exempt: crate::request::exempt::Exemptions,
    /// Keys with limits of their own (`overrides`).
    pub(crate) overrides: crate::config::overrides::Overrides,
    /// The rule's own block response (`response`); `None`: 429 problem+json.
    pub(crate) response: Option<crate::config::response::CustomResponse>,
    /// Which decisions go to Analytics Engine (`metrics`).
    pub(crate) metrics: crate::config::policy::MetricsLevel,
    /// Whether the rule's metric points carry the raw key beside its hash
    /// (`metrics_raw_key`, off by default): the console's events view then
    /// shows who was refused, not only a hash.
    pub(crate) metrics_raw_key: bool,
    /// How long a refusal keeps the key refused (`penalty`;
    /// [`crate::count::penalty`]); `None`: no penalty.
    pub(crate) penalty_ms: Option<u64>,
    /// Usage reported by the origin (`metering = { header, reserve, max }`;
    /// [`crate::config::cost`]): `cost` is then its `reserve`.
    pub(crate) usage: Option<crate::config::cost::Usage>,
    /// How its refusals are worded (`metering.refusal`): the metered API's
    /// error shape by default for a provider's usage, else problem+json.
    pub(crate) refusal: crate::config::response::OwnRefusal,
    /// At most this many requests of one key in flight at once
    /// (`concurrency`; [`crate::count::slots`]).
    pub(crate) concurrency: Option<u32>,
    /// A `concurrency` rule written without `limits`: it limits only what
    /// is in flight. Its calls carry one window that never binds
    /// ([`crate::config::checks`]'s `windowless`), which `describe` leaves out.
    pub(crate) windowless: bool,
}

impl RuleSpec {
    /// Whether the rule counts in two phases, reserving before forwarding
    /// and settling after ([`crate::count::reservation`]): it counts only
    /// some statuses, or usage the origin reports, or holds a slot while a
    /// request is in flight (`concurrency`).
    pub(crate) fn reserves(&self) -> bool {
        self.counting != crate::config::policy::Counting::All || self.usage.is_some() || self.concurrency.is_some()
    }

    /// Whether the rule counts money: its usage is priced per model
    /// (`metering.price`), its limits are `spend`.
    pub(crate) fn counts_money(&self) -> bool {
        self.usage.as_ref().is_some_and(|u| u.price.is_some())
    }

    /// A money rule's unit, in micro-units (1, or 1,000: see
    /// [`crate::config::price::step_for`]); `None` for any other rule.
    pub(crate) fn money_step(&self) -> Option<u64> {
        self.usage.as_ref().and_then(|u| u.price.as_ref()).map(|p| p.step)
    }

    /// The API whose error shape the rule's refusals take: its usage's
    /// provider, unless `metering.refusal = "problem"`.
    pub(crate) fn refusal_shape(&self) -> Option<crate::config::cost::Provider> {
        use crate::config::cost::{Reading, UsageSource};
        match self.usage.as_ref().map(|u| &u.source) {
            Some(UsageSource::Body(Reading::Provider(p))) if self.refusal == crate::config::response::OwnRefusal::Provider => Some(*p),
            _ => None,
        }
    }
}

/// A compiled rule: its [`RuleSpec`] and the URLPattern built from it.
#[derive(Debug)]
pub struct Rule {
    pub(crate) spec: RuleSpec,
    pattern: Pattern,
    /// Its problem+json block bodies, prepared once.
    pub(crate) problems: crate::config::response::Problems,
}

/// A rule reads as its spec (`rule.name`, `rule.limits`): every reader
/// wants the declared fields, and the compiled pattern, the only thing a
/// rule adds, is private to matching.
impl std::ops::Deref for Rule {
    type Target = RuleSpec;

    fn deref(&self) -> &RuleSpec {
        &self.spec
    }
}

/// What a request looks like to the matcher: canonical parts only.
#[derive(Debug, Clone)]
pub struct RequestView<'a> {
    pub method: &'a str,
    /// Lowercased host without port.
    pub host: &'a str,
    /// From [`crate::request::canon::canonical_path`].
    pub path: &'a str,
    pub query: &'a CanonicalQuery,
}

/// A successful match: the rule and the URLPattern groups it captured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// The path the pattern matched: the canonical path, or it with a
    /// format suffix removed (lowercased for a case-insensitive rule).
    pub matched_path: String,
    /// Each group's value in the case the request sent it, though a
    /// case-insensitive rule matched the path folded
    /// (`path:link:raw` on `/chat/AbC123` is `AbC123`). An untyped group of
    /// such a rule is folded again where its key is read
    /// ([`crate::request::key::KeyInputs::fold_path_groups`]).
    pub groups: Vec<(String, String)>,
}

/// Why a rule does not apply to a request; `Display` is the reason
/// `explain` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoMatch {
    Method { method: String, allowed: Vec<String> },
    Host { host: String, pattern: String },
    Path { path: String, pattern: String },
    /// A query or header condition that does not hold.
    Condition(Condition),
}

impl fmt::Display for NoMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoMatch::Method { method, allowed } => write!(f, "method {method} not in [{}]", allowed.join(", ")),
            NoMatch::Host { host, pattern } => write!(f, "host `{host}` does not match `{pattern}`"),
            NoMatch::Path { path, pattern } => write!(f, "path `{path}` does not match `{pattern}`"),
            NoMatch::Condition(c) if c.target == Target::Query => write!(f, "query condition {c} not met"),
            NoMatch::Condition(c) => write!(f, "condition {c} not met"),
        }
    }
}

impl std::error::Error for NoMatch {}

/// A rule's path or host is not a valid URLPattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatternError {
    /// `path`, or `path or host` when urlpattern does not say which.
    pub(crate) field: &'static str,
    pub(crate) message: String,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for PatternError {}

impl Rule {
    /// Compiles the rule's URLPatterns. On failure, says which field is at
    /// fault and why.
    pub(crate) fn compile(spec: RuleSpec) -> Result<Rule, PatternError> {
        // The Worker sees a request's host in its ASCII form (punycode), and
        // the build carries no IDNA tables to convert a pattern's (the
        // `idna_adapter` 1.0 stub: 49 KiB less gzipped upload).
        if let Some(host) = spec.host.as_deref().filter(|h| !h.is_ascii()) {
            return Err(PatternError {
                field: "host",
                message: format!(
                    "`{host}` is not ASCII: write an internationalized domain in its ASCII (punycode) form, as the Worker sees it (`bücher.example` is `xn--bcher-kva.example`)"
                ),
            });
        }
        // urlpattern 0.6 compares a pattern's literal prefix case-sensitively
        // even with `ignore_case`, so case-insensitive rules are compiled
        // lowercased and matched against the lowercased path (their group
        // names and captured values are therefore lowercase too).
        let pathname = if spec.case_insensitive {
            spec.path.to_lowercase()
        } else {
            spec.path.clone()
        };
        let init = UrlPatternInit {
            pathname: Some(pathname),
            hostname: spec.host.clone(),
            ..Default::default()
        };
        let options = UrlPatternOptions {
            ignore_case: spec.case_insensitive,
            ..Default::default()
        };
        let pattern = Pattern::parse(init, options).map_err(|e| {
            let field = if spec.host.is_some() && !e.to_string().contains("pathname") {
                "path or host"
            } else {
                "path"
            };
            let message = match e {
                urlpattern::Error::RegExp(()) => crate::config::regexp::REFUSED.to_string(),
                e => format!("not a valid URLPattern: {e}"),
            };
            PatternError { field, message }
        })?;
        let problems = crate::config::response::Problems::shaped(&spec.name, spec.refusal_shape());
        Ok(Rule { spec, pattern, problems })
    }

    /// Matches the rule against a request (the per-request path;
    /// [`Rule::evaluate`] says why not).
    ///
    /// A request the rule does not match allocates nothing: method, host and
    /// query conditions compare in place, and each form of the path is
    /// checked byte by byte against the pattern's literal prefix, suffix and
    /// middle before it is built for urlpattern (which, even to say no,
    /// lowercases a copy for a case-insensitive pattern, and allocates the
    /// captures of a regular expression). The one exception: a path or host
    /// pattern that urlpattern runs as a regular expression (more than one
    /// group or wildcard, an optional part, a custom regexp), on a request
    /// that passes the pattern's literal prefix and suffix, costs the
    /// candidate string and the regex captures. `tests/alloc.rs` counts.
    pub fn matches(&self, request: &RequestView<'_>) -> Option<Match> {
        if !self.method_matches(request.method)
            || !self.host_matches(request.host)
            || !self.query_holds(request.query)
        {
            return None;
        }
        self.path_match(request.path)
    }

    /// Matches the rule against a request; `Err` says why it does not apply.
    pub fn evaluate(&self, request: &RequestView<'_>) -> Result<Match, NoMatch> {
        if !self.method_matches(request.method) {
            return Err(NoMatch::Method { method: request.method.to_string(), allowed: self.methods.clone() });
        }
        if !self.host_matches(request.host) {
            return Err(NoMatch::Host { host: request.host.to_string(), pattern: self.pattern.hostname().to_string() });
        }
        let Some(found) = self.path_match(request.path) else {
            return Err(NoMatch::Path { path: request.path.to_string(), pattern: self.path.clone() });
        };
        if let Some(failed) = self.conditions_on(Target::Query).find(|c| !c.holds_in_query(request.query, self.query_sources)) {
            return Err(NoMatch::Condition(failed.clone()));
        }
        Ok(found)
    }

    /// Whether the rule's host and path take the request, whatever its
    /// method, parameters and headers: [`Rule::matches`] can hold only if
    /// this does. The plan's fast path asks it first, so a request no rule
    /// takes costs no query parsing, header lookup or body read.
    pub(crate) fn takes(&self, host: &str, path: &str) -> bool {
        self.host_matches(host) && self.first_form(path, &mut |form| self.form_takes(form).then_some(())).is_some()
    }

    /// Whether the rule has query conditions: a form body, which joins the
    /// query, must then be read before matching ([`crate::config::ConfigFacts`]).
    pub(crate) fn has_query_conditions(&self) -> bool {
        self.conditions_on(Target::Query).next().is_some()
    }

    fn conditions_on(&self, target: Target) -> impl Iterator<Item = &Condition> {
        self.conditions.iter().filter(move |c| c.target == target)
    }

    fn query_holds(&self, query: &CanonicalQuery) -> bool {
        self.conditions_on(Target::Query).all(|c| c.holds_in_query(query, self.query_sources))
    }

    /// A rule for GET also applies to HEAD: Express, Flask, Rails and
    /// Django answer HEAD with the GET handler. A rule that lists no methods
    /// applies to every method but OPTIONS: a CORS preflight is answered by
    /// the origin's CORS layer, never runs the protected action, and
    /// counting it would let a page's visitors spend a quota for nothing.
    /// A rule that wants preflights lists `OPTIONS`.
    fn method_matches(&self, method: &str) -> bool {
        (self.methods.is_empty() && !method.eq_ignore_ascii_case("OPTIONS"))
            || self.methods.iter().any(|m| {
                m.eq_ignore_ascii_case(method) || (m == "GET" && method.eq_ignore_ascii_case("HEAD"))
            })
    }

    fn host_matches(&self, host: &str) -> bool {
        let matcher = &self.pattern.hostname.matcher;
        self.host.is_none()
            || match screen(matcher, &Form { head: host, slash: false, fold: false, ascii: host.is_ascii() }) {
                Screen::Pass => true,
                Screen::Fail => false,
                Screen::Unsure => matcher.matches(host).is_some(),
            }
    }

    /// The first form of the path the pattern matches: most suffixes removed
    /// first, so that `/users/42.json` captures `:id` = `42` (not `42.json`,
    /// which would give `42.json.json` a counter of its own); then the same
    /// forms with a trailing slash, which the canonical path drops but a
    /// pattern such as `/api/reports/*` needs.
    ///
    /// Each form is a slice of the path (plus perhaps a `/`), screened
    /// before it is built: only a form that may match is copied (and
    /// lowercased, for a case-insensitive rule) for urlpattern.
    fn path_match(&self, path: &str) -> Option<Match> {
        self.first_form(path, &mut |form| self.form_match(form))
    }

    /// `found` of the first form of `path` it answers for, in
    /// [`Rule::path_match`]'s order.
    fn first_form<T>(&self, path: &str, found: &mut dyn FnMut(&Form<'_>) -> Option<T>) -> Option<T> {
        // A canonical path is ASCII, so a case-insensitive rule compares it
        // folded byte by byte. Other input is lowercased once, as urlpattern
        // would see it, and the screen leaves it to urlpattern.
        let ascii = path.is_ascii();
        let lowered;
        let (source, fold) = if self.case_insensitive && !ascii {
            lowered = path.to_lowercase();
            (lowered.as_str(), false)
        } else {
            (path, self.case_insensitive)
        };
        let ends = self.suffix_ends(source);
        for slash in [false, true] {
            for end in ends.clone().filter(|&end| !(slash && &source[..end] == "/")) {
                if let Some(found) = found(&Form { head: &source[..end], slash, fold, ascii }) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// Whether the pattern takes one form of the path: `form_match(form)
    /// .is_some()`, without building the form or its captures where the
    /// [`screen`] answers (urlpattern agrees with it wherever it does).
    fn form_takes(&self, form: &Form<'_>) -> bool {
        let matcher = &self.pattern.pathname.matcher;
        match screen(matcher, form) {
            Screen::Pass => true,
            Screen::Fail => false,
            Screen::Unsure => matcher.matches(&form.build()).is_some(),
        }
    }

    /// The match of one form of the path, if the pattern takes it.
    fn form_match(&self, form: &Form<'_>) -> Option<Match> {
        let pathname = &self.pattern.pathname;
        if screen(&pathname.matcher, form) == Screen::Fail {
            return None;
        }
        let candidate = form.build();
        let captured = pathname.matcher.matches(&candidate)?;
        // A folded form has the bytes of the path as sent, lowercased one
        // for one (ASCII): each capture, a slice of the candidate, is the
        // same range of the form as sent.
        let sent = (form.fold && !captured.is_empty()).then(|| Form { fold: false, ..*form }.build());
        let as_sent = |value: &str| -> String {
            let at = (value.as_ptr() as usize).checked_sub(candidate.as_ptr() as usize);
            let range = at.and_then(|at| Some(at..at.checked_add(value.len())?));
            sent.as_deref().zip(range).and_then(|(sent, range)| sent.get(range)).unwrap_or(value).to_string()
        };
        let groups = pathname
            .group_name_list
            .iter()
            .zip(captured)
            .filter_map(|(name, value)| Some((name.clone(), as_sent(value?))))
            .collect();
        Some(Match { matched_path: candidate, groups })
    }

    /// Where the forms of `path` end, shortest first: `/a/b.json.xml` ends
    /// after `/a/b`, `/a/b.json` and `/a/b.json.xml`. Suffixes come off the
    /// last segment one at a time from the end while the rule lists them
    /// (in any case); a leading dot (`/.env`) never starts one. So every dot
    /// between the shortest form and the end ends a form.
    fn suffix_ends<'p>(&self, path: &'p str) -> impl Iterator<Item = usize> + Clone + 'p {
        let mut next = Some(self.shortest_end(path));
        std::iter::from_fn(move || {
            let end = next?;
            next = (end < path.len()).then(|| path.as_bytes()[end + 1..].iter().position(|&b| b == b'.').map_or(path.len(), |at| end + 1 + at));
            Some(end)
        })
    }

    /// The end of `path` with every listed suffix removed.
    fn shortest_end(&self, path: &str) -> usize {
        // Found by byte, not by char searchers: `/` and `.` are ASCII.
        let Some(last_slash) = path.bytes().rposition(|b| b == b'/') else { return path.len() };
        let mut end = path.len();
        while let Some(dot) = path.as_bytes()[..end].iter().rposition(|&b| b == b'.').filter(|&dot| dot > last_slash + 1) {
            let extension = &path[dot + 1..end];
            if !self.suffixes.iter().any(|s| s.eq_ignore_ascii_case(extension)) {
                break;
            }
            end = dot;
        }
        end
    }

    /// Whether the rule's header conditions hold (checked apart from
    /// [`Rule::matches`], which sees only the canonical URL); `Err` names the
    /// first condition that does not.
    pub(crate) fn headers_hold(&self, header: &dyn Fn(&str) -> Option<String>) -> Result<(), NoMatch> {
        match self.conditions_on(Target::Header).find(|c| !c.holds_in_headers(header)) {
            Some(failed) => Err(NoMatch::Condition(failed.clone())),
            None => Ok(()),
        }
    }

    /// The call that asks this rule's object to do `op`, with the rule's
    /// algorithm, limits and cost (limits travel with every call), and for
    /// a reserve how long to hold the slot (`reservation_ttl`).
    pub(crate) fn call(&self, op: crate::count::protocol::Op) -> crate::count::protocol::Call {
        use crate::count::protocol::{Call, Op};
        Call::new(op, self.algorithm, self.limits.clone())
            .with_cost(self.cost)
            .with_hold_ms((op == Op::Reserve).then_some(self.reservation_ttl_ms))
            .with_concurrency(self.concurrency.filter(|_| matches!(op, Op::Reserve | Op::Check)))
            .with_penalty_ms(self.penalty_ms.filter(|_| crate::count::penalty::carried_by(op)))
    }

    /// The limits that apply to `key`: its override's, or the rule's.
    pub(crate) fn limits_for(&self, key: &str) -> &[Limit] {
        self.overrides.limits_for(key).unwrap_or(&self.limits)
    }

    /// [`Rule::call`] for `key`, with the limits that apply to it
    /// ([`Rule::limits_for`]).
    pub(crate) fn call_for(&self, op: crate::count::protocol::Op, key: &str) -> crate::count::protocol::Call {
        let mut call = self.call(op);
        if let Some(limits) = self.overrides.limits_for(key) {
            call.limits = limits.to_vec();
        }
        call
    }

    /// Whether the rule settles successes (`on_success`): a form body must
    /// then be read, to see a `_method` override in it.
    pub(crate) fn settles_successes(&self) -> bool {
        self.on_success.is_some()
    }

    /// Whether `method`, exactly, is one of the rule's methods (any, when
    /// it lists none): no HEAD for GET, no override.
    pub(crate) fn lists_method(&self, method: &str) -> bool {
        self.methods.is_empty() || self.methods.iter().any(|m| m.eq_ignore_ascii_case(method))
    }

    /// The key this one-part rule would give a request carrying `value`
    /// for its key part, derived exactly as the request's key is (see
    /// [`crate::request::key::identity_key`]; path groups but `:raw` ones
    /// lowercased for a case-insensitive rule, as its matcher captures them). `None` for a
    /// rule of several parts, or a value that would be missing.
    pub(crate) fn identity_key(&self, value: &str) -> Option<String> {
        let [part] = self.key.as_slice() else { return None };
        let value = match part {
            _ if self.case_insensitive && part.folds_with_match() => value.to_lowercase(),
            _ => value.to_string(),
        };
        crate::request::key::identity_key(part, &value)
    }

    /// Whether any part of the rule's key (or fallback key) reads the body.
    pub(crate) fn reads_body(&self) -> bool {
        self.key.iter().chain(self.on_missing_key.fallback_parts()).any(|p| matches!(p, KeyPart::Body(..)))
    }
}

/// One form of a path a pattern is tried on, compared without being built:
/// `head`, lowercased when `fold` (which needs `head` ASCII), then a `/`
/// when `slash`. Its bytes are exactly those of [`Form::build`].
struct Form<'p> {
    head: &'p str,
    slash: bool,
    fold: bool,
    /// `head` is ASCII, so that comparing bytes case-insensitively is what
    /// urlpattern's `to_lowercase` comparisons do (`false` is always safe).
    ascii: bool,
}

impl Form<'_> {
    fn len(&self) -> usize {
        self.head.len() + usize::from(self.slash)
    }

    fn bytes(&self, range: Range<usize>) -> impl Iterator<Item = u8> + '_ {
        range.map(|i| match self.head.as_bytes().get(i) {
            Some(b) if self.fold => b.to_ascii_lowercase(),
            Some(b) => *b,
            None => b'/',
        })
    }

    /// The form as urlpattern is given it.
    fn build(&self) -> String {
        let mut out = if self.fold { self.head.to_ascii_lowercase() } else { self.head.to_string() };
        if self.slash {
            out.push('/');
        }
        out
    }
}

/// What [`screen`] knows of a match without running urlpattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Screen {
    Pass,
    Fail,
    /// Only urlpattern can tell.
    Unsure,
}

/// `matcher.matches(form)` answered from bytes, without allocating: for a
/// case-insensitive pattern urlpattern's own matcher lowercases a copy of
/// the input (even to say no), and a regular expression allocates its
/// captures.
///
/// Mirrors `urlpattern::matcher::Matcher::matches` (0.6): the input must
/// start with the literal prefix and end with the literal suffix (compared
/// exactly, as urlpattern does even with `ignore_case`; hence the lowercased
/// patterns, see [`Rule::compile`]); what is between must then equal the
/// literal, or be a single capture (`*`, `:name`) that is non-empty where
/// required and free of its delimiter. Exact for ASCII input; a regular
/// expression, or a case-insensitive comparison of other input, is
/// `Unsure` once prefix and suffix pass.
fn screen<R: RegExp>(matcher: &Matcher<R>, form: &Form<'_>) -> Screen {
    let (prefix, suffix) = (matcher.prefix.as_bytes(), matcher.suffix.as_bytes());
    let len = form.len();
    if len < prefix.len() + suffix.len()
        || !form.bytes(0..prefix.len()).eq(prefix.iter().copied())
        || !form.bytes(len - suffix.len()..len).eq(suffix.iter().copied())
    {
        return Screen::Fail;
    }
    let inner = prefix.len()..len - suffix.len();
    let pass_if = |pass: bool| if pass { Screen::Pass } else { Screen::Fail };
    match &matcher.inner {
        InnerMatcher::Literal { literal } if !matcher.ignore_case => pass_if(form.bytes(inner).eq(literal.bytes())),
        InnerMatcher::Literal { literal } if form.ascii && literal.is_ascii() => {
            pass_if(inner.len() == literal.len() && form.bytes(inner).zip(literal.bytes()).all(|(a, b)| a.eq_ignore_ascii_case(&b)))
        }
        InnerMatcher::SingleCapture { allow_empty: false, .. } if inner.is_empty() => Screen::Fail,
        InnerMatcher::SingleCapture { filter: None, .. } => Screen::Pass,
        InnerMatcher::SingleCapture { filter: Some(delimiter), .. }
            if delimiter.is_ascii() && (form.ascii || !matcher.ignore_case) =>
        {
            // An ASCII byte never occurs inside a multi-byte UTF-8 sequence.
            let delimiter = *delimiter as u8;
            let ignore_case = matcher.ignore_case;
            pass_if(!form.bytes(inner).any(|b| b == delimiter || (ignore_case && b.eq_ignore_ascii_case(&delimiter))))
        }
        InnerMatcher::Literal { .. } | InnerMatcher::SingleCapture { .. } | InnerMatcher::RegExp { .. } => Screen::Unsure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::canon::{canonical_path, CanonicalQuery};
    use crate::config::Config;
    use serde_json::json;

    fn config() -> Config {
        Config::from_json(&json!({"rules": [
            {"name": "heavy", "path": "/api/example", "query": {"mode": "heavy"},
             "limits": [{"requests": 10, "window": "60s"}]},
            {"name": "users", "path": "/users/:id", "methods": ["POST"], "host": "*.example.com",
             "case_insensitive": true, "limits": [{"requests": 1, "window": "1s"}]},
        ]}))
        .unwrap()
    }

    fn eval(rule: &Rule, method: &str, host: &str, url: &str) -> Result<Match, String> {
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let path = canonical_path(path).unwrap();
        let query = CanonicalQuery::parse(query);
        rule.evaluate(&RequestView { method, host, path: &path, query: &query }).map_err(|e| e.to_string())
    }

    #[test]
    fn variants_match_and_look_alikes_do_not() {
        let c = config();
        let heavy = &c.rules[0];
        for url in [
            "/api/example?mode=heavy",
            "/api/example/?mode=heavy",
            "/api/example.json?mode=heavy",
            "/api/example%2ejson?mode=heavy",
            "/api/example?mode=normal&mode=heavy",
        ] {
            assert!(eval(heavy, "GET", "h", url).is_ok(), "{url}");
        }
        for url in [
            "/api/examples?mode=heavy",
            "/api/example-other?mode=heavy",
            "/api/exampl?mode=heavy",
            "/api/example2.json?mode=heavy",
            "/api/example?mode=normal",
            "/api/example",
        ] {
            assert!(eval(heavy, "GET", "h", url).is_err(), "{url}");
        }
    }

    #[test]
    fn head_overrides_and_trailing_slash() {
        let c = Config::from_json(&json!({"rules": [
            {"name": "get", "path": "/r/*", "methods": ["GET"], "limits": [{"requests": 1, "window": "1s"}]},
            {"name": "del", "path": "/d", "methods": ["DELETE"], "limits": [{"requests": 1, "window": "1s"}]},
        ]}))
        .unwrap();
        assert!(eval(&c.rules[0], "HEAD", "h", "/r/x").is_ok(), "HEAD runs the GET handler");
        let any = Config::from_json(&json!({"rules": [
            {"name": "any", "path": "/a", "limits": [{"requests": 1, "window": "1s"}]},
            {"name": "pre", "path": "/a", "methods": ["options"], "limits": [{"requests": 1, "window": "1s"}]},
        ]}))
        .unwrap();
        assert!(eval(&any.rules[0], "OPTIONS", "h", "/a").is_err(), "preflights are not counted by default");
        assert!(eval(&any.rules[0], "PATCH", "h", "/a").is_ok());
        assert!(eval(&any.rules[1], "OPTIONS", "h", "/a").is_ok(), "unless a rule lists OPTIONS");
        assert!(eval(&c.rules[0], "GET", "h", "/r/").is_ok(), "`/r/*` matches `/r/` though the canonical path is `/r`");
        assert!(eval(&c.rules[0], "GET", "h", "/r").is_ok());
        assert!(eval(&c.rules[1], "POST", "h", "/d").is_err());
        let methods = method_candidates("post", ["delete".to_string(), "DELETE".into(), "x y".into()].into_iter());
        assert_eq!(methods, ["POST", "DELETE"]);
        let items = method_candidates("POST", ["DELETE, x".to_string(), " put ,GET".into(), "a-b, patch".into()].into_iter());
        assert_eq!(items, ["POST", "DELETE", "X", "PUT", "GET", "PATCH"], "every item of a list");
        assert!(methods.iter().any(|m| eval(&c.rules[1], m, "h", "/d").is_ok()));
    }

    #[test]
    fn header_conditions() {
        let c = Config::from_json(&json!({"rules": [
            {"name": "h", "path": "/h", "header": {"X-Plan": "free", "x-tier": ["a", "b"], "x-debug": true},
             "limits": [{"requests": 1, "window": "1s"}]},
        ]}))
        .unwrap();
        let rule = &c.rules[0];
        let all = |name: &str| match name {
            "x-plan" => Some("gold, free".to_string()),
            "x-tier" => Some("b".to_string()),
            "x-debug" => Some(String::new()),
            _ => None,
        };
        assert_eq!(rule.headers_hold(&all), Ok(()));
        let no_debug = |name: &str| if name == "x-debug" { None } else { all(name) };
        assert_eq!(
            rule.headers_hold(&no_debug).map_err(|e| e.to_string()),
            Err("condition header x-debug present not met".to_string())
        );
        let other_plan = |name: &str| if name == "x-plan" { Some("gold".to_string()) } else { all(name) };
        assert!(rule.headers_hold(&other_plan).is_err());
    }

    #[test]
    fn methods_host_case_and_groups() {
        let c = config();
        let users = &c.rules[1];
        let m = eval(users, "post", "api.example.com", "/USERS/42").unwrap();
        assert_eq!(m.groups, vec![("id".to_string(), "42".to_string())]);
        assert!(eval(users, "GET", "api.example.com", "/users/42").unwrap_err().contains("method"));
        assert!(eval(users, "POST", "example.org", "/users/42").unwrap_err().contains("host"));
        assert!(eval(&c.rules[0], "GET", "h", "/API/example?mode=heavy").is_ok(), "case-insensitive by default");
        let strict = Config::from_json(&json!({"rules": [
            {"name": "s", "path": "/api/example", "case_insensitive": false, "limits": [{"requests": 1, "window": "1s"}]}
        ]}))
        .unwrap();
        assert!(eval(&strict.rules[0], "GET", "h", "/API/example").is_err(), "unless told otherwise");
    }

    /// Path and host patterns of every matcher shape urlpattern 0.6 builds:
    /// literal, single capture with and without delimiter, regexp.
    fn shapes() -> &'static Config {
        static SHAPES: std::sync::OnceLock<Config> = std::sync::OnceLock::new();
        SHAPES.get_or_init(compile_shapes)
    }

    fn compile_shapes() -> Config {
        let paths = [
            "/", "/api/example", "/API/Ex.json", "/users/:id", "/r/*", "/files/*.csv", "/a/:b/:c", "/x{/y}?",
            "/u/:id(\\d+)", "/caf%C3%A9/:x", "/café", "/Café/*", "/d/:name.json", "/*",
        ];
        let hosts = [None, Some("*.example.com"), Some(":sub.example.com"), Some("api.Example.com"), Some("{www.}?example.com")];
        let mut rules = Vec::new();
        for (i, path) in paths.iter().enumerate() {
            for case_insensitive in [true, false] {
                let host = hosts[(i + usize::from(case_insensitive)) % hosts.len()];
                let mut rule = json!({"name": format!("r{i}{case_insensitive}"), "path": path,
                    "case_insensitive": case_insensitive, "suffixes": ["json", "XML"],
                    "limits": [{"requests": 1, "window": "1s"}]});
                if let Some(host) = host {
                    rule["host"] = json!(host);
                }
                rules.push(rule);
            }
        }
        Config::from_json(&json!({ "rules": rules })).unwrap()
    }

    /// The matching this module did before it screened forms: every form
    /// built (lowercased for a case-insensitive rule), each given to
    /// urlpattern; its groups are the form's, the screened match's are as
    /// sent (equal but for ASCII case).
    fn path_match_by_building(rule: &Rule, path: &str) -> Option<Match> {
        let strip = |path: &str| -> Option<String> {
            let last_slash = path.rfind('/')?;
            let dot = path.rfind('.').filter(|&d| d > last_slash + 1)?;
            let extension = &path[dot + 1..];
            rule.suffixes.iter().any(|s| s.eq_ignore_ascii_case(extension)).then(|| path[..dot].to_string())
        };
        let mut forms = vec![if rule.case_insensitive { path.to_lowercase() } else { path.to_string() }];
        while let Some(shorter) = strip(forms.last().unwrap()) {
            forms.push(shorter);
        }
        forms.reverse();
        let slashed: Vec<String> = forms.iter().filter(|c| c.as_str() != "/").map(|c| format!("{c}/")).collect();
        forms.into_iter().chain(slashed).find_map(|form| {
            let groups = rule.pattern.pathname.matcher.matches(&form)?;
            let groups = rule.pattern.pathname.group_name_list.iter().zip(groups);
            let groups = groups.filter_map(|(name, value)| Some((name.clone(), value?.to_string()))).collect();
            Some(Match { matched_path: form, groups })
        })
    }

    /// A match's groups as a case-insensitive rule's folded form holds
    /// them (ASCII paths: the canonical path is ASCII).
    fn folded(rule: &Rule, found: Option<Match>) -> Option<Match> {
        let mut found = found?;
        if rule.case_insensitive {
            for (_, value) in &mut found.groups {
                *value = value.to_lowercase();
            }
        }
        Some(found)
    }

    /// A case-insensitive rule matches `/chat/AbC123` folded but
    /// captures `AbC123` as sent; a case-sensitive one is unchanged.
    #[test]
    fn groups_keep_the_case_sent() {
        let config = crate::config::Config::from_json(&json!({"rules": [
            {"name": "any-case", "path": "/Chat/:link", "limits": [{"requests": 1, "window": "1s"}]},
            {"name": "exact", "path": "/chat/:link/:rest*", "case_insensitive": false, "limits": [{"requests": 1, "window": "1s"}]},
            {"name": "suffixed", "path": "/files/:name", "suffixes": ["json"], "limits": [{"requests": 1, "window": "1s"}]}
        ]})).unwrap();
        let groups = |rule: usize, path: &str| config.rules[rule].path_match(path).map(|m| m.groups);
        let pair = |name: &str, value: &str| (name.to_string(), value.to_string());
        assert_eq!(groups(0, "/CHAT/AbC123"), Some(vec![pair("link", "AbC123")]));
        assert_eq!(groups(1, "/chat/AbC/x/Y"), Some(vec![pair("link", "AbC"), pair("rest", "x/Y")]));
        assert_eq!(groups(2, "/FILES/Report.JSON"), Some(vec![pair("name", "Report")]));
        assert_eq!(groups(2, "/files/Ab%2Fc"), Some(vec![pair("name", "Ab%2Fc")]));
    }

    /// Where [`screen`] answers, urlpattern agrees.
    fn assert_screen_agrees(rule: &Rule, path: &str, host: &str) {
        let ascii = path.is_ascii();
        let path_forms = [false, true].map(|slash| Form { head: path, slash, fold: rule.case_insensitive && ascii, ascii });
        let host_form = Form { head: host, slash: false, fold: false, ascii: host.is_ascii() };
        let (pathname, hostname) = (&rule.pattern.pathname.matcher, &rule.pattern.hostname.matcher);
        let checks = path_forms.iter().map(|form| (pathname, form)).chain([(hostname, &host_form)]);
        for (matcher, form) in checks {
            let urlpattern = matcher.matches(&form.build()).is_some();
            match screen(matcher, form) {
                Screen::Pass => assert!(urlpattern, "{} on {}", rule.path, form.build()),
                Screen::Fail => assert!(!urlpattern, "{} on {}", rule.path, form.build()),
                Screen::Unsure => {}
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn screened_matching_is_urlpattern_matching(
            path in "(/([a-zA-Z0-9_.%-]|é){0,7}){1,4}/?",
            host in "[a-zA-Z0-9.:-]{0,16}",
        ) {
            for rule in &shapes().rules {
                proptest::prop_assert_eq!(folded(rule, rule.path_match(&path)), path_match_by_building(rule, &path), "{}", rule.path);
                let urlpattern = rule.host.is_none() || rule.pattern.hostname.matcher.matches(&host).is_some();
                proptest::prop_assert_eq!(rule.host_matches(&host), urlpattern, "{:?}", rule.host);
                proptest::prop_assert_eq!(rule.takes(&host, &path), urlpattern && rule.path_match(&path).is_some(), "{}", rule.path);
                assert_screen_agrees(rule, &path, &host);
            }
        }
    }

    #[test]
    fn screened_matching_on_chosen_paths() {
        let paths = [
            "/", "", "/api/example", "/API/EXAMPLE.JSON", "/api/ex.json", "/api/ex.json.xml", "/users/42", "/USERS/42.Json",
            "/users/42/x", "/users/", "/r", "/r/", "/R/x/y", "/files/a.csv", "/files/A.CSV.json", "/a/b/c", "/a/b", "/x", "/x/y",
            "/X/Y.xml", "/u/12", "/u/ab", "/caf%C3%A9/1", "/caf%c3%a9/1", "/café/1", "/CAFÉ/1", "/caf%C3%A9", "/CAF%C3%A9/x", "/caf%c3%a9", "/d/x.json", "/d/x.json.json",
            "/.json", "/a/.json", "/a.json/b", "/a..json",
        ];
        let hosts = ["", "example.com", "api.example.com", "API.EXAMPLE.COM", "a.b.example.com", "www.example.com", "éx.example.com", ".example.com", "example.com."];
        for rule in &shapes().rules {
            for path in paths {
                assert_eq!(folded(rule, rule.path_match(path)), path_match_by_building(rule, path), "{} on {path}", rule.path);
            }
            for host in hosts {
                let urlpattern = rule.host.is_none() || rule.pattern.hostname.matcher.matches(host).is_some();
                assert_eq!(rule.host_matches(host), urlpattern, "{:?} on {host}", rule.host);
                for path in paths {
                    assert_screen_agrees(rule, path, host);
                    assert_eq!(rule.takes(host, path), urlpattern && rule.path_match(path).is_some(), "{} on {host}{path}", rule.path);
                }
            }
        }
    }
}
