//! Builders for the unit tests: a config from its rules, and a request as
//! the decision machine is told it ([`Req`]), planned or decided the way
//! the Worker plans and decides it.

use crate::config::Config;
use crate::pipeline::applied::Applied;
use crate::pipeline::facts::{ClientFacts, Facts, HeaderMap, Secrets};
use crate::pipeline::machine::{Decision, Machine, Next};
use crate::pipeline::memo::PlanMemo;
use crate::pipeline::plan::{self, Body, Plan};
use crate::pipeline::upload::Receipt;
use crate::pipeline::verdict::Outcome;
use serde_json::{json, Value};

pub mod pair;
mod perf;

/// A config of `rules` (a JSON array), valid or the test fails naming why.
pub fn config(rules: Value) -> Config {
    config_of(json!({ "rules": rules }))
}

/// A config from its whole `TOLLGATE` value.
pub fn config_of(value: Value) -> Config {
    Config::from_json(&value).unwrap_or_else(|errors| panic!("an invalid test config: {errors:?}"))
}

/// [`config`], kept for the test's life (for `'static` plans, as the
/// Worker's isolate keeps its config).
pub fn leaked(rules: Value) -> &'static Config {
    Box::leak(Box::new(config(rules)))
}

/// Where a URL given as a path is.
const ORIGIN: &str = "https://example.com";

/// A request, built up: `Req::get("/x").ip("192.0.2.1").header("x-user", "ann")`.
/// A URL given as a path is on `https://example.com`.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// `None`: no body (read as empty when asked for).
    pub body: Option<Vec<u8>>,
    pub client: ClientFacts,
    pub secrets: Secrets,
    pub now_ms: i64,
}

impl Req {
    pub fn new(method: &str, url: &str) -> Req {
        let url = if url.starts_with('/') { format!("{ORIGIN}{url}") } else { url.to_string() };
        Req {
            method: method.to_string(),
            url,
            headers: Vec::new(),
            body: None,
            client: ClientFacts::default(),
            secrets: Secrets::default(),
            now_ms: 0,
        }
    }

    pub fn get(url: &str) -> Req {
        Req::new("GET", url)
    }

    pub fn post(url: &str) -> Req {
        Req::new("POST", url)
    }

    pub fn header(mut self, name: &str, value: &str) -> Req {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// `CF-Connecting-IP`.
    pub fn ip(self, ip: &str) -> Req {
        self.header("cf-connecting-ip", ip)
    }

    pub fn body(mut self, body: &[u8]) -> Req {
        self.body = Some(body.to_vec());
        self
    }

    pub fn country(mut self, country: &str) -> Req {
        self.client.country = Some(country.to_string());
        self
    }

    pub fn asn(mut self, asn: u32) -> Req {
        self.client.asn = Some(asn);
        self
    }

    pub fn secret(mut self, name: &str, value: &str) -> Req {
        self.secrets.named.push((name.to_string(), value.to_string()));
        self
    }

    pub fn admin_token(mut self, token: &str) -> Req {
        self.secrets.admin_token = Some(token.to_string());
        self
    }

    pub fn log_key(mut self, key: &[u8]) -> Req {
        self.secrets.log_key = Some(key.to_vec());
        self
    }

    pub fn now(mut self, now_ms: i64) -> Req {
        self.now_ms = now_ms;
        self
    }

    /// The headers as the machine is told them.
    pub fn header_map(&self) -> HeaderMap {
        HeaderMap::from_pairs(&self.headers)
    }

    /// The plan the Worker ends with: planned without the body, then, if
    /// that asks for it, with it.
    pub fn plan<'c>(&self, config: &'c Config) -> Plan<'c> {
        let first = self.plan_once(config, Body::Unread);
        match first.route {
            plan::Route::NeedsBody => self.plan_once(config, Body::Read(self.body.as_deref().unwrap_or_default())),
            _ => first,
        }
    }

    /// One plan, with what is known of the body.
    pub fn plan_once<'c>(&self, config: &'c Config, body: Body<'_>) -> Plan<'c> {
        let headers = self.header_map();
        let header = |name: &str| headers.get(name);
        crate::pipeline::machine::plan_facts(config, &self.facts(&headers), &header, body, None)
    }

    /// The admin plane's plan of this request ([`crate::admin::plan`]),
    /// with what is known of the body.
    pub fn admin_plan_once<'c>(&self, config: &'c Config, body: Body<'_>) -> crate::admin::plan::AdminPlan<'c> {
        let headers = self.header_map();
        let header = |name: &str| headers.get(name);
        crate::pipeline::machine::with_parts(&self.facts(&headers), &header, body, |parts| crate::admin::plan::plan(config, parts))
    }

    /// The facts of this request, its headers being `headers`.
    pub(crate) fn facts<'a>(&'a self, headers: &'a HeaderMap) -> Facts<'a> {
        Facts { method: &self.method, url: &self.url, headers, client: &self.client, secrets: &self.secrets, now_ms: self.now_ms }
    }

    /// The machine's decision, each counter answering `outcome`, the upload
    /// (if one is awaited) complete; `memo` as the isolate's.
    pub fn decide<'c>(&self, config: &'c Config, memo: &PlanMemo, outcome: &dyn Fn(&Applied<'_>) -> Outcome) -> Decision<'c> {
        self.decide_cached(config, memo, None, outcome)
    }

    /// [`Req::decide`] with the isolate's blocked-until `cache`.
    pub fn decide_cached<'c>(
        &self,
        config: &'c Config,
        memo: &PlanMemo,
        cache: Option<&crate::count::blocked::BlockedUntilCache>,
        outcome: &dyn Fn(&Applied<'_>) -> Outcome,
    ) -> Decision<'c> {
        let headers = self.header_map();
        let mut machine = Machine::new(config, self.facts(&headers), memo, None);
        loop {
            match machine.next(cache) {
                Next::Body { .. } => machine.body(&crate::pipeline::upload::BodyRead::Read(self.body.clone().unwrap_or_default())),
                Next::Upload(_) => machine.uploaded(Receipt::Complete, self.now_ms),
                Next::Admin => panic!("an admin request: drive the admin flow"),
                Next::Count(checks) => {
                    let outcomes = checks.iter().map(|(a, _)| outcome(a)).collect();
                    return machine.counted(outcomes);
                }
                Next::Decided => return machine.decided(),
            }
        }
    }
}

/// An outcome under the limit, as the object answers a first request.
pub fn allowed(_: &Applied<'_>) -> Outcome {
    Outcome::Allowed { windows: Vec::new(), reservation: None }
}

/// An outcome over the limit for a minute.
pub fn blocked(_: &Applied<'_>) -> Outcome {
    Outcome::Blocked { retry_after_ms: 60_000, window: 0, windows: None, by: crate::count::blocked::Refusal::Limit }
}
