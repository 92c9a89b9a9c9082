//! The front half of the decision pipeline, pure: what one request is, to
//! tollgate, before any counter is asked.
//!
//! [`plan`] takes the config and the plain [`RequestParts`] that both the
//! Worker (from the live request) and `tollgate explain` (from its command
//! line) fill, and returns a [`Plan`]: the canonical view, the methods the
//! request may be routed as, every matching rule with its key (or why it has
//! none), and the [`Route`] the request takes. The Worker then only does the
//! I/O a route asks for; [`crate::pipeline::verdict`] folds the counters' outcomes.
//!
//! The body is read lazily. A plan made without it says [`Route::NeedsBody`]
//! when it would need one (a form body's parameters join the query, or a
//! matching rule keys on a `body:` field); the caller reads it, capped, and
//! plans again. Whether the body is needed depends only on the config and
//! the request, never on when it was read, so a caller that passes the body
//! up front (`explain`) gets the very plan the Worker ends with.
//!
//! Parameters are what origins read as such ([`crate::request::body`]): the URL
//! query, the parameters of a urlencoded or multipart body of any method
//! but GET and HEAD (read when some rule has query conditions or restricts
//! methods, [`ConfigFacts`](crate::config::ConfigFacts)), and, for rules
//! whose `query_sources` list them, the cookies. A form body that cannot be
//! read (over `body_limit`, compressed, an unknown charset, malformed) is
//! never taken as empty: query conditions that read the body hold, and a
//! POST may be overridden to any method a rule lists (fail safe: both only
//! ever match more).

use crate::pipeline::applied::{object_name, Applied, Exempted, KeyOutcome, Matched};
use crate::request::body::{self, BodyParams, Unreadable};
use crate::request::canon::{canonical_path_entering, normalize_key, CanonError, CanonicalQuery, RawUrl, Source};
use crate::config::Config;
use crate::pipeline::plane::Walked;
use crate::request::exempt::ExemptInputs;
use crate::config::policy::MissingKey;
use crate::request::key::{body_field_values, derive_keys, key_hash, raw_values, KeyError, KeyInputs};
use crate::request::spelling::Spelling;
use crate::config::rules::{method_candidates, Match, RequestView, Rule};

/// Request headers that name the method an origin may route a request as
/// (Rails, Express's method-override, Symfony and others), besides
/// Laravel's `_method` query or form field.
pub(crate) const METHOD_OVERRIDE_HEADERS: [&str; 3] = ["x-http-method-override", "x-http-method", "x-method-override"];

/// The request as both callers can describe it: plain data, no platform
/// types.
pub struct RequestParts<'a> {
    /// The method as sent (not normalized; unknown methods stay as they are).
    pub method: &'a str,
    /// The URL as a WHATWG parser serializes it: the runtime's
    /// `request.url`, or [`url::Url::as_str`] after `url::Url::parse`. Split as
    /// it is ([`RawUrl::split`]), never parsed again: its host, path and
    /// query are what a parsed [`url::Url`] gives (tested below), and the plan
    /// reads nothing else of it.
    pub url: &'a str,
    /// A request header by lowercased name; a header sent several times
    /// reads as its values joined by `", "` (the Fetch `Headers.get`).
    pub header: &'a dyn Fn(&str) -> Option<String>,
    pub body: Body<'a>,
    /// `request.cf.country` and `request.cf.asn`.
    pub country: Option<&'a str>,
    pub asn: Option<u32>,
    /// `Some(category)` when Cloudflare says the client is a verified bot
    /// (`request.cf.verifiedBotCategory`; empty when only
    /// `request.cf.botManagement.verifiedBot` says so); for exemptions.
    pub verified_bot: Option<&'a str>,
    /// The admin token (the `TOLLGATE_ADMIN_TOKEN` secret), looked up only
    /// for a request under the admin prefix; `None`: the admin API is off.
    pub admin_token: &'a dyn Fn() -> Option<String>,
    /// The `TOLLGATE_LOG_KEY` secret ([`crate::request::key::log_key`]) that keys
    /// every `key_hash` of the plan; `None`: unkeyed SHA-256 ([`key_hash`]).
    pub log_key: Option<&'a [u8]>,
    /// A Workers secret by name (a `trusted_device` rule's signing key),
    /// looked up only for a rule that has one and a request with its cookie.
    pub secret: &'a dyn Fn(&str) -> Option<String>,
    /// Now (Unix ms): device cookies expire.
    pub now_ms: i64,
}

impl<'a> RequestParts<'a> {
    /// A request of `method` to `url` with `header` and `body`, and nothing
    /// else: no `cf` fields, no admin token, log key or secrets, the clock
    /// at 0. Tools and tests start from it
    /// (`RequestParts { asn, ..RequestParts::plain(..) }`).
    pub fn plain(method: &'a str, url: &'a str, header: &'a dyn Fn(&str) -> Option<String>, body: Body<'a>) -> RequestParts<'a> {
        RequestParts {
            method,
            url,
            header,
            body,
            country: None,
            asn: None,
            verified_bot: None,
            admin_token: &no_admin_token,
            log_key: None,
            secret: &no_secret,
            now_ms: 0,
        }
    }
}

fn no_admin_token() -> Option<String> {
    None
}

fn no_secret(_: &str) -> Option<String> {
    None
}

/// What is known of the request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// Not read yet: a plan that needs it says [`Route::NeedsBody`].
    Unread,
    /// Not buffered: larger than `body_limit` (announced or streamed), or
    /// the stream failed. `body:` keys are missing; a form body is
    /// [`Unreadable::TooLarge`] (the plan reads `Content-Type` and
    /// `Content-Encoding` from the headers).
    Unusable,
    /// The whole body, at most `body_limit` bytes.
    Read(&'a [u8]),
}

/// The canonical view of a request: what rules match against.
#[derive(Debug, Clone)]
pub struct Canonical {
    /// Lowercased host, one trailing dot removed.
    pub(crate) host: String,
    /// From [`crate::request::canon::canonical_path`].
    pub path: String,
    /// The request's parameters, each tagged with its [`Source`]: the URL
    /// query, joined by a form body's parameters when some rule has query
    /// conditions or restricts methods (PHP's `$_REQUEST`, Laravel's
    /// `input()`, Rails' `params` and Spring's `@RequestParam` read form
    /// fields as parameters), and by the cookies when some rule's
    /// `query_sources` lists them.
    pub query: CanonicalQuery,
    /// The method as sent (uppercased), then each override.
    pub methods: Vec<String>,
    /// Why a form body that joins the parameters could not be read (the
    /// fail-safe matching applies, see the module doc).
    pub unreadable_body: Option<Unreadable>,
}

/// Where the request goes next.
#[derive(Debug)]
pub enum Route<'c> {
    /// The path cannot be canonicalized (a decoded control character):
    /// answered 400, never forwarded.
    Malformed(CanonError),
    /// Under the admin prefix with the admin API on (the admin token or
    /// `admin_access` set): never forwarded, and nothing more read here.
    /// The admin plane plans it (`crate::admin::plan`: its lockout counter,
    /// the token or session, the admin route) in the admin Worker; the
    /// zone's Worker answers such a path 404 before planning it
    /// ([`crate::pipeline::plane`]).
    Admin,
    /// Plan again with the body read (capped).
    NeedsBody,
    /// A matching rule's key is missing and the rule rejects: 400. The
    /// first such rule, in match order, answers.
    MissingKey { rule: &'c Rule, missing: KeyError },
    /// Ask these rules' counters; with none, forward without any call.
    Check(Vec<Applied<'c>>),
}

/// What tollgate makes of one request before asking any counter.
#[derive(Debug)]
pub struct Plan<'c> {
    /// `None` when the path was refused ([`Route::Malformed`]); also in the
    /// Worker for a plan replayed from its plan memo, which keeps only the
    /// rules checked ([`crate::pipeline::memo`]).
    pub canonical: Option<Canonical>,
    /// Every matching rule, in match order (methods in candidate order,
    /// then config order), with its key.
    pub matched: Vec<Matched<'c>>,
    pub route: Route<'c>,
}

/// Whether some rule's host and path take the request ([`Rule::takes`]).
pub(crate) fn rules_take(config: &Config, host: &str, path: &str) -> bool {
    config.rules.iter().any(|rule| rule.takes(host, path))
}

/// Plans one request. Pure: the same config and parts give the same plan.
pub fn plan<'c>(config: &'c Config, parts: &RequestParts<'_>) -> Plan<'c> {
    plan_walked(config, parts, None)
}

/// [`plan`], from `walked`, the zone entry's walk of the URL, when it is
/// this config's walk of `parts.url` ([`Walked::of`]): the same plan, the
/// URL not split and walked again, nor asked whether a rule takes it.
pub(crate) fn plan_walked<'c>(config: &'c Config, parts: &RequestParts<'_>, walked: Option<Walked<'_, '_>>) -> Plan<'c> {
    let (host, path, raw_query, entered, taken) = match walk(config, parts.url, walked) {
        Ok(walk) => walk,
        Err(e) => return Plan { canonical: None, matched: Vec::new(), route: Route::Malformed(e) },
    };

    // A path that enters the admin prefix is tollgate's, wherever its dot
    // segments lead: a browser sends the session cookie with it. With the
    // admin API on, the admin plane plans it (the zone's Worker never plans
    // one: its entry answers 404).
    if entered && ((parts.admin_token)().is_some() || config.admin_access.is_some()) {
        let methods = vec![parts.method.to_ascii_uppercase()];
        let canonical = Canonical { host, path, query: CanonicalQuery::parse(raw_query), methods, unreadable_body: None };
        return Plan { canonical: Some(canonical), matched: Vec::new(), route: Route::Admin };
    }

    // Fast path: no rule's host and path take the request, so no method,
    // parameter or header can make one match. Nothing more is read: no
    // override header, cookie or body (a zone-wide route sends every
    // request of the zone here).
    if !taken && !rules_take(config, &host, &path) {
        let methods = vec![parts.method.to_ascii_uppercase()];
        let canonical = Canonical { host, path, query: CanonicalQuery::parse(raw_query), methods, unreadable_body: None };
        return Plan { canonical: Some(canonical), matched: Vec::new(), route: Route::Check(Vec::new()) };
    }

    let header = parts.header;
    let body_params = body_parameters(parts);
    if body_params.is_none() && config.facts.reads_body_parameters() {
        return needs_body();
    }
    let (query, unreadable_body) = parameters(config, parts, raw_query, body_params.as_ref());
    let methods = candidate_methods(config, parts, &query, unreadable_body.is_some());
    let canonical = Canonical { host, path, query, methods, unreadable_body };
    let found = matching_rules(config, &canonical, header);
    // A success must see a `_method` in a form body too.
    if parts.body == Body::Unread
        && found.iter().any(|(rule, _)| rule.reads_body() || (body_params.is_none() && rule.settles_successes()))
    {
        return needs_body();
    }
    let matched = matched_rules(config, parts, &canonical, found, body_params.as_ref());
    let route = route_of(&matched, parts.log_key, &|m, key| trusted_device(parts, m.rule, key, m.spelling.as_ref()));
    Plan { canonical: Some(canonical), matched, route }
}

/// The host, canonical path and raw query of `url`, whether its walk
/// entered the admin prefix, and whether some rule is known to take it:
/// `walked`'s (it entered none, a rule takes it) when it is `config`'s walk
/// of `url`, else split and walked here (not known). `Err`: a malformed path.
pub(crate) fn walk<'u>(config: &Config, url: &'u str, walked: Option<Walked<'_, '_>>) -> Result<(String, String, &'u str, bool, bool), CanonError> {
    if let Some((host, path, query)) = walked.and_then(|w| w.of(config, url)) {
        return Ok((host, path, query, false, true));
    }
    let RawUrl { host, path: raw_path, query } = RawUrl::split(url);
    let (path, entered) = canonical_path_entering(raw_path, &config.admin_prefix)?;
    Ok((host, path, query, entered, false))
}

/// Every matching rule (`found`, in match order) with its key, spelling,
/// exemption and whether a success can settle it for this request.
fn matched_rules<'c>(
    config: &'c Config,
    parts: &RequestParts<'_>,
    canonical: &Canonical,
    found: Vec<(&'c Rule, Match)>,
    body_params: Option<&BodyParams>,
) -> Vec<Matched<'c>> {
    let header = parts.header;
    // Whether the origin routes the request as it was sent: three override
    // headers looked up, only for a rule a success can settle.
    let routed_as_sent = std::cell::OnceCell::new();

    // `Content-Type` is looked up only for a body read, when a key part
    // names one of its fields.
    let body_lookup = |field: &str| match parts.body {
        Body::Read(bytes) => body_field_values(&header("content-type").unwrap_or_default(), bytes, field),
        _ => Vec::new(),
    };
    let client_ip = header("cf-connecting-ip");
    let exempt_inputs = ExemptInputs {
        client_ip: client_ip.as_deref(),
        asn: parts.asn,
        verified_bot: parts.verified_bot,
        header,
        secret: parts.secret,
    };
    // Asked once per request, and only when some rule matched.
    let everywhere = if found.is_empty() { None } else { config.exempt.exempts(&exempt_inputs) };
    found
        .into_iter()
        .map(|(rule, found)| {
            let inputs = KeyInputs {
                client_ip: client_ip.as_deref(),
                header,
                query: &canonical.query,
                path_groups: &found.groups,
                fold_path_groups: rule.case_insensitive,
                body: &body_lookup,
                country: parts.country,
                asn: parts.asn,
                ipv6_prefix: config.ipv6_prefix,
            };
            let key = key_outcome(rule, &inputs);
            let spelling = relief_spelling(rule, &key, &inputs);
            let own_method = rule.settles_successes()
                && own_method(rule, parts.method)
                && *routed_as_sent.get_or_init(|| !overridden(parts, &canonical.query, body_params));
            let exempt = everywhere.clone().or_else(|| rule.exempt.exempts(&exempt_inputs)).map(|by| Exempted {
                key_hash: match &key {
                    KeyOutcome::Keys { keys, .. } => keys.first().map_or_else(|| "-".into(), |k| key_hash(k, parts.log_key)),
                    _ => "-".into(),
                },
                by,
            });
            Matched { rule, found, key, own_method, exempt, spelling }
        })
        .collect()
}

fn needs_body<'c>() -> Plan<'c> {
    Plan { canonical: None, matched: Vec::new(), route: Route::NeedsBody }
}

/// What the body holds as parameters ([`body::parameters`]); `None` for a
/// form body not read yet. GET and HEAD have none: origins do not read
/// their bodies.
fn body_parameters(parts: &RequestParts<'_>) -> Option<BodyParams> {
    if parts.method.eq_ignore_ascii_case("GET") || parts.method.eq_ignore_ascii_case("HEAD") {
        return Some(BodyParams::NotParameters);
    }
    let content_type = (parts.header)("content-type").unwrap_or_default();
    let encoding = (parts.header)("content-encoding");
    let bytes = match parts.body {
        Body::Unread if body::needs_bytes(&content_type, encoding.as_deref()) => return None,
        Body::Read(bytes) => Some(bytes),
        Body::Unread | Body::Unusable => None,
    };
    Some(body::parameters(&content_type, encoding.as_deref(), bytes))
}

/// The parameters rules look at ([`Canonical::query`]), and why the form
/// body that would join them could not be read.
fn parameters(
    config: &Config,
    parts: &RequestParts<'_>,
    raw_query: &str,
    body: Option<&BodyParams>,
) -> (CanonicalQuery, Option<Unreadable>) {
    let mut query = CanonicalQuery::parse(raw_query);
    let mut unreadable = None;
    if config.facts.reads_body_parameters() {
        match body {
            Some(BodyParams::Pairs(pairs)) => query.join(Source::Body, pairs.clone()),
            Some(BodyParams::Unreadable(why)) => {
                query.mark_body_unreadable();
                unreadable = Some(why.clone());
            }
            Some(BodyParams::NotParameters) | None => {}
        }
    }
    if config.facts.any_cookie_source {
        if let Some(cookie) = (parts.header)("cookie") {
            query.join_cookies(&cookie);
        }
    }
    (query, unreadable)
}

/// The request's method, then each item of each override (looked up only
/// when some rule restricts methods: otherwise no override can change a
/// match).
///
/// Fail safe: a POST whose form body could not be read
/// (`unreadable_body`) may hold a `_method` naming any method, so every
/// method some rule lists follows. Bounded to POST: Symfony and Laravel,
/// Rails' `Rack::MethodOverride`, Express's method-override and ASP.NET
/// Core's `UseHttpMethodOverride` honour `_method` only on a POST. The
/// cost: such a POST to a path of a rule that lists methods counts against
/// that rule (a large upload POSTed to `/posts/7` counts as a DELETE of
/// it), which only ever makes a limit stricter.
fn candidate_methods(config: &Config, parts: &RequestParts<'_>, query: &CanonicalQuery, unreadable_body: bool) -> Vec<String> {
    if !config.facts.any_method_restriction {
        return method_candidates(parts.method, std::iter::empty());
    }
    let overrides = METHOD_OVERRIDE_HEADERS
        .iter()
        .filter_map(|h| (parts.header)(h))
        .chain(query.values("_method").map(str::to_string));
    let mut methods = method_candidates(parts.method, overrides);
    if unreadable_body && parts.method.eq_ignore_ascii_case("POST") {
        for method in &config.facts.listed_methods {
            if !methods.contains(method) {
                methods.push(method.clone());
            }
        }
    }
    methods
}

/// Whether the origin may route the request as another method than the one
/// sent: an item of an override header, or of a `_method` in the query or
/// in a form body, names another (whatever tollgate's matching made of
/// it), or the body may hold one tollgate cannot read (a form body not
/// read, or unreadable).
fn overridden(parts: &RequestParts<'_>, query: &CanonicalQuery, body: Option<&BodyParams>) -> bool {
    let other = |value: &str| value.split(',').any(|v| !v.trim().is_empty() && !v.trim().eq_ignore_ascii_case(parts.method));
    let body_method = match body {
        Some(BodyParams::Pairs(pairs)) => pairs.iter().any(|(name, value)| {
            name.split('\0').next().is_some_and(|name| normalize_key(name) == "_method") && other(value)
        }),
        Some(BodyParams::Unreadable(_)) | None => true,
        Some(BodyParams::NotParameters) => false,
    };
    METHOD_OVERRIDE_HEADERS.iter().filter_map(|h| (parts.header)(h)).any(|v| other(&v))
        || query.values("_method").any(other)
        || body_method
}

/// Whether `rule` matches `method` as sent: one of its methods exactly (no
/// HEAD for GET), never OPTIONS (a CORS preflight is no attempt at what
/// the rule guards, and many origins answer it 200).
pub(crate) fn own_method(rule: &Rule, method: &str) -> bool {
    !method.eq_ignore_ascii_case("OPTIONS") && rule.lists_method(method)
}

/// The rules that match under any candidate method, each once, then those
/// whose header conditions hold.
fn matching_rules<'c>(
    config: &'c Config,
    canonical: &Canonical,
    header: &dyn Fn(&str) -> Option<String>,
) -> Vec<(&'c Rule, Match)> {
    let mut matched: Vec<(&'c Rule, Match)> = Vec::new();
    for method in &canonical.methods {
        let view = RequestView { method, host: &canonical.host, path: &canonical.path, query: &canonical.query };
        for (rule, found) in config.matching(&view) {
            if !matched.iter().any(|(seen, _)| std::ptr::eq(*seen, rule)) {
                matched.push((rule, found));
            }
        }
    }
    matched.retain(|(rule, _)| rule.headers_hold(header).is_ok());
    matched
}

/// How the request spelled its identity, for a rule whose success
/// relieves, keyed by its own key (not the fallback): [`Matched::spelling`].
fn relief_spelling(rule: &Rule, key: &KeyOutcome, inputs: &KeyInputs<'_>) -> Option<Spelling> {
    match key {
        KeyOutcome::Keys { fell_back: false, .. } if rule.settles_successes() => {
            Some(Spelling::of(&rule.key.iter().map(|part| (part, raw_values(part, inputs))).collect::<Vec<_>>()))
        }
        _ => None,
    }
}

/// A rule's key, or its missing-key policy applied.
fn key_outcome(rule: &Rule, inputs: &KeyInputs<'_>) -> KeyOutcome {
    match (derive_keys(&rule.key, inputs), &rule.on_missing_key) {
        (Ok(keys), _) => KeyOutcome::Keys { keys, fell_back: false },
        (Err(too_many @ KeyError::TooMany { .. }), _) => KeyOutcome::Rejected(too_many),
        (Err(missing), MissingKey::Skip) => KeyOutcome::Skipped(missing),
        (Err(missing), MissingKey::Reject) => KeyOutcome::Rejected(missing),
        (Err(_), MissingKey::Fallback(parts)) => match derive_keys(parts, inputs) {
            Ok(keys) => KeyOutcome::Keys { keys, fell_back: true },
            Err(why) => KeyOutcome::Rejected(why),
        },
    }
}

/// The device a request comes from, for a `trusted_device` rule: its cookie
/// verified for this account, as this request spells it (one spelling:
/// a cookie earned by a look-alike account, or for one of two names the
/// request gives, is no device of this one), under the rule's secret
/// ([`crate::request::device`]).
fn trusted_device(parts: &RequestParts<'_>, rule: &Rule, key: &str, spelling: Option<&Spelling>) -> Option<String> {
    let device = rule.trusted_device.as_ref()?;
    let spelling = spelling?.tag()?;
    let value = crate::request::key::cookie_value(&(parts.header)("cookie")?, &device.cookie)?;
    let secret = (parts.secret)(&device.secret).filter(|s| !s.trim().is_empty())?;
    crate::request::device::verify(secret.trim().as_bytes(), &rule.name, key, &spelling, &value, parts.now_ms)
}

/// Exempt rules are left out (an exempt request is never refused for a
/// missing key either); of the others, the first rejecting rule answers;
/// otherwise every keyed rule is checked.
fn route_of<'c>(
    matched: &[Matched<'c>],
    log_key: Option<&[u8]>,
    trusted: &dyn Fn(&Matched<'_>, &str) -> Option<String>,
) -> Route<'c> {
    let mut applied = Vec::new();
    for m in matched.iter().filter(|m| m.exempt.is_none()) {
        match &m.key {
            KeyOutcome::Rejected(missing) => return Route::MissingKey { rule: m.rule, missing: missing.clone() },
            KeyOutcome::Skipped(_) => {}
            KeyOutcome::Keys { keys, fell_back } => {
                for key in keys {
                    let device = if *fell_back { None } else { trusted(m, key) };
                    let counted = match &device {
                        Some(device) => crate::request::device::device_key(key, device),
                        None => key.clone(),
                    };
                    applied.push(Applied {
                        rule: m.rule,
                        id: object_name(m.rule, &counted),
                        key_hash: key_hash(&counted, log_key),
                        key: key.clone(),
                        fell_back: *fell_back,
                        own_method: m.own_method,
                        device,
                        spelling: m.spelling,
                    });
                }
            }
        }
    }
    Route::Check(applied)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Whether a request to `url` may need more than [`plan`]'s fast path:
    /// the zone's [`crate::pipeline::plane::walk`] short of `Door::Pass`
    /// (its path malformed, entering the admin prefix, or taken by some
    /// rule's host and path).
    pub(crate) fn may_apply(config: &Config, url: &str) -> bool {
        use crate::pipeline::plane::{walk, Door, Plane};
        walk(config, url, Plane::Zone, &|host, path| rules_take(config, host, path)).0 != Door::Pass
    }
    use crate::testing::Req;
    use crate::request::canon::canonical_host;
    use url::Url;
    use serde_json::json;

    fn config(rules: serde_json::Value) -> Config {
        crate::testing::config(json!(rules))
    }

    fn limits() -> serde_json::Value {
        json!([{ "requests": 1, "window": "1m" }])
    }

    /// A request `method url` (under example.com, from NZ, AS 64500) with
    /// `headers` and, when given, the admin `token`: what the plan tests
    /// here and the admin plane's plan tests send.
    pub(crate) fn request_of(method: &str, url: &str, headers: &[(&str, &str)], token: Option<&str>) -> Req {
        let url = Url::parse(&format!("https://example.com{url}")).unwrap();
        let mut req = Req::new(method, url.as_str()).country("nz").asn(64500);
        for (name, value) in headers {
            req = req.header(name, value);
        }
        if let Some(token) = token {
            req = req.admin_token(token);
        }
        req
    }

    /// Plans `method url` with `headers` and `body`, as the Worker does:
    /// without the body first, then with it when the plan asks.
    fn plan_of<'c>(
        config: &'c Config,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
        token: Option<&str>,
    ) -> (Plan<'c>, bool) {
        let req = request_of(method, url, headers, token);
        let first = req.plan_once(config, Body::Unread);
        if !matches!(first.route, Route::NeedsBody) {
            return (first, false);
        }
        let read = body.map_or(Body::Unusable, Body::Read);
        let second = req.plan_once(config, read);
        assert!(!matches!(second.route, Route::NeedsBody), "a plan with the body never asks again");
        (second, true)
    }

    /// The zone entry's walk of a URL it plans is what the plan would find
    /// itself: planned from it or afresh, the same plan. A walk is taken
    /// only by the config and the URL it was made for.
    #[test]
    fn a_plan_from_the_entrys_walk_is_the_fresh_plan() {
        use crate::pipeline::plane::{self, Door, Plane};
        let c = config(json!([
            {"name": "api", "path": "/api/:id", "query": {"mode": "heavy"}, "key": ["ip", "path:id"], "limits": limits()},
            {"name": "host", "path": "/h/*", "host": "api.example.com", "limits": limits()},
        ]));
        let other = config(json!([{"name": "api", "path": "/api/:id", "limits": limits()}]));
        let header = |name: &str| (name == "cf-connecting-ip").then(|| "192.0.2.1".to_string());
        let urls = [
            "https://example.com/api/42?mode=heavy",
            "https://example.com/API/42/?mode=heavy&x=1#f",
            "https://example.com/api/42",
            "https://example.com/api/42?",
            "https://example.com/api/42#?mode=heavy",
            "https://api.example.com:8443/h/x?mode=heavy",
            "https://example.com/h/x",
            "https://example.com/elsewhere?mode=heavy",
            "https://example.com/.tollgate/api/1",
            "https://example.com/api/%00",
            "/api/7?mode=heavy",
        ];
        let mut walks = 0;
        for url in urls {
            let walk = || plane::walk(&c, url, Plane::Zone, &|host, path| rules_take(&c, host, path));
            let (entry, walked) = walk();
            assert!(walked.is_none() || entry == Door::Plan, "{url}");
            walks += usize::from(walked.is_some());
            let parts = RequestParts::plain("GET", url, &header, Body::Unread);
            assert_eq!(format!("{:?}", plan_walked(&c, &parts, walked)), format!("{:?}", plan(&c, &parts)), "{url}");
            assert!(walk().1.and_then(|w| w.of(&other, url)).is_none(), "{url}: another config's");
            assert!(walk().1.and_then(|w| w.of(&c, "https://example.com/api/43")).is_none(), "{url}: another URL's");
            let copy = url.to_string();
            assert!(walk().1.and_then(|w| w.of(&c, &copy)).is_none(), "{url}: another string, the same text");
        }
        assert_eq!(walks, 7);
    }

    fn checked(plan: &Plan<'_>) -> Vec<(String, String)> {
        match &plan.route {
            Route::Check(applied) => applied.iter().map(|a| (a.rule.name.clone(), a.key.clone())).collect(),
            other => panic!("not a check: {other:?}"),
        }
    }

    const IP: (&str, &str) = ("cf-connecting-ip", "198.51.100.7");

    #[test]
    fn a_refused_path_is_malformed() {
        let c = config(json!([{ "name": "a", "path": "/a", "limits": limits() }]));
        let (p, _) = plan_of(&c, "GET", "/a%00", &[IP], None, None);
        assert!(matches!(p.route, Route::Malformed(_)));
        assert!(p.canonical.is_none());
    }

    #[test]
    fn no_matching_rule_checks_nothing_and_reads_no_body() {
        let c = config(json!([{ "name": "login", "path": "/login", "key": ["body:email"], "limits": limits() }]));
        let (p, read) = plan_of(&c, "POST", "/other", &[IP, ("content-type", "application/json")], Some(b"{}"), None);
        assert!(checked(&p).is_empty());
        assert!(!read, "the body is read only for a rule that matched");
        let heavy = heavy();
        let (p, read) = plan_of(&heavy, "POST", "/other?mode=heavy", &[IP, FORM], Some(b"mode=heavy"), None);
        assert!(!read && checked(&p).is_empty(), "no rule takes /other: its form body is not read");
        assert_eq!(p.canonical.map(|c| c.path), Some("/other".to_string()), "explain still shows the canonical view");
    }

    /// The Worker skips the plan when the zone's walk says `Door::Pass`: only for
    /// requests the plan would check nothing for and read nothing of.
    #[test]
    fn may_apply_is_false_only_where_the_plan_checks_nothing() {
        let c = config(json!([
            { "name": "heavy", "path": "/x", "query": { "mode": "heavy" }, "limits": limits() },
            { "name": "del", "path": "/posts/:id", "methods": ["DELETE"], "limits": limits() },
            { "name": "api", "host": "api.example.com", "path": "/v1/*", "limits": limits() },
        ]));
        // As the runtime hands it over: the WHATWG serialization, whose
        // host and path split as they are equal the parsed URL's.
        let serialized = |url: &str| crate::tools::explain::parse_url(url).unwrap().to_string();
        // The plan reads the URL this way too (`RequestParts::url`): the
        // query as well, and the path even before canonicalization.
        for url in [
            "/a%2F..%2Fx", "/x;a=b?c", "//x//y", "/./x/../y", "/x/%2e%2e/", "/%78", "/a b", "/\\x", "https://EX.com:80/P?q#h",
            "https://ex.com", "https://ex.com?q", "https://a@b@ex.com/p", "https://[2001:DB8::1]:80/p", "/x?a=1#f?b=2", "/x??mode=heavy",
            "/x?", "/x?#", "/x?mode='heavy'&a=<b>", "/x?a=%zz&b=%", "/caf\u{e9}?q=\u{e9}", "https://u:p%3F@ex.com/p?x", "https://ex.com/a@b:c?d@e:f",
            "https://xn--caf-dma.ex.com/p", "/x\t/y\n?a\r=1", "https://ex.com:443/x?y=https://z/?w#v",
        ] {
            let parsed = crate::tools::explain::parse_url(url).unwrap();
            let raw = RawUrl::split(parsed.as_str());
            assert_eq!(
                (raw.host.as_str(), raw.path, raw.query),
                (canonical_host(parsed.host_str().unwrap_or("")).as_str(), parsed.path(), parsed.query().unwrap_or("")),
                "{url}"
            );
        }
        for url in ["/x?mode=heavy", "/X.json", "/a/../x", "/posts/7", "/posts/7?_method=DELETE", "/.tollgate/status", "/x%00", "https://api.example.com/v1/a", "https://API.example.com.:8443/v1/a#f", "/x#frag"] {
            assert!(may_apply(&c, &serialized(url)), "{url}");
        }
        for url in ["/", "/y?mode=heavy", "/posts", "/v1/a", "https://api.example.com/v2", "https://u:p@api.example.com/v2?/v1/a", "https://[::1]:8443/v1/a"] {
            assert!(!may_apply(&c, &serialized(url)), "{url}");
            let (p, read) = plan_of(&c, "POST", url, &[IP, FORM, ("x-http-method-override", "DELETE")], Some(b"mode=heavy&_method=DELETE"), None);
            assert!(!read && matches!(&p.route, Route::Check(applied) if applied.is_empty()), "{url}");
        }
    }

    #[test]
    fn an_admin_request_is_only_recognized_here_and_only_with_the_admin_api_on() {
        let c = config(json!([{ "name": "a", "path": "/api/*", "limits": limits() }]));
        let auth = ("authorization", "Bearer s3cret");
        let (p, _) = plan_of(&c, "GET", "/.tollgate/status?rule=a&ip=1.2.3.4", &[IP], None, None);
        assert!(matches!(p.route, Route::Check(ref a) if a.is_empty()), "off: the path is the origin's");
        let (p, _) = plan_of(&c, "GET", "/.tollgate/status?rule=a&ip=1.2.3.4", &[IP], None, Some("s3cret"));
        assert!(matches!(p.route, Route::Admin), "{:?}", p.route);
        for raw in ["/.tollgate/..%2fapi/echo", "/.tollgate/..;/x", "/.tollgate/..%5cx", "/.tollgate/..%252fx", "/.tollgate/ui/..%2f..%2fx", "/.TOLLGATE/..%2fapi/x"] {
            assert!(may_apply(&c, &format!("https://example.com{raw}")), "{raw}: off the fast path");
            let (p, _) = plan_of(&c, "GET", raw, &[IP, auth], None, Some("s3cret"));
            assert!(matches!(p.route, Route::Admin), "{raw}: {:?}", p.route);
            let (p, _) = plan_of(&c, "GET", raw, &[IP], None, None);
            assert!(!matches!(p.route, Route::Admin), "{raw}: the admin API off, the path is the origin's");
        }
    }

    #[test]
    fn the_log_key_keys_every_hash() {
        let c = config(json!([{ "name": "a", "path": "/a", "limits": limits() }]));
        let url = Url::parse("https://example.com/a").unwrap();
        let header = |name: &str| (name == "cf-connecting-ip").then(|| "198.51.100.7".to_string());
        let parts = |log_key| RequestParts {
            log_key,
            ..RequestParts::plain("GET", url.as_str(), &header, Body::Unread)
        };
        let hash_of = |p: Plan<'_>| match p.route {
            Route::Check(applied) => applied[0].key_hash.clone(),
            other => panic!("{other:?}"),
        };
        let unkeyed = hash_of(plan(&c, &parts(None)));
        let keyed = hash_of(plan(&c, &parts(Some(b"log secret"))));
        assert_eq!(unkeyed, key_hash("ip=198.51.100.7", None));
        assert_eq!(keyed, key_hash("ip=198.51.100.7", Some(b"log secret")));
        assert_ne!(keyed, unkeyed);
    }

    const FORM: (&str, &str) = ("content-type", "application/x-www-form-urlencoded; charset=utf-8");
    const MULTIPART: (&str, &str) = ("content-type", "multipart/form-data; boundary=----WebKitFormBoundaryA1");

    /// A multipart body (Chrome's shape) of one field.
    fn multipart(name: &str, value: &str) -> Vec<u8> {
        let b = "----WebKitFormBoundaryA1";
        format!("--{b}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n--{b}--\r\n").into_bytes()
    }

    fn heavy() -> Config {
        config(json!([{ "name": "heavy", "path": "/x", "query": { "mode": "heavy" }, "limits": limits() }]))
    }

    #[test]
    fn form_bodies_urlencoded_or_multipart_join_the_parameters() {
        let c = heavy();
        let (p, read) = plan_of(&c, "POST", "/x", &[IP, FORM], Some(b"mode=heavy"), None);
        assert!(read);
        assert_eq!(checked(&p), [("heavy".to_string(), "ip=198.51.100.7".to_string())]);
        let (p, read) = plan_of(&c, "PUT", "/x", &[IP, MULTIPART], Some(&multipart("mode", "heavy")), None);
        assert!(read && checked(&p).len() == 1, "multipart, as PHP's $_POST and Laravel's input() read it");
        let canonical = p.canonical.unwrap();
        assert_eq!(canonical.query.sources(), [Source::Body]);
        assert_eq!(canonical.unreadable_body, None);
        let (p, _) = plan_of(&c, "POST", "/x", &[IP, MULTIPART], Some(&multipart("mode", "light")), None);
        assert!(checked(&p).is_empty());
        let (p, read) = plan_of(&c, "GET", "/x", &[IP, FORM], Some(b"mode=heavy"), None);
        assert!(!read && checked(&p).is_empty(), "GET and HEAD have no form");
        let (p, read) = plan_of(&c, "POST", "/x", &[IP, ("content-type", "text/plain")], Some(b"mode=heavy"), None);
        assert!(!read && checked(&p).is_empty(), "only form bodies");
        let without = config(json!([{ "name": "all", "path": "/x", "limits": limits() }]));
        let (_, read) = plan_of(&without, "POST", "/x", &[IP, FORM], Some(b"mode=heavy"), None);
        assert!(!read, "no rule has query conditions or methods: the body is not read");
        let methods = config(json!([{ "name": "del", "path": "/y", "methods": ["DELETE"], "limits": limits() }]));
        let (_, read) = plan_of(&methods, "POST", "/y", &[IP, MULTIPART], Some(&multipart("a", "1")), None);
        assert!(read, "a rule lists methods: the body may hold a _method");
        let (p, read) = plan_of(&methods, "POST", "/x", &[IP, MULTIPART], Some(&multipart("_method", "DELETE")), None);
        assert!(!read && checked(&p).is_empty(), "no rule takes the path: no body is read");
    }

    /// A body over the cap, compressed, in an unknown
    /// charset or malformed may hold `mode=heavy`; it matches.
    #[test]
    fn an_unreadable_form_body_satisfies_body_conditions() {
        let c = heavy();
        let gzip = ("content-encoding", "gzip");
        let (p, _) = plan_of(&c, "POST", "/x", &[IP, FORM], None, None);
        assert_eq!(checked(&p).len(), 1, "over body_limit");
        assert_eq!(p.canonical.unwrap().unreadable_body, Some(Unreadable::TooLarge));
        let (p, read) = plan_of(&c, "POST", "/x?mode=light", &[IP, FORM, gzip], Some(b"\x1f\x8b"), None);
        assert!(!read, "the headers alone make it unreadable");
        assert_eq!(checked(&p).len(), 1, "even with another value in the URL: PHP and Laravel let the body win");
        assert_eq!(p.canonical.unwrap().unreadable_body, Some(Unreadable::Compressed("gzip".into())));
        let ebcdic = ("content-type", "application/x-www-form-urlencoded; charset=ibm037");
        assert_eq!(checked(&plan_of(&c, "POST", "/x", &[IP, ebcdic], Some(b"\x94\x96"), None).0).len(), 1);
        let open = b"------WebKitFormBoundaryA1\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1";
        assert_eq!(checked(&plan_of(&c, "POST", "/x", &[IP, MULTIPART], Some(open), None).0).len(), 1, "no end boundary");
        // Only rules whose conditions read the body, and only parameter bodies.
        let url_only = config(json!([{ "name": "q", "path": "/x", "query": { "mode": "heavy" }, "query_sources": ["query"], "limits": limits() }]));
        assert!(checked(&plan_of(&url_only, "POST", "/x", &[IP, FORM], None, None).0).is_empty());
        let json_type = ("content-type", "application/json");
        assert_eq!(checked(&plan_of(&c, "POST", "/x", &[IP, json_type, gzip], None, None).0).len(), 1, "compressed JSON");
        assert_eq!(checked(&plan_of(&c, "POST", "/x", &[IP, json_type], Some(b"{\"mode\":"), None).0).len(), 1, "malformed JSON");
        assert_eq!(checked(&plan_of(&c, "POST", "/x", &[IP, json_type], Some(br#"{"mode":"heavy"}"#), None).0).len(), 1, "Rails params");
        assert!(checked(&plan_of(&c, "POST", "/x", &[IP, json_type], Some(br#"{"mode":"light"}"#), None).0).is_empty());
        let text = ("content-type", "text/plain");
        assert!(checked(&plan_of(&c, "POST", "/x", &[IP, text, gzip], None, None).0).is_empty());
    }

    #[test]
    fn cookies_are_parameters_only_for_rules_that_list_them() {
        let c = config(json!([
            { "name": "php", "path": "/x", "query": { "mode": "heavy" }, "query_sources": ["query", "body", "cookie"], "limits": limits() },
            { "name": "default", "path": "/x", "query": { "mode": "heavy" }, "limits": limits() },
        ]));
        let names = |headers: &[(&str, &str)]| -> Vec<String> {
            checked(&plan_of(&c, "GET", "/x", headers, None, None).0).into_iter().map(|(n, _)| n).collect()
        };
        assert_eq!(names(&[IP, ("cookie", "sid=1; MODE=heavy")]), ["php"]);
        assert_eq!(names(&[IP, ("cookie", "a=1;mode=hea%76y")]), ["php"], "decoded as PHP decodes cookies");
        assert_eq!(names(&[IP, ("cookie", "mode=light")]), Vec::<String>::new());
        let (p, _) = plan_of(&c, "GET", "/x?mode=heavy", &[IP, ("cookie", "mode=light")], None, None);
        assert_eq!(p.canonical.unwrap().query.sources(), [Source::Query, Source::Cookie]);
        let errors = Config::from_json(&json!({ "rules": [
            { "name": "a", "path": "/a", "query_sources": ["query", "header"], "query": { "m": "x" }, "limits": limits() },
            { "name": "b", "path": "/b", "query_sources": ["cookie"], "limits": limits() },
        ]}))
        .err()
        .unwrap_or_default();
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert!(errors[0].contains("rule `a`, field `query_sources`: must be a non-empty list"), "{errors:?}");
        assert!(errors[1].contains("rule `b`, field `query_sources`: only used with query conditions"), "{errors:?}");
    }

    #[test]
    fn method_overrides_when_a_rule_restricts_methods() {
        let c = config(json!([{ "name": "del", "path": "/posts/:id", "methods": ["DELETE"], "limits": limits() }]));
        for headers in [
            vec![IP, ("x-http-method-override", "delete")],
            vec![IP, ("x-http-method", "DELETE")],
            vec![IP, ("x-method-override", "DELETE")],
        ] {
            let (p, _) = plan_of(&c, "POST", "/posts/7", &headers, None, None);
            assert_eq!(checked(&p).len(), 1, "{headers:?}");
            assert_eq!(p.canonical.unwrap().methods, ["POST", "DELETE"]);
        }
        let (p, _) = plan_of(&c, "POST", "/posts/7?_method=DELETE", &[IP], None, None);
        assert_eq!(checked(&p).len(), 1, "Laravel's _method");
        let (p, _) = plan_of(&c, "POST", "/posts/7", &[IP], None, None);
        assert!(checked(&p).is_empty());
        let any = config(json!([{ "name": "any", "path": "/posts/:id", "limits": limits() }]));
        let (p, _) = plan_of(&any, "POST", "/posts/7", &[IP, ("x-http-method-override", "DELETE")], None, None);
        assert_eq!(p.canonical.unwrap().methods, ["POST"], "no rule restricts methods: overrides are not read");
    }

    /// A DELETE rule, and no rule with query conditions.
    #[test]
    fn every_override_item_and_body_kind_is_a_candidate() {
        let c = config(json!([{ "name": "del", "path": "/posts/:id", "methods": ["DELETE"], "limits": limits() }]));
        let methods = |headers: &[(&str, &str)], body: Option<&[u8]>| plan_of(&c, "POST", "/posts/7", headers, body, None).0.canonical.unwrap().methods;
        assert_eq!(methods(&[IP, ("x-http-method-override", "DELETE, x")], None), ["POST", "DELETE", "X"]);
        let twice = [IP, ("x-http-method-override", "PATCH"), ("x-http-method-override", "DELETE")];
        assert_eq!(methods(&twice, None), ["POST", "PATCH", "DELETE"], "a header sent twice");
        assert_eq!(methods(&[IP, FORM], Some(b"title=x&_method=DELETE")), ["POST", "DELETE"], "a form body's _method");
        assert_eq!(methods(&[IP, MULTIPART], Some(&multipart("_method", "delete"))), ["POST", "DELETE"], "multipart");
        // Fail safe: an unreadable form body of a POST may override to any listed method.
        assert_eq!(methods(&[IP, FORM], None), ["POST", "DELETE"], "over body_limit");
        assert_eq!(methods(&[IP, MULTIPART, ("content-encoding", "br")], Some(b"x")), ["POST", "DELETE"], "compressed");
        let json_type = ("content-type", "application/json; charset=utf-8");
        assert_eq!(methods(&[IP, json_type], Some(br#"{"title":"x","_method":"DELETE"}"#)), ["POST", "DELETE"], "a JSON body's _method");
        assert_eq!(methods(&[IP, json_type], Some(br#"{"title":"x"}"#)), ["POST"], "JSON without one");
        assert_eq!(methods(&[IP, json_type], None), ["POST", "DELETE"], "JSON over body_limit");
        assert_eq!(methods(&[IP, ("content-type", "text/plain")], None), ["POST"], "not a parameter body");
        let (p, _) = plan_of(&c, "PUT", "/posts/7", &[IP, FORM], None, None);
        assert_eq!(p.canonical.unwrap().methods, ["PUT"], "only a POST is overridden by _method");
        assert_eq!(checked(&plan_of(&c, "POST", "/posts/7", &[IP, FORM], None, None).0).len(), 1);
    }

    #[test]
    fn rules_match_once_in_candidate_then_config_order() {
        let c = config(json!([
            { "name": "del", "path": "/p", "methods": ["DELETE"], "limits": limits() },
            { "name": "post", "path": "/p", "methods": ["POST"], "limits": limits() },
            { "name": "any", "path": "/p", "limits": limits() },
        ]));
        let (p, _) = plan_of(&c, "POST", "/p", &[IP, ("x-http-method-override", "DELETE")], None, None);
        let names: Vec<String> = checked(&p).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["post", "any", "del"]);
    }

    #[test]
    fn header_conditions_filter_matches() {
        let c = config(json!([{ "name": "free", "path": "/p", "header": { "x-plan": "free" }, "limits": limits() }]));
        let (p, _) = plan_of(&c, "GET", "/p", &[IP, ("x-plan", "gold"), ("x-plan", "free")], None, None);
        assert_eq!(checked(&p).len(), 1, "a repeated header matches if any item does");
        let (p, _) = plan_of(&c, "GET", "/p", &[IP, ("x-plan", "gold")], None, None);
        assert!(checked(&p).is_empty() && p.matched.is_empty());
    }

    #[test]
    fn missing_keys_follow_each_rules_policy() {
        let c = config(json!([
            { "name": "skip", "path": "/p", "key": ["header:x-user"], "on_missing_key": "skip", "limits": limits() },
            { "name": "fall", "path": "/p", "key": ["header:x-user"], "fallback_key": ["ip"], "limits": limits() },
            { "name": "reject", "path": "/p", "key": ["header:x-user"], "limits": limits() },
            { "name": "later", "path": "/p", "key": ["header:x-other"], "limits": limits() },
        ]));
        let (p, _) = plan_of(&c, "GET", "/p", &[IP], None, None);
        match &p.route {
            Route::MissingKey { rule, missing } => {
                assert_eq!(rule.name, "reject", "the first rejecting rule answers");
                assert_eq!(missing.to_string(), "the request has no usable `header:x-user`");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(p.matched[0].key, KeyOutcome::Skipped(_)));
        assert_eq!(p.matched[1].key, KeyOutcome::Keys { keys: vec!["ip=198.51.100.7".into()], fell_back: true });
        let (p, _) = plan_of(&c, "GET", "/p", &[IP, ("x-user", "u1"), ("x-other", "o")], None, None);
        let applied = match &p.route {
            Route::Check(a) => a,
            other => panic!("{other:?}"),
        };
        assert_eq!(applied.len(), 4);
        assert!(!applied[1].fell_back);
        assert_eq!(applied[0].id, "skip\nheader:x-user=u1");
        assert_eq!(applied[0].key_hash, key_hash("header:x-user=u1", None));
        // The fallback missing too: rejected.
        let (p, _) = plan_of(&c, "GET", "/p", &[], None, None);
        assert!(matches!(&p.route, Route::MissingKey { rule, .. } if rule.name == "fall"));
    }

    /// `:raw` is the group as sent on a case-insensitive rule;
    /// an untyped or folding type is read as the rule matched (one count
    /// for `/chat/AbC` and `/chat/abc`, as before); overrides agree.
    #[test]
    fn a_raw_path_group_keeps_the_case_sent() {
        let c = config(json!([
            {"name": "raw", "path": "/chat/:link", "key": ["path:link:raw"], "limits": limits(),
             "overrides": {"AbC123": [{"requests": 5, "window": "1m"}]}},
            {"name": "plain", "path": "/chat/:link", "key": ["path:link"], "limits": limits()},
            {"name": "lower", "path": "/chat/:link", "key": ["path:link:lower"], "limits": limits()}
        ]));
        let keys = |path: &str| checked(&plan_of(&c, "GET", path, &[IP], None, None).0);
        let pair = |rule: &str, key: &str| (rule.to_string(), key.to_string());
        assert_eq!(
            keys("/CHAT/AbC123"),
            vec![pair("raw", "path:link:raw=AbC123"), pair("plain", "path:link=abc123"), pair("lower", "path:link:lower=abc123")]
        );
        assert_eq!(keys("/chat/abc123")[0], pair("raw", "path:link:raw=abc123"));
        assert_eq!(c.rules[0].limits_for("path:link:raw=AbC123")[0].requests.get(), 5, "the override names the key as sent");
        assert_eq!(c.rules[0].limits_for("path:link:raw=abc123")[0].requests.get(), 1);
        assert_eq!(c.rules[0].identity_key("AbC123").as_deref(), Some("path:link:raw=AbC123"));
        assert_eq!(c.rules[1].identity_key("AbC123").as_deref(), Some("path:link=abc123"));
    }

    #[test]
    fn body_keys_read_the_body_and_cf_keys_read_cf() {
        let c = config(json!([
            { "name": "login", "path": "/login", "key": ["body:email"], "limits": limits() },
            { "name": "geo", "path": "/login", "key": ["country", "asn"], "limits": limits() },
        ]));
        let json_type = ("content-type", "application/json");
        let (p, read) = plan_of(&c, "POST", "/login", &[IP, json_type], Some(br#"{"email":" A@x "}"#), None);
        assert!(read);
        let keys = checked(&p);
        assert_eq!(keys[0].1, format!("body:email={}", crate::request::key::tests::hash_identity("a@x").unwrap()));
        assert_eq!(keys[1].1, "country=NZ|asn=64500");
        let (p, _) = plan_of(&c, "POST", "/login", &[IP, json_type], None, None);
        assert!(matches!(&p.route, Route::MissingKey { rule, .. } if rule.name == "login"), "unusable body");
    }

    /// Only a request the rule matched by its own method may
    /// settle it with a success; an override, HEAD for GET and OPTIONS
    /// reach other handlers of the origin, which may answer 200.
    #[test]
    fn own_method_is_the_method_as_sent_without_override() {
        let c = config(json!([
            { "name": "post", "path": "/login", "methods": ["POST"], "key": ["header:x-user"], "count_statuses": [401],
              "clear_on_success": true, "limits": limits() },
            { "name": "any", "path": "/login", "key": ["header:x-user"], "count_statuses": [401],
              "clear_on_success": true, "limits": limits() },
            { "name": "get", "path": "/page", "methods": ["GET"], "key": ["header:x-user"], "count_statuses": [401],
              "clear_on_success": true, "limits": limits() },
            { "name": "plain", "path": "/plain", "limits": limits() },
        ]));
        let user = ("x-user", "ann");
        let own = |method: &str, url: &str, headers: &[(&str, &str)], body: Option<&[u8]>| {
            let (p, _) = plan_of(&c, method, url, headers, body, None);
            p.matched.iter().map(|m| (m.rule.name.clone(), m.own_method)).collect::<Vec<_>>()
        };
        let both = |own: bool| vec![("post".to_string(), own), ("any".to_string(), own)];
        assert_eq!(own("POST", "/login", &[IP, user], None), both(true));
        assert_eq!(own("post", "/login", &[IP, user, ("x-http-method-override", " post ")], None), both(true), "an override naming the same method");
        assert_eq!(
            own("OPTIONS", "/login", &[IP, user, ("x-http-method-override", "POST")], None),
            both(false),
            "matched through the override only; OPTIONS itself never"
        );
        assert_eq!(own("OPTIONS", "/login", &[IP, user], None), vec![], "a preflight matches no rule without OPTIONS");
        // The POST rule matches the POST as sent, but the origin may serve
        // it as the GET it asks to be (the login page, 200).
        assert_eq!(own("POST", "/login", &[IP, user, ("x-http-method-override", "GET")], None), both(false));
        assert_eq!(own("POST", "/login", &[IP, user, ("x-method-override", "GET")], None), both(false));
        assert_eq!(own("POST", "/login?_method=GET", &[IP, user], None), both(false));
        let form = ("content-type", "application/x-www-form-urlencoded");
        let (p, read) = plan_of(&c, "POST", "/login", &[IP, user, form], Some(b"a=1&_method=GET"), None);
        assert!(read, "a form is read to find a _method in it");
        assert!(p.matched.iter().all(|m| !m.own_method), "a _method in the form body");
        assert_eq!(own("POST", "/login", &[IP, user, form], Some(b"_method=POST&_method=GET")), both(false), "any differing value");
        assert_eq!(own("POST", "/login", &[IP, user, form], Some(b"email=a")), both(true));
        assert_eq!(own("POST", "/login", &[IP, user, form], None), both(false), "a form too large to read");
        assert_eq!(own("POST", "/login", &[IP, user, MULTIPART], Some(b"--x")), both(false), "a body tollgate cannot read");
        assert_eq!(own("POST", "/login", &[IP, user, MULTIPART], Some(&multipart("email", "a"))), both(true), "multipart is read");
        assert_eq!(own("POST", "/login", &[IP, user, MULTIPART], Some(&multipart("_method", "GET"))), both(false));
        assert_eq!(own("POST", "/login", &[IP, user, ("x-http-method-override", "POST, GET")], None), both(false), "any item");
        // No rule lists methods or has query conditions: the form does not
        // join the parameters, and is read for a success's sake alone.
        let any = config(json!([{ "name": "any", "path": "/login", "key": ["header:x-user"], "count_statuses": [401],
            "clear_on_success": true, "limits": limits() }]));
        let own_any = |body: &[u8]| plan_of(&any, "POST", "/login", &[IP, user, form], Some(body), None).0.matched[0].own_method;
        assert!(own_any(b"email=a&_method=POST"));
        assert!(!own_any(b"email=a&_method=GET"));
        assert!(!own_any(b"_method%00x=GET"), "a name ends at a NUL");
        assert_eq!(own("HEAD", "/page", &[IP, user], None), vec![("get".to_string(), false)], "HEAD is folded into GET, not its own");
        assert_eq!(own("GET", "/page", &[IP, user], None), vec![("get".to_string(), true)]);
        assert_eq!(own("GET", "/plain", &[IP], None), vec![("plain".to_string(), false)], "no on_success: nothing to settle");
        match &plan_of(&c, "POST", "/login", &[IP, user], None, None).0.route {
            Route::Check(applied) => assert!(applied.iter().all(|a| a.own_method)),
            other => panic!("{other:?}"),
        }
    }

    /// Plans a GET of `/a` from `ip` with `headers`, `asn` and `bot`.
    fn exempt_plan<'c>(c: &'c Config, ip: &str, headers: &[(&str, &str)], asn: Option<u32>, bot: Option<&str>) -> Plan<'c> {
        let url = Url::parse("https://example.com/a").unwrap();
        let header = |name: &str| {
            if name == "cf-connecting-ip" {
                return Some(ip.to_string());
            }
            headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        let secret = |name: &str| (name == "HEALTH_KEY").then(|| "s3cret".to_string());
        plan(c, &RequestParts {
            asn,
            verified_bot: bot,
            secret: &secret,
            ..RequestParts::plain("GET", url.as_str(), &header, Body::Unread)
        })
    }

    #[test]
    fn exempt_requests_are_neither_counted_nor_refused() {
        let c = config(json!([
            { "name": "a", "path": "/a", "limits": limits(),
              "exempt": { "ips": ["198.51.100.0/24"], "header": { "name": "x-health", "secret": "HEALTH_KEY" } } },
            { "name": "b", "path": "/a", "key": ["header:x-user"], "limits": limits() },
        ]));
        let p = exempt_plan(&c, "198.51.100.9", &[("x-user", "u")], None, None);
        assert_eq!(checked(&p), [("b".to_string(), "header:x-user=u".to_string())], "only the rule that exempts");
        let exempted = p.matched[0].exempt.clone().unwrap();
        assert_eq!((exempted.by.kind(), exempted.by.detail()), ("ip", "198.51.100.0/24".to_string()));
        assert_eq!(exempted.key_hash, key_hash("ip=198.51.100.9", None));
        let events = crate::pipeline::verdict::exempt_events(&p.matched);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].line(), format!(r#"{{"by":"ip","detail":"198.51.100.0/24","key_hash":"{}","rule":"a","tollgate":"exempt"}}"#, exempted.key_hash));
        let neighbour = exempt_plan(&c, "198.51.101.9", &[("x-user", "u")], None, None);
        assert_eq!(checked(&neighbour).len(), 2, "the neighbouring /24 is counted");
        let secret = exempt_plan(&c, "203.0.113.1", &[("x-user", "u"), ("x-health", "s3cret")], None, None);
        assert_eq!(checked(&secret).len(), 1);
        let wrong = exempt_plan(&c, "203.0.113.1", &[("x-user", "u"), ("x-health", "guess")], None, None);
        assert_eq!(checked(&wrong).len(), 2, "a wrong secret is no exemption");
        // Rule b would reject a request without x-user; the config-wide
        // exemption below lifts that too.
        let top = Config::from_json(&json!({ "exempt": { "asns": [64500], "verified_bots": ["Monitoring & Analytics"] },
            "rules": [{ "name": "b", "path": "/a", "key": ["header:x-user"], "limits": limits() }] })).unwrap();
        let p = exempt_plan(&top, "203.0.113.1", &[], Some(64500), None);
        assert!(checked(&p).is_empty(), "{:?}", p.route);
        assert_eq!(p.matched[0].exempt.as_ref().unwrap().key_hash, "-", "no key: no hash");
        assert!(matches!(exempt_plan(&top, "203.0.113.1", &[], Some(64501), None).route, Route::MissingKey { .. }));
        assert!(checked(&exempt_plan(&top, "203.0.113.1", &[], None, Some("monitoring & analytics"))).is_empty());
        assert!(matches!(exempt_plan(&top, "203.0.113.1", &[], None, Some("AI Crawler")).route, Route::MissingKey { .. }));
    }
}

#[cfg(test)]
mod device_tests {
    use super::*;
    use url::Url;
    use serde_json::json;

    const NOW: i64 = 1_800_000_000_000;

    /// The key and object of the one rule, for a request with `cookie`.
    fn counted(config: &Config, cookie: Option<&str>, secret: Option<&str>) -> (String, String, Option<String>) {
        let url = Url::parse("https://example.com/login").unwrap();
        let header = |name: &str| match name {
            "cf-connecting-ip" => Some("198.51.100.7".to_string()),
            "x-user" => Some("ann".to_string()),
            "cookie" => cookie.map(str::to_string),
            _ => None,
        };
        let secrets = |name: &str| (name == "DEVICE_KEY").then(|| secret.map(str::to_string)).flatten();
        let parts = RequestParts {
            secret: &secrets,
            now_ms: NOW,
            ..RequestParts::plain("POST", url.as_str(), &header, Body::Unread)
        };
        match plan(config, &parts).route {
            Route::Check(applied) => (applied[0].key.clone(), applied[0].id.clone(), applied[0].device.clone()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_trusted_device_counts_in_its_own_bucket_for_its_account_only() {
        let config = crate::testing::config(json!([{
            "name": "login", "path": "/login", "key": ["header:x-user"], "count_statuses": [401],
            "on_success": "decrement", "trusted_device": { "secret": "DEVICE_KEY", "cookie": "dev" },
            "limits": [{ "requests": 3, "window": "15m" }],
        }]));
        let part = crate::request::key::KeyPart::parse("header:x-user").unwrap();
        let spelled = |value: &str| Spelling::of(&[(&part, vec![value.to_string()])]).tag().unwrap().to_string();
        let ann = spelled("ann");
        let good = crate::request::device::token(b"k", "login", "header:x-user=ann", &ann, NOW / 1000 + 60);
        let (key, id, device) = counted(&config, Some(&format!("a=1; dev={good}")), Some("k\n"));
        assert_eq!(key, "header:x-user=ann", "the account's key, for successes and cookies");
        let device = device.unwrap();
        assert_eq!(id, format!("login\nheader:x-user=ann|device={device}"));
        let account = (String::from("header:x-user=ann"), String::from("login\nheader:x-user=ann"), None);
        assert_eq!(counted(&config, None, Some("k")), account, "no cookie");
        assert_eq!(counted(&config, Some(&format!("dev={good}")), None), account, "no secret: as if unset");
        assert_eq!(counted(&config, Some(&format!("dev={good}")), Some("other")), account, "signed by another key");
        let bob = crate::request::device::token(b"k", "login", "header:x-user=bob", &spelled("bob"), NOW / 1000 + 60);
        assert_eq!(counted(&config, Some(&format!("dev={bob}")), Some("k")), account, "another account's cookie");
        let look_alike = crate::request::device::token(b"k", "login", "header:x-user=ann", &spelled("Ann"), NOW / 1000 + 60);
        assert_eq!(counted(&config, Some(&format!("dev={look_alike}")), Some("k")), account, "earned by a look-alike's spelling");
        let old = crate::request::device::token(b"k", "login", "header:x-user=ann", &ann, NOW / 1000 - 1);
        assert_eq!(counted(&config, Some(&format!("dev={old}")), Some("k")), account, "expired");
    }

    #[test]
    fn trusted_device_needs_a_success_and_an_account_key() {
        let errors = |extra: serde_json::Value| {
            let mut rule = json!({ "name": "login", "path": "/login", "key": ["header:x-user"], "count_statuses": [401],
                "trusted_device": { "secret": "DEVICE_KEY" }, "limits": [{ "requests": 3, "window": "15m" }] });
            for (k, v) in extra.as_object().unwrap() {
                rule[k] = v.clone();
            }
            Config::from_json(&json!({ "rules": [rule] })).err().unwrap_or_default().iter().map(ToString::to_string).collect::<Vec<_>>()
        };
        assert!(errors(json!({}))[0].contains("trusted_device`: needs on_success"), "{:?}", errors(json!({})));
        assert!(errors(json!({ "on_success": "clear" })).is_empty());
        assert!(errors(json!({ "on_success": "clear", "trusted_device": { "secret": "bad name" } }))[0].contains("trusted_device.secret"));
        assert!(errors(json!({ "on_success": "clear", "trusted_device": {} }))[0].contains("trusted_device.secret`: missing"));
        assert!(errors(json!({ "on_success": "clear", "trusted_device": { "secret": "K", "ttl": "x" } }))[0].contains("trusted_device.ttl"));
    }
}
