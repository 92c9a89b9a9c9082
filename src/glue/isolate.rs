//! What an isolate keeps for its life, and its few platform helpers: the
//! config (parsed once), the secrets (read once), the plan memo, the log
//! episodes, the clock, and tollgate's own responses.

use crate::config::policy::FailPolicy;
use crate::config::upstream::{self, Upstream};
use crate::config::{self, Config, ConfigError};
use crate::config::headers::OwnResponse;
use crate::pipeline::episodes::{self, Episodes};
use crate::pipeline::facts::{Secrets, ADMIN_TOKEN_SECRET, LOG_KEY_SECRET};
use crate::pipeline::memo::{self, PlanMemo};
use crate::pipeline::verdict::LogEvent;
use crate::request::key::log_key;
use std::cell::{Cell, OnceCell, RefCell};
use std::rc::Rc;
use worker::{console_log, web_sys, Env};

/// The structured var holding the config.
const CONFIG_VAR: &str = "TOLLGATE";

/// Parsed once per isolate and kept for its life (leaked once, so that the
/// plan's rules can move into a `waitUntil` task, which must be `'static`):
/// the config, or its errors with the policy for requests and, for
/// `allow`, where to forward them (`None`: the `upstream` field itself is
/// invalid, so requests are denied).
pub(crate) type LoadedConfig = &'static Result<Config, (Vec<ConfigError>, FailPolicy, Option<Upstream>)>;

thread_local! {
    /// Parsed once per isolate: URLPatterns are compiled here, not per request.
    static CONFIG: RefCell<Option<LoadedConfig>> = const { RefCell::new(None) };
    /// Read once per isolate, like the config (a changed secret is a new
    /// deployment, hence new isolates).
    static SECRETS: OnceCell<Rc<Secrets>> = const { OnceCell::new() };
    /// One log line per block or counter-error episode of a (rule, key).
    static EPISODES: RefCell<Episodes> =
        RefCell::new(Episodes::new(episodes::DEFAULT_CAPACITY, episodes::PERIOD_MS));
    /// Blocked clients' plans, replayed for their repeats.
    pub(crate) static MEMO: RefCell<PlanMemo> = RefCell::new(PlanMemo::new(memo::DEFAULT_CAPACITY));
    /// When the invalid config was last logged (Unix ms).
    pub(crate) static CONFIG_ERROR_LOGGED: Cell<Option<i64>> = const { Cell::new(None) };
}

pub(crate) fn load_config(env: &Env) -> LoadedConfig {
    CONFIG.with(|cell| {
        if let Some(config) = *cell.borrow() {
            return config;
        }
        let parsed = match env.object_var::<serde_json::Value>(CONFIG_VAR) {
            Ok(value) => Config::from_json(&value).map_err(|errors| {
                (errors, config::on_invalid_config(&value), upstream::of_invalid_config(&value))
            }),
            Err(e) => Err((
                vec![ConfigError { rule: None, field: CONFIG_VAR.into(), message: format!("cannot read the var: {e}") }],
                FailPolicy::Deny,
                None,
            )),
        };
        if let Ok(config) = &parsed {
            EPISODES.with(|e| e.borrow_mut().set_period(config.log_episode_ms));
        }
        let loaded: LoadedConfig = Box::leak(Box::new(parsed));
        *cell.borrow_mut() = Some(loaded);
        loaded
    })
}

/// The secrets the pipeline reads ([`Secrets`]), read once per isolate:
/// the admin token, the log key, and the secrets `config` names.
pub(crate) fn load_secrets(env: &Env, config: &Config) -> Rc<Secrets> {
    SECRETS.with(|cell| {
        cell.get_or_init(|| {
            let read = |name: &str| env.secret(name).ok().map(|s| s.to_string());
            let named = Secrets::names(config);
            Rc::new(Secrets {
                admin_token: read(ADMIN_TOKEN_SECRET),
                log_key: read(LOG_KEY_SECRET).and_then(|s| log_key(&s)),
                named: named.into_iter().filter_map(|name| Some((name.clone(), read(&name)?))).collect(),
            })
        })
        .clone()
    })
}

pub(crate) fn now_ms() -> i64 {
    js_sys::Date::now() as i64
}

/// One of tollgate's own responses, as the raw response the runtime takes
/// (built in one `new Response(text, init)`: the body goes over as a
/// string, not copied into a byte array first).
pub(crate) fn respond(own: &OwnResponse) -> worker::Result<web_sys::Response> {
    let headers = web_sys::Headers::new()?;
    for (name, value) in &own.headers {
        headers.append(name, value)?;
    }
    let init = web_sys::ResponseInit::new();
    init.set_status(own.status);
    init.set_headers(&headers);
    Ok(web_sys::Response::new_with_opt_str_and_init(Some(&own.body), &init)?)
}

/// Writes `events`, one line each, except the repeats of a block or
/// counter-error episode ([`crate::pipeline::episodes`]), which are counted instead.
pub(crate) fn write_logs(events: &[LogEvent]) {
    if events.is_empty() {
        return;
    }
    let lines = EPISODES.with(|e| e.borrow_mut().filter(events, now_ms()));
    for event in &lines {
        console_log!("{}", event.line());
    }
}

/// Writes the `summary` lines of log episodes that have ended: asked at the
/// start of every request the isolate serves, whatever it is (one
/// comparison while none is due).
pub(crate) fn write_ended_episodes() {
    let lines = EPISODES.with(|e| e.borrow_mut().ended(now_ms()));
    for event in &lines {
        console_log!("{}", event.line());
    }
}
