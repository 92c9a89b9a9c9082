//! What an isolate keeps for its life, and its few platform helpers: the
//! core's [`Isolate`] (one thread-local), what was read once from the
//! bindings (the config, parsed once; the secrets; the vars), the clock,
//! the log lines, and tollgate's own responses.

use crate::config::policy::FailPolicy;
use crate::config::upstream::{self, Upstream};
use crate::config::{self, Config, ConfigError};
use crate::config::headers::OwnResponse;
use crate::pipeline::facts::{Secrets, ADMIN_TOKEN_SECRET, LOG_KEY_SECRET};
use crate::pipeline::isolate::Isolate;
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

/// What the isolate learned of its bindings, kept so that JavaScript is
/// not asked again: each `OnceCell` is read once and fixed for the
/// isolate's life (a changed var or secret is a new deployment, hence new
/// isolates); `rpc_refused` alone changes, once, when the limiter class is
/// found to refuse RPC calls.
#[derive(Default)]
pub(crate) struct Bindings {
    /// URLPatterns are compiled here, not per request.
    config: OnceCell<LoadedConfig>,
    secrets: OnceCell<Rc<Secrets>>,
    /// The `UPSTREAM` var ([`crate::glue::origin`]).
    pub(crate) upstream: OnceCell<Option<Rc<str>>>,
    /// The RPC ticket signing key ([`crate::glue::rpc`], feature `standalone`).
    #[cfg_attr(not(feature = "standalone"), allow(dead_code))]
    pub(crate) ticket_key: OnceCell<Option<Rc<[u8]>>>,
    /// Whether a metrics dataset is bound ([`crate::glue::drive`]).
    pub(crate) metrics_bound: OnceCell<bool>,
    /// Whether the local metrics sink is on ([`crate::glue::traffic`]).
    pub(crate) sink_on: OnceCell<bool>,
    /// Whether the limiter class takes RPC calls: false once one is
    /// refused as such ([`crate::glue::objects`]).
    pub(crate) rpc_refused: Cell<bool>,
}

thread_local! {
    /// The isolate's state: every decision about it is the core's
    /// ([`Isolate`]). Borrowed for one step at a time, never across an
    /// `await` (see [`with_isolate`]).
    static ISOLATE: RefCell<Isolate> = RefCell::new(Isolate::new());
    /// What was read once from the bindings.
    static BINDINGS: Bindings = Bindings::default();
}

/// Runs `f` with the isolate's state. `f` must not call back into the glue
/// (no logs, no other `with_isolate`): it only steps the core.
pub(crate) fn with_isolate<T>(f: impl FnOnce(&mut Isolate) -> T) -> T {
    ISOLATE.with(|isolate| f(&mut isolate.borrow_mut()))
}

/// Runs `f` with what was read once from the bindings.
pub(crate) fn bindings<T>(f: impl FnOnce(&Bindings) -> T) -> T {
    BINDINGS.with(f)
}

pub(crate) fn load_config(env: &Env) -> LoadedConfig {
    if let Some(config) = bindings(|b| b.config.get().copied()) {
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
        let now = now_ms();
        with_isolate(|isolate| isolate.configure(config, now));
    }
    let loaded: LoadedConfig = Box::leak(Box::new(parsed));
    bindings(|b| *b.config.get_or_init(|| loaded))
}

/// The secrets the pipeline reads ([`Secrets`]), read once per isolate:
/// the admin token, the log key, and the secrets `config` names.
pub(crate) fn load_secrets(env: &Env, config: &Config) -> Rc<Secrets> {
    bindings(|b| {
        b.secrets
            .get_or_init(|| {
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
    let now = now_ms();
    let lines = with_isolate(|isolate| isolate.episodes.filter(events, now));
    for event in &lines {
        console_log!("{}", event.line());
    }
}

/// Writes `lines` as they are (already through the episodes' filter).
pub(crate) fn write_lines(lines: &[LogEvent]) {
    for event in lines {
        console_log!("{}", event.line());
    }
}

/// Writes the `summary` lines of log episodes that have ended: asked at the
/// start of every request the isolate serves, whatever it is (one
/// comparison while none is due).
pub(crate) fn write_ended_episodes() {
    let now = now_ms();
    let lines = with_isolate(|isolate| isolate.episodes.ended(now));
    for event in &lines {
        console_log!("{}", event.line());
    }
}
