//! The admin API's flow, sans-IO: the calls one admin request makes, in
//! order, and the answer with its effects. The driver asks each
//! [`AdminStep`]'s counter or object and hands the result back; the
//! choices (the lockout, what to set, what to report) are all made here.
//!
//! ```text
//! AdminFlow::start ─▶ VerifyAccess (a Cloudflare Access token whose claims
//!   hold) ─▶ verified(result) ─▶ on as below, no lockout asked; refused: Done
//!   ─▶ Lockout (a wrong credential, or a short right token) ─▶ locked(outcome)
//!   ─▶ Done (refused: 429, 401, 403, 503, 4xx; or the rules listed)
//!   ─▶ a console session: Sessions (the last sign-out) ─▶ sessions(result)
//!      ─▶ Done (signed out since: the sign-in page) or on, as below;
//!      signing out: Sessions (record it) ─▶ sessions(result) ─▶ Done
//!   ─▶ Control (an override or ban to set) ─▶ changed(result)
//!   ─▶ Call (status or reset) ─▶ called(result) ─▶ ReadControls ─▶ controls(result) ─▶ Done
//!   a key by its hash (a console link): ListRegistry ─▶ listed(result)
//!      ─▶ its entry's key, served as above (Control or Call); none: Done (404)
//! ```

use crate::config::headers::OwnResponse;
use crate::config::Config;
pub(crate) use crate::pipeline::isolate::CacheEffect;
use crate::count::controls::{Change, Controls};
use crate::count::protocol::{Call, CallFailure, Op, Reply};
use crate::admin::api::{self, AdminAction, AdminRequest, AdminRoute, ByHash, Gate};
use crate::admin::access::{AccessCheck, Proof, AccessRefusal};
use crate::pipeline::applied::Applied;
use crate::pipeline::verdict::{LogEvent, Outcome};
use crate::count::registry::{self, Entry, RegistryCall};
use crate::admin::console::session;
use crate::admin::console::traffic::{self, Range};
use crate::admin::console::{html, Auth, ConsoleRoute, Page};
use serde_json::Value;

/// Where Cloudflare Access signs out on the console's host.
pub(crate) const ACCESS_LOGOUT: &str = "/cdn-cgi/access/logout";

/// What the driver does next.
#[derive(Debug)]
pub(crate) enum AdminStep<'f> {
    /// Verify the Access token's RS256 signature with the team's key of
    /// `proof.kid` (the driver fetches the keys when
    /// [`Keys::step`](crate::admin::access::Keys::step) says so), then
    /// [`AdminFlow::verified`].
    VerifyAccess(&'f Proof),
    /// Ask the lockout counter with `op`, then [`AdminFlow::locked`].
    Lockout(&'f Applied<'f>, Op),
    /// Set `change` in the object `id`, then [`AdminFlow::changed`].
    Control { id: String, change: Change, timeout_ms: u32 },
    /// Make `call` to the object `id`, then [`AdminFlow::called`].
    Call { id: String, call: Call, timeout_ms: u32 },
    /// Read the object's controls, then [`AdminFlow::controls`].
    ReadControls { id: String, timeout_ms: u32 },
    /// Tell the controls registry, then [`AdminFlow::registered`].
    Register { call: RegistryCall, timeout_ms: u32 },
    /// List the controls registry, then [`AdminFlow::listed`].
    ListRegistry { timeout_ms: u32 },
    /// Read the controls of each of these objects (concurrently), then
    /// [`AdminFlow::read_each`].
    ReadEach { ids: Vec<String>, timeout_ms: u32 },
    /// Ask the controls registry's object about console sign-outs (read the
    /// last, or record one), then [`AdminFlow::sessions`].
    Sessions { call: RegistryCall, timeout_ms: u32 },
    /// Ask the traffic's source (the SQL API, or the local sink) the
    /// range's [`traffic::queries`], then [`AdminFlow::traffic`].
    Traffic(Range),
    /// Ask the traffic's source the spend by model of `rule`'s key of
    /// `key_hash` over the last `span_s` seconds
    /// ([`traffic::key_spend_query`]), then [`AdminFlow::key_spend`].
    KeySpend { rule: String, key_hash: String, span_s: u64 },
    /// Answer, write the log lines, apply the cache effects.
    Done(AdminAnswer),
}

/// The admin request's answer and its effects.
#[derive(Debug)]
pub(crate) struct AdminAnswer {
    pub(crate) response: AdminResponse,
    pub(crate) logs: Vec<LogEvent>,
    /// What the isolate's blocked-until cache learns.
    pub(crate) cache: Vec<CacheEffect>,
}

/// An admin answer: tollgate's own (an error), or a JSON body (200).
#[derive(Debug)]
pub(crate) enum AdminResponse {
    Own(OwnResponse),
    Json(Value),
}

/// One admin request on its way.
pub(crate) struct AdminFlow<'f> {
    config: &'f Config,
    lockout: &'f Applied<'f>,
    route: &'f AdminRoute<'f>,
    now_ms: i64,
    logs: Vec<LogEvent>,
    cache: Vec<CacheEffect>,
    reply: Option<Reply>,
    /// The request the gate let through, its object and key hash (its
    /// own: a key asked by hash is found in the registry).
    served: Option<(AdminRequest<'f>, String, String)>,
    /// A key asked by its hash, while the registry is read.
    by_hash: Option<&'f ByHash<'f>>,
    /// The registry's entries, while their objects are read.
    listed: Vec<Entry>,
    /// The signed-in console page whose admin answer is rendered, and its
    /// CSRF token.
    console: Option<(&'f ConsoleRoute<AdminRoute<'f>>, &'f str)>,
    /// The traffic range asked.
    range: Range,
    /// The console request whose session is being checked, or signed out.
    session: Option<&'f ConsoleRoute<AdminRoute<'f>>>,
    /// The session was found not signed out.
    session_holds: bool,
    /// Who Cloudflare Access signed in, once the token's signature held:
    /// every `admin` line names them (`operator`).
    operator: Option<&'f str>,
    /// A money rule's status, while its key's spend by model is asked.
    status: Option<Value>,
}

impl<'f> AdminFlow<'f> {
    /// The flow of an admin request, and its first step.
    pub(crate) fn start(
        config: &'f Config,
        lockout: &'f Applied<'f>,
        route: &'f AdminRoute<'f>,
        lockout_binds: bool,
        access: Option<&'f AccessCheck>,
        now_ms: i64,
    ) -> (AdminFlow<'f>, AdminStep<'f>) {
        let mut flow = AdminFlow { config, lockout, route, now_ms, logs: Vec::new(), cache: Vec::new(), reply: None, served: None, by_hash: None, listed: Vec::new(), console: None, range: Range::Hour, session: None, session_holds: false, operator: None, status: None };
        let step = match access {
            Some(AccessCheck::Pending(proof)) => AdminStep::VerifyAccess(proof),
            Some(AccessCheck::Refused(refusal)) => flow.access_refused(refusal),
            None if lockout_binds => AdminStep::Lockout(lockout, api::lockout_op(route)),
            None => flow.gate(None),
        };
        (flow, step)
    }

    /// What verifying the Access token's signature gave: the request goes
    /// on as the operator's (no lockout asked: a signature is no guess),
    /// or is refused.
    pub(crate) fn verified(&mut self, proof: &'f Proof, result: Result<(), AccessRefusal>) -> AdminStep<'f> {
        match result {
            Ok(()) => {
                self.operator = Some(proof.identity.as_str());
                self.gate(None)
            }
            Err(refusal) => self.access_refused(&refusal),
        }
    }

    /// An Access token refused: 401 (the API), or the sign-in page (the
    /// console); logged `admin_denied` with the reason (`access`).
    fn access_refused(&mut self, refusal: &AccessRefusal) -> AdminStep<'f> {
        let fields = vec![("client_hash", Value::from(self.lockout.key_hash.as_str())), ("access", refusal.reason().into())];
        self.logs.push(LogEvent::new("admin_denied", fields));
        let own = match self.route {
            AdminRoute::Console(console) => html::sign_in(&console.prefix, 401, Some("Cloudflare Access's sign-in could not be verified: open the console through Access again.")),
            _ => api::unauthorized(),
        };
        self.done(AdminResponse::Own(own))
    }

    /// The lockout counter's outcome.
    pub(crate) fn locked(&mut self, outcome: Outcome) -> AdminStep<'f> {
        self.gate(Some(&outcome))
    }

    fn gate(&mut self, outcome: Option<&Outcome>) -> AdminStep<'f> {
        match api::gate(self.lockout, self.route, outcome) {
            Gate::Console(console) => self.console(console),
            other => self.serve(other),
        }
    }

    /// A console page past the lockout: its own answer (the style sheet,
    /// a sign-in, a refusal, a redirect), or the admin route it shows,
    /// served as the API serves it and rendered at [`AdminFlow::done`].
    fn console(&mut self, console: &'f ConsoleRoute<AdminRoute<'f>>) -> AdminStep<'f> {
        let prefix = console.prefix.as_str();
        let client = || ("client_hash", Value::from(self.lockout.key_hash.as_str()));
        let own = match &console.auth {
            Auth::Public => html::style(),
            Auth::SignedIn { cookie } => {
                self.logs.push(LogEvent::new("admin", vec![("action", "sign_in".into()), client()]));
                html::redirect(&format!("{prefix}{}", Page::Rules.path()), Some(session::set_cookie(Some(cookie), prefix)))
            }
            Auth::WrongToken => {
                self.logs.push(LogEvent::new("admin_denied", vec![client()]));
                html::sign_in(prefix, 401, Some("That is not the admin token."))
            }
            Auth::SignedOut { expired } => {
                let status = if console.page == Page::Home && !expired { 200 } else { 401 };
                html::sign_in(prefix, status, expired.then_some("Your session has ended: sign in again."))
            }
            Auth::Forged => html::forged(prefix),
            Auth::Session { .. } if !self.session_holds => {
                // Signed out since? (asked of every session request)
                self.session = Some(console);
                return AdminStep::Sessions { call: RegistryCall::SignedOut, timeout_ms: self.config.admin_lockout.timeout_ms };
            }
            Auth::Session { .. } if console.page == Page::SignOut => {
                self.logs.push(LogEvent::new("admin", vec![("action", "sign_out".into()), client()]));
                let call = RegistryCall::SignOut { at_ms: self.now_ms, keep_ms: session::SESSION_MS };
                return AdminStep::Sessions { call, timeout_ms: self.config.admin_lockout.timeout_ms };
            }
            // Access signs out at the host's own logout path.
            Auth::Access { .. } if console.page == Page::SignOut => {
                self.logs.push(LogEvent::new("admin", vec![("action", "sign_out".into()), client()]));
                html::redirect(ACCESS_LOGOUT, None)
            }
            Auth::Session { csrf, .. } | Auth::Access { csrf, .. } => return self.signed_in(console, csrf),
        };
        self.done(AdminResponse::Own(own))
    }

    /// A signed-in console page: the sign-in page or home lead on to Rules;
    /// any other shows its admin route's answer, or nothing asked.
    fn signed_in(&mut self, console: &'f ConsoleRoute<AdminRoute<'f>>, csrf: &'f str) -> AdminStep<'f> {
        let own = match (console.page, &console.inner) {
            (Page::Home | Page::SignIn, _) => html::redirect(&format!("{}{}", console.prefix, Page::Rules.path()), None),
            (_, inner) => {
                self.console = Some((console, csrf));
                match inner {
                    Some(inner) => return self.serve(api::gate(self.lockout, inner, None)),
                    None => html::page(self.config, console, csrf, None),
                }
            }
        };
        self.done(AdminResponse::Own(own))
    }

    /// What the registry said of sign-outs: the session goes on (not
    /// signed out since), or ends (signed out: the sign-in page, nothing
    /// done; unreadable: 503, the console fails closed); a sign-out
    /// recorded redirects to the sign-in page, cookie cleared (not
    /// recorded: 503, cookie cleared all the same).
    pub(crate) fn sessions(&mut self, result: Result<String, CallFailure>) -> AdminStep<'f> {
        let Some(console) = self.session else { return self.done(AdminResponse::Own(api::unauthorized())) };
        let prefix = console.prefix.as_str();
        let Auth::Session { end_ms, .. } = console.auth else { return self.done(AdminResponse::Own(api::unauthorized())) };
        let clear = || ("set-cookie".to_string(), session::set_cookie(None, prefix));
        if self.session_holds {
            // The sign-out's own answer.
            let own = match result {
                Ok(_) => html::redirect(&format!("{prefix}/"), Some(session::set_cookie(None, prefix))),
                Err(e) => {
                    self.logs.push(LogEvent::new("registry_error", vec![("error", e.to_string().into())]));
                    let mut own = html::sign_in(prefix, 503, Some("Signing out could not be recorded: this browser is signed out, a copy of its cookie may not be. Sign out again."));
                    own.headers.push(clear());
                    own
                }
            };
            return self.done(AdminResponse::Own(own));
        }
        match result.map(|answer| registry::signed_out_at(&answer)) {
            Ok(at) if session::revoked(end_ms, at) => {
                let client = ("client_hash", Value::from(self.lockout.key_hash.as_str()));
                self.logs.push(LogEvent::new("admin_denied", vec![client, ("reason", "signed_out".into())]));
                let mut own = html::sign_in(prefix, 401, Some("Your session has ended: sign in again."));
                own.headers.push(clear());
                self.done(AdminResponse::Own(own))
            }
            Ok(_) => {
                self.session_holds = true;
                self.console(console)
            }
            Err(e) => {
                self.logs.push(LogEvent::new("registry_error", vec![("error", e.to_string().into())]));
                let own = OwnResponse::problem(503, "Service Unavailable", "The console's sessions cannot be checked.", Some(1));
                self.done(AdminResponse::Own(own))
            }
        }
    }

    fn serve(&mut self, gate: Gate<'f, 'f>) -> AdminStep<'f> {
        let served = match gate {
            Gate::Refuse { response, events } => {
                self.logs = events;
                return self.done(AdminResponse::Own(response));
            }
            Gate::Rules => {
                let client = self.lockout.key_hash.as_str();
                self.logs.push(LogEvent::new("admin", vec![("action", "rules".into()), ("client_hash", client.into())]));
                return self.done(AdminResponse::Json(api::rules_body(self.config)));
            }
            Gate::Controls => {
                let client = self.lockout.key_hash.as_str();
                self.logs.push(LogEvent::new("admin", vec![("action", "controls".into()), ("client_hash", client.into())]));
                return AdminStep::ListRegistry { timeout_ms: self.config.admin_lockout.timeout_ms };
            }
            Gate::Traffic(range) => {
                let client = self.lockout.key_hash.as_str();
                self.logs.push(LogEvent::new("admin", vec![("action", "traffic".into()), ("client_hash", client.into())]));
                self.range = range;
                return AdminStep::Traffic(range);
            }
            Gate::Console(_) => return self.done(AdminResponse::Own(api::unauthorized())),
            Gate::ByHash(ask) => {
                self.by_hash = Some(ask);
                return AdminStep::ListRegistry { timeout_ms: self.config.admin_lockout.timeout_ms };
            }
            Gate::Serve { request, id, key_hash } => (request.clone(), id.to_string(), key_hash.to_string()),
        };
        self.serve_request(served)
    }

    /// Serves `request` on the object `id`: an override or a ban is set in
    /// the key's object, then reported as a status is.
    fn serve_request(&mut self, served: (AdminRequest<'f>, String, String)) -> AdminStep<'f> {
        let step = served.0.change(self.now_ms).map(|change| AdminStep::Control { id: served.1.clone(), change, timeout_ms: served.0.rule.timeout_ms });
        self.served = Some(served);
        step.unwrap_or_else(|| self.call())
    }

    /// What setting the control gave.
    pub(crate) fn changed(&mut self, change: &Change, result: Result<Controls, CallFailure>) -> AdminStep<'f> {
        let Some((request, id, key_hash)) = self.served.as_ref() else { return self.done(AdminResponse::Own(api::unauthorized())) };
        let effect = match (change, &result) {
            (_, Err(_)) => None,
            (Change::Ban { until_ms }, Ok(_)) => Some(CacheEffect::Ban { id: id.clone(), until_ms: *until_ms }),
            (_, Ok(_)) => Some(CacheEffect::Forget(id.clone())),
        };
        let register = request.registry_call(id, key_hash, self.now_ms).map(|call| AdminStep::Register { call, timeout_ms: request.rule.timeout_ms });
        if let Err(e) = result {
            return self.done(AdminResponse::Own(api::control_failure(&e)));
        }
        self.cache.extend(effect);
        register.unwrap_or_else(|| self.call())
    }

    /// What the registry said to the change (the key's control is in force
    /// either way; a failure is logged, `registry_error`).
    pub(crate) fn registered(&mut self, result: Result<String, CallFailure>) -> AdminStep<'f> {
        if let Err(e) = result {
            self.logs.push(LogEvent::new("registry_error", vec![("error", e.to_string().into())]));
        }
        self.call()
    }

    /// The registry's listing: each listed key's object is read next.
    pub(crate) fn listed(&mut self, result: Result<String, CallFailure>) -> AdminStep<'f> {
        match result {
            Ok(text) => {
                self.listed = registry::decode_listing(&text, self.now_ms);
                if let Some(ask) = self.by_hash {
                    return self.found(ask);
                }
                let ids = self.listed.iter().map(|e| e.id.clone()).collect();
                AdminStep::ReadEach { ids, timeout_ms: self.config.admin_lockout.timeout_ms }
            }
            Err(e) => self.done(AdminResponse::Own(api::unreachable(&e))),
        }
    }

    /// A key asked by its hash, in the registry's listing: served as a
    /// key asked by its parts is; not listed: 404.
    fn found(&mut self, ask: &'f ByHash<'f>) -> AdminStep<'f> {
        let listed = std::mem::take(&mut self.listed);
        let Some((entry, request)) = ask.find(&listed).and_then(|entry| Some((entry, ask.request(entry)?))) else {
            return self.done(AdminResponse::Own(api::not_in_registry(ask)));
        };
        let served = (request, entry.id.clone(), entry.key_hash.clone());
        self.serve_request(served)
    }

    /// The traffic source's answers (`Err`: why there are none). A raw key
    /// is shown only on a rule whose `metrics_raw_key` is on now.
    pub(crate) fn traffic(&mut self, answers: Result<traffic::Answers, String>) -> AdminStep<'f> {
        let now_s = u64::try_from(self.now_ms / 1000).unwrap_or(0);
        let rules = &self.config.rules;
        let shows_key = |name: &str| rules.iter().any(|r| r.name == name && r.metrics_raw_key);
        let money = |name: &str, micro: u64| {
            let priced = rules.iter().find(|r| r.name == name)?.usage.as_ref()?.price.as_ref()?;
            Some(crate::config::price::money_text(micro, &priced.table.currency))
        };
        self.done(AdminResponse::Json(traffic::body(self.range, now_s, answers, &shows_key, &money)))
    }

    /// The listed objects' controls, in the listing's order.
    pub(crate) fn read_each(&mut self, results: Vec<Result<Controls, CallFailure>>) -> AdminStep<'f> {
        let listed: Vec<(Entry, Option<Controls>)> = std::mem::take(&mut self.listed).into_iter().zip(results.into_iter().map(Result::ok)).collect();
        let rules = &self.config.rules;
        let money = |name: &str| rules.iter().find(|r| r.name == name)?.usage.as_ref()?.price.clone();
        self.done(AdminResponse::Json(api::controls_body(&listed, &money, self.now_ms)))
    }

    /// The status or reset call.
    fn call(&mut self) -> AdminStep<'f> {
        let Some((request, id, _)) = self.served.as_ref() else { return self.done(AdminResponse::Own(api::unauthorized())) };
        let op = match request.action {
            AdminAction::Reset => Op::Reset,
            _ => Op::Status,
        };
        let step = AdminStep::Call { id: id.clone(), call: request.rule.call_for(op, &request.key), timeout_ms: request.rule.timeout_ms };
        if op == Op::Reset {
            self.cache.push(CacheEffect::Forget(id.clone()));
        }
        step
    }

    /// What the status or reset call answered.
    pub(crate) fn called(&mut self, result: Result<Reply, CallFailure>) -> AdminStep<'f> {
        let Some((request, id, key_hash)) = self.served.as_ref() else { return self.done(AdminResponse::Own(api::unauthorized())) };
        match result {
            Ok(reply) => {
                let (line, step) = (api::log_event(request, key_hash, &self.lockout.key_hash), AdminStep::ReadControls { id: id.clone(), timeout_ms: request.rule.timeout_ms });
                self.logs.push(line);
                self.reply = Some(reply);
                step
            }
            Err(e) => self.done(AdminResponse::Own(api::unreachable(&e))),
        }
    }

    /// The object's controls (a failed read: the status without them).
    pub(crate) fn controls(&mut self, result: Result<Controls, CallFailure>) -> AdminStep<'f> {
        let reply = self.reply.take();
        let (Some((request, _, key_hash)), Some(reply)) = (self.served.as_ref(), reply) else {
            return self.done(AdminResponse::Own(api::unauthorized()));
        };
        let body = match result {
            Ok(controls) => api::status_with_controls(request, key_hash, &reply, &controls, self.now_ms),
            Err(_) => api::status_body(request, key_hash, &reply),
        };
        if request.action != AdminAction::Status || !request.rule.counts_money() {
            return self.done(AdminResponse::Json(body));
        }
        // A money rule's key: its spend by model over its longest window.
        let (rule, key_hash) = (request.rule.name.clone(), key_hash.clone());
        let span_s = api::longest_window_ms(request.rule, self.now_ms).div_ceil(1000);
        self.status = Some(body);
        AdminStep::KeySpend { rule, key_hash, span_s }
    }

    /// The key's spend by model (`Err`: no source, or it failed): its
    /// status with `spend_by_model` (per model: answers, micro-units and
    /// `spent` in the currency; `null` when it could not be read).
    pub(crate) fn key_spend(&mut self, answer: Result<String, String>) -> AdminStep<'f> {
        let mut body = self.status.take().unwrap_or_default();
        let priced = self.served.as_ref().and_then(|(r, _, _)| r.rule.usage.as_ref()?.price.as_ref());
        body["spend_by_model"] = match (answer, priced) {
            (Ok(answer), Some(priced)) => {
                let money = |_: &str, micro: u64| Some(crate::config::price::money_text(micro, &priced.table.currency));
                traffic::spend(&answer, &money).into_iter().map(|mut row| { row.as_object_mut().map(|r| r.remove("rule")); row }).collect()
            }
            _ => Value::Null,
        };
        self.done(AdminResponse::Json(body))
    }

    fn done(&mut self, response: AdminResponse) -> AdminStep<'f> {
        if let Some(operator) = self.operator {
            for log in self.logs.iter_mut().filter(|l| l.event == "admin") {
                log.fields.push(("operator", operator.into()));
            }
        }
        let response = match (self.console.take(), response) {
            (Some((console, csrf)), AdminResponse::Json(body)) => AdminResponse::Own(html::page(self.config, console, csrf, Some(Ok(&body)))),
            (Some((console, csrf)), AdminResponse::Own(problem)) => AdminResponse::Own(html::page(self.config, console, csrf, Some(Err(&problem)))),
            (None, response) => response,
        };
        AdminStep::Done(AdminAnswer { response, logs: std::mem::take(&mut self.logs), cache: std::mem::take(&mut self.cache) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::protocol::decode_reply_line;
    use crate::pipeline::facts::{ClientFacts, Facts, HeaderMap, Secrets};
    use crate::admin::plan::AdminPlan;
    use crate::pipeline::machine::{Machine, Next};
    use crate::pipeline::plan::Body;
    use crate::pipeline::memo::PlanMemo;
    use serde_json::json;

    const TOKEN: &str = "a token of more than thirty-two characters, long";

    fn config() -> Config {
        crate::testing::config(json!([{ "name": "a", "path": "/a", "limits": [{ "requests": 5, "window": "1m" }] },
            { "name": "yen", "path": "/v1/*", "limits": [{ "spend": 5, "window": "1m" }], "counting": { "mode": "response", "reservation_ttl": "10m" },
              "metering": { "usage": "openai", "reserve": 1000, "max": 1000, "price": { "currency": "JPY", "models": { "gpt-4o*": { "input": 375, "output": 1500 } } } } }]))
    }

    /// What the request machine hands the admin plane ([`Next::Admin`]),
    /// as the admin plane plans it to be served; `body`: a console form's
    /// body when the plan asks for it (`None`: unusable).
    fn served<'c>(
        machine: &mut Machine<'c, '_>,
        config: &'c Config,
        body: Option<Option<&[u8]>>,
    ) -> (Box<Applied<'c>>, AdminRoute<'c>, bool, Option<AccessCheck>) {
        assert!(matches!(machine.next(None), Next::Admin), "not an admin request");
        let plan = |body: Body<'_>| machine.admin(body, |parts| crate::admin::plan::plan(config, parts));
        let planned = match plan(Body::Unread) {
            AdminPlan::NeedsBody => plan(body.flatten().map_or(Body::Unusable, Body::Read)),
            other => other,
        };
        let AdminPlan::Serve { lockout, route, lockout_binds, access } = planned else { panic!("not served: {planned:?}") };
        (lockout, route, lockout_binds, access)
    }

    /// Runs an admin request through the flow, answering each step with
    /// `answer`; returns the steps taken (by name) and the answer.
    fn run(method: &str, url: &str, token: &str, answer: &dyn Fn(&AdminStep<'_>) -> Option<Outcome>) -> (Vec<&'static str>, AdminAnswer) {
        let config = config();
        let headers = HeaderMap::from_pairs(&[("cf-connecting-ip", "203.0.113.9"), ("authorization", &format!("Bearer {token}"))]);
        let (client, secrets) = (ClientFacts::default(), Secrets { admin_token: Some(TOKEN.into()), ..Secrets::default() });
        let facts = Facts { method, url, headers: &headers, client: &client, secrets: &secrets, now_ms: 1_000_000 };
        let mut machine = Machine::new(&config, facts, &PlanMemo::new(1), None);
        let (lockout, route, lockout_binds, access) = served(&mut machine, &config, None);
        let (mut flow, mut step) = AdminFlow::start(&config, &lockout, &route, lockout_binds, access.as_ref(), 1_000_000);
        let reply = || decode_reply_line(200, "1 a 0 - 0 0 0 0 0 0 - 0 5/60000/1/4/60000").unwrap();
        let mut steps = Vec::new();
        loop {
            step = match &step {
                AdminStep::VerifyAccess(proof) => {
                    steps.push("verify");
                    flow.verified(proof, Ok(()))
                }
                AdminStep::Lockout(..) => {
                    steps.push("lockout");
                    let outcome = answer(&step).unwrap_or(Outcome::Allowed { windows: Vec::new(), reservation: None });
                    flow.locked(outcome)
                }
                AdminStep::Control { change, .. } => {
                    steps.push("control");
                    let change = change.clone();
                    flow.changed(&change, Ok(Controls::default()))
                }
                AdminStep::Call { call, .. } => {
                    steps.push(if call.op == Op::Reset { "reset" } else { "status" });
                    flow.called(Ok(reply()))
                }
                AdminStep::ReadControls { .. } => {
                    steps.push("controls");
                    flow.controls(Ok(Controls::default()))
                }
                AdminStep::Register { .. } => {
                    steps.push("register");
                    flow.registered(Ok(String::new()))
                }
                AdminStep::ListRegistry { .. } => {
                    steps.push("list");
                    flow.listed(Ok(String::new()))
                }
                AdminStep::Sessions { .. } => {
                    steps.push("sessions");
                    flow.sessions(Ok(String::new()))
                }
                AdminStep::Traffic(_) => {
                    steps.push("traffic");
                    flow.traffic(Err("none".into()))
                }
                AdminStep::KeySpend { rule, key_hash, span_s } => {
                    steps.push("key_spend");
                    assert_eq!((rule.as_str(), key_hash.len(), *span_s), ("yen", 16, 60), "the rule's key over its longest window");
                    flow.key_spend(Ok(r#"{"data":[{"rule":"yen","model":"gpt-4o*","n":"2","micro":"1500001"},{"rule":"yen","model":"(unpriced)","n":1,"micro":7.0}]}"#.into()))
                }
                AdminStep::ReadEach { ids, .. } => {
                    steps.push("read_each");
                    let n = ids.len();
                    flow.read_each((0..n).map(|_| Ok(Controls::default())).collect())
                }
                AdminStep::Done(_) => break,
            };
        }
        let AdminStep::Done(done) = step else { unreachable!() };
        (steps, done)
    }

    #[test]
    fn a_ban_is_set_then_reported_and_the_isolate_refuses_the_key_until_it_ends() {
        let (steps, done) = run("POST", "https://example.com/.tollgate/ban?rule=a&ip=198.51.100.7&for=10m", TOKEN, &|_| None);
        assert_eq!(steps, ["control", "register", "status", "controls"], "a long right token passes the lockout");
        assert_eq!(done.cache, vec![CacheEffect::Ban { id: "a\nip=198.51.100.7".into(), until_ms: 1_000_000 + 600_000 }]);
        assert!(matches!(done.response, AdminResponse::Json(_)), "{:?}", done.response);
        assert_eq!(done.logs.len(), 1, "one admin line");
    }

    #[test]
    fn a_reset_forgets_the_cached_block_and_a_status_changes_nothing() {
        let (steps, done) = run("POST", "https://example.com/.tollgate/reset?rule=a&ip=198.51.100.7", TOKEN, &|_| None);
        assert_eq!(steps, ["reset", "controls"]);
        assert_eq!(done.cache, vec![CacheEffect::Forget("a\nip=198.51.100.7".into())]);
        let (steps, done) = run("GET", "https://example.com/.tollgate/status?rule=a&ip=198.51.100.7", TOKEN, &|_| None);
        assert_eq!(steps, ["status", "controls"]);
        assert!(done.cache.is_empty());
    }

    /// A money rule's status also asks the metrics for the key's spend by
    /// model over its longest window, said in its currency; a reset does not.
    #[test]
    fn a_money_rule_s_status_says_the_key_s_spend_by_model() {
        let (steps, done) = run("GET", "https://example.com/.tollgate/status?rule=yen&ip=198.51.100.7", TOKEN, &|_| None);
        assert_eq!(steps, ["status", "controls", "key_spend"]);
        let AdminResponse::Json(body) = done.response else { panic!("{:?}", done.response) };
        assert_eq!(body["spend_by_model"], json!([
            { "model": "gpt-4o*", "answers": 2, "micro": 1_500_001, "spent": "1.500001 JPY" },
            { "model": "(unpriced)", "answers": 1, "micro": 7, "spent": "0.000007 JPY" }
        ]));
        assert_eq!(body["unit"], "micro-JPY");
        let (steps, _) = run("POST", "https://example.com/.tollgate/reset?rule=yen&ip=198.51.100.7", TOKEN, &|_| None);
        assert_eq!(steps, ["reset", "controls"]);
    }

    #[test]
    fn a_locked_out_client_is_refused_before_anything_is_asked() {
        let blocked = |_: &AdminStep<'_>| Some(Outcome::Blocked { retry_after_ms: 62_000, window: 0, windows: None, by: crate::count::blocked::Refusal::Limit });
        let (steps, done) = run("POST", "https://example.com/.tollgate/ban?rule=a&ip=198.51.100.7", "wrong", &blocked);
        assert_eq!(steps, ["lockout"], "a wrong token asks the lockout counter, and nothing after");
        assert!(matches!(&done.response, AdminResponse::Own(r) if r.status == 429), "{:?}", done.response);
        assert!(done.cache.is_empty());
        let (steps, done) = run("POST", "https://example.com/.tollgate/ban?rule=a&ip=198.51.100.7", "wrong", &|_| None);
        assert_eq!(steps, ["lockout"]);
        assert!(matches!(&done.response, AdminResponse::Own(r) if r.status == 401), "{:?}", done.response);
    }

    /// A console request with the session `cookie` (and a form `body`), to
    /// its first admin step.
    fn console_step(config: &Config, method: &str, path: &str, cookie: &str, body: Option<&[u8]>, run: &dyn for<'f> Fn(AdminFlow<'f>, AdminStep<'f>)) {
        let headers = HeaderMap::from_pairs(&[("cf-connecting-ip", "203.0.113.9"), ("cookie", cookie), ("sec-fetch-site", "same-origin")]);
        let (client, secrets) = (ClientFacts::default(), Secrets { admin_token: Some(TOKEN.into()), ..Secrets::default() });
        let url = format!("https://example.com{path}");
        let facts = Facts { method, url: &url, headers: &headers, client: &client, secrets: &secrets, now_ms: 1_000_000 };
        let mut machine = Machine::new(config, facts, &PlanMemo::new(1), None);
        let (lockout, route, lockout_binds, access) = served(&mut machine, config, Some(body));
        assert!(!lockout_binds, "a session asks no lockout counter");
        let (flow, step) = AdminFlow::start(config, &lockout, &route, lockout_binds, access.as_ref(), 1_000_000);
        run(flow, step);
    }

    #[test]
    fn a_session_replayed_after_sign_out_gets_no_page_and_a_sign_out_is_recorded() {
        let config = config();
        let issued = 1_000_000 - 5_000;
        let value = session::issue(TOKEN, issued, "ip=203.0.113.9");
        let cookie = format!("tollgate_session={value}");
        for (signed_out, status) in [(Some(issued + 1), 401), (Some(issued), 401), (Some(issued - 1), 200), (None, 200)] {
            console_step(&config, "GET", "/.tollgate/ui/rules", &cookie, None, &|mut flow, step| {
                assert!(matches!(step, AdminStep::Sessions { call: RegistryCall::SignedOut, .. }), "{step:?}");
                let AdminStep::Done(done) = flow.sessions(Ok(signed_out.map(|t: i64| t.to_string()).unwrap_or_default())) else { panic!("more steps") };
                let AdminResponse::Own(own) = done.response else { panic!("not a page") };
                assert_eq!(own.status, status, "signed out at {signed_out:?}");
                assert_eq!(own.header("set-cookie").is_some_and(|c| c.contains("Max-Age=0")), status == 401);
            });
        }
        console_step(&config, "GET", "/.tollgate/ui/rules", &cookie, None, &|mut flow, _| {
            let AdminStep::Done(done) = flow.sessions(Err(CallFailure::Timeout { ms: 5 })) else { panic!("more steps") };
            assert!(matches!(done.response, AdminResponse::Own(ref own) if own.status == 503), "fails closed");
        });
        // Signing out: the session is checked, then the sign-out recorded at now.
        let form = format!("csrf={}", session::csrf_token(TOKEN, issued + session::SESSION_MS));
        console_step(&config, "POST", "/.tollgate/ui/signout", &cookie, Some(form.as_bytes()), &|mut flow, step| {
            assert!(matches!(step, AdminStep::Sessions { call: RegistryCall::SignedOut, .. }), "{step:?}");
            let step = flow.sessions(Ok(String::new()));
            assert!(matches!(step, AdminStep::Sessions { call: RegistryCall::SignOut { at_ms: 1_000_000, keep_ms: session::SESSION_MS }, .. }), "{step:?}");
            let AdminStep::Done(done) = flow.sessions(Ok(String::new())) else { panic!("more steps") };
            assert!(matches!(done.response, AdminResponse::Own(ref own) if own.status == 303 && own.header("set-cookie").is_some_and(|c| c.contains("Max-Age=0"))));
        });
    }


    /// A console request run to its end, each step answered as a key of
    /// rule `a` banned (`ip=198.51.100.7`, hash `hash`) would: the steps
    /// taken and the page.
    fn console_run(method: &str, path: &str, body: Option<&str>, hash: &str) -> (Vec<String>, OwnResponse) {
        let config = config();
        let issued = 1_000_000 - 5_000;
        let cookie = format!("tollgate_session={}", session::issue(TOKEN, issued, "ip=203.0.113.9"));
        let csrf = session::csrf_token(TOKEN, issued + session::SESSION_MS);
        let body = body.map(|b| format!("csrf={csrf}&{b}"));
        let entry = Entry { id: "a\nip=198.51.100.7".into(), kind: registry::Kind::Ban, rule: "a".into(), key_hash: hash.into(), until_ms: Some(9_000_000), limits: Vec::new(), reason: String::new(), by: "api".into(), set_ms: 1 };
        let out = std::cell::RefCell::new(None);
        console_step(&config, method, path, &cookie, body.as_deref().map(str::as_bytes), &|mut flow, mut step| {
            let mut steps = Vec::new();
            loop {
                step = match step {
                    AdminStep::Sessions { .. } => flow.sessions(Ok(String::new())),
                    AdminStep::ListRegistry { .. } => flow.listed(Ok(entry.encode())),
                    AdminStep::Control { id, change, .. } => {
                        steps.push(format!("control {change:?} {id:?}"));
                        flow.changed(&change, Ok(Controls::default()))
                    }
                    AdminStep::Register { call, .. } => {
                        steps.push(format!("register {}", call.encode().split('\t').next().unwrap_or_default()));
                        flow.registered(Ok(String::new()))
                    }
                    AdminStep::Call { id, .. } => {
                        steps.push(format!("status {id:?}"));
                        flow.called(Ok(decode_reply_line(200, "1 a 0 - 0 0 0 0 0 0 - 0 5/60000/1/4/60000").unwrap()))
                    }
                    AdminStep::ReadControls { .. } => flow.controls(Ok(Controls::default())),
                    AdminStep::Done(done) => {
                        let AdminResponse::Own(own) = done.response else { panic!("not a page") };
                        *out.borrow_mut() = Some((steps, own));
                        return;
                    }
                    other => panic!("{other:?}"),
                };
            }
        });
        out.into_inner().unwrap()
    }

    #[test]
    fn a_key_known_by_its_hash_is_found_in_the_registry_and_lifted_there() {
        let (steps, page) = console_run("GET", "/.tollgate/ui/keys?rule=a&key_hash=88fc262cb3e5792f", None, "88fc262cb3e5792f");
        assert_eq!(steps, ["status \"a\\nip=198.51.100.7\""], "the registry's entry names the object");
        assert_eq!(page.status, 200);
        assert!(page.body.contains("name=\"key_hash\" value=\"88fc262cb3e5792f\""), "the page's forms ask by the hash too: {}", page.body);
        assert!(!page.body.contains("198.51.100.7"), "the raw key is never shown");
        let (steps, page) = console_run("POST", "/.tollgate/ui/keys", Some("rule=a&key_hash=88fc262cb3e5792f&do=lift"), "88fc262cb3e5792f");
        assert_eq!(steps, ["control ClearBan \"a\\nip=198.51.100.7\"", "register remove", "status \"a\\nip=198.51.100.7\""], "lifted in the key's object, then the registry");
        assert!(page.body.contains("Done: ban lifted."), "{}", page.body);
        let (steps, page) = console_run("GET", "/.tollgate/ui/keys?rule=a&key_hash=0000", None, "88fc262cb3e5792f");
        assert!(steps.is_empty(), "{steps:?}");
        assert_eq!(page.status, 404);
        assert!(page.body.contains("no ban or override holds the key 0000"), "{}", page.body);
        let (steps, _) = console_run("POST", "/.tollgate/ui/keys", Some("rule=b&key_hash=88fc262cb3e5792f&do=lift"), "88fc262cb3e5792f");
        assert!(steps.is_empty(), "an unknown rule lifts nothing: {steps:?}");
    }

    /// An admin request under `admin_access` with the Access token of
    /// `claims` (its signature left to the driver), run to its end with the
    /// signature's check answering `verified`; the steps and the answer.
    fn run_access(url: &str, claims: serde_json::Value, verified: Result<(), AccessRefusal>) -> (Vec<&'static str>, AdminAnswer) {
        let mut value = json!({ "rules": [{ "name": "a", "path": "/a", "limits": [{ "requests": 5, "window": "1m" }] }] });
        value["admin_access"] = json!({ "team_domain": "acme.cloudflareaccess.com", "audience": "aud-tag" });
        let config = Config::from_json(&value).unwrap();
        let jwt = crate::admin::access::tests::token(&json!({ "alg": "RS256", "kid": "k1" }), &claims);
        let headers = HeaderMap::from_pairs(&[("cf-connecting-ip", "203.0.113.9"), ("cf-access-jwt-assertion", &jwt), ("authorization", "Bearer a wrong token")]);
        let (client, secrets) = (ClientFacts::default(), Secrets { admin_token: Some(TOKEN.into()), ..Secrets::default() });
        let facts = Facts { method: "GET", url, headers: &headers, client: &client, secrets: &secrets, now_ms: 1_000_000 };
        let mut machine = Machine::new(&config, facts, &PlanMemo::new(1), None);
        let (lockout, route, lockout_binds, access) = served(&mut machine, &config, None);
        assert!(!lockout_binds, "an Access token asks no lockout counter, and the bearer beside it is not compared");
        let (mut flow, mut step) = AdminFlow::start(&config, &lockout, &route, lockout_binds, access.as_ref(), 1_000_000);
        let mut steps = Vec::new();
        loop {
            step = match step {
                AdminStep::VerifyAccess(proof) => {
                    steps.push("verify");
                    assert_eq!(proof.kid, "k1");
                    flow.verified(proof, verified.clone())
                }
                AdminStep::ReadControls { .. } => {
                    steps.push("controls");
                    flow.controls(Ok(Controls::default()))
                }
                AdminStep::Call { .. } => {
                    steps.push("status");
                    flow.called(Ok(decode_reply_line(200, "1 a 0 - 0 0 0 0 0 0 - 0 5/60000/1/4/60000").unwrap()))
                }
                AdminStep::Done(done) => return (steps, done),
                other => panic!("{other:?}"),
            };
        }
    }

    #[test]
    fn an_access_token_is_verified_first_and_its_operator_named_on_every_admin_line() {
        let claims = json!({ "aud": ["aud-tag"], "iss": "https://acme.cloudflareaccess.com", "exp": 1_300, "email": "ann@example.com" });
        let (steps, done) = run_access("https://example.com/.tollgate/status?rule=a&ip=198.51.100.7", claims.clone(), Ok(()));
        assert_eq!(steps, ["verify", "status", "controls"]);
        assert!(matches!(done.response, AdminResponse::Json(_)), "{:?}", done.response);
        let lines: Vec<serde_json::Value> = done.logs.iter().map(|l| serde_json::from_str(&l.line()).unwrap()).collect();
        assert_eq!(lines.len(), 1);
        assert_eq!((lines[0]["action"].as_str(), lines[0]["operator"].as_str()), (Some("status"), Some("ann@example.com")));
        // The signature refused: 401, nothing asked, the reason logged.
        let (steps, done) = run_access("https://example.com/.tollgate/status?rule=a&ip=198.51.100.7", claims.clone(), Err(AccessRefusal::Signature));
        assert_eq!(steps, ["verify"]);
        assert!(matches!(&done.response, AdminResponse::Own(r) if r.status == 401), "{:?}", done.response);
        let line: serde_json::Value = serde_json::from_str(&done.logs[0].line()).unwrap();
        assert_eq!((line["tollgate"].as_str(), line["access"].as_str()), (Some("admin_denied"), Some("signature")));
        // Claims that do not hold: refused before any key is looked at.
        let mut expired = claims.clone();
        expired["exp"] = json!(900);
        let (steps, done) = run_access("https://example.com/.tollgate/rules", expired, Ok(()));
        assert!(steps.is_empty(), "{steps:?}");
        assert!(matches!(&done.response, AdminResponse::Own(r) if r.status == 401));
        assert!(done.logs[0].line().contains("\"access\":\"expired\""), "{}", done.logs[0].line());
        // The console: the page, with who signed in.
        let (steps, done) = run_access("https://example.com/.tollgate/ui/rules", claims, Ok(()));
        assert_eq!(steps[0], "verify");
        let AdminResponse::Own(own) = done.response else { panic!("not a page") };
        assert!(own.body.contains("<span id=\"who\""), "{}", own.body);
        assert!(own.body.contains("ann@example.com"));
    }

}
