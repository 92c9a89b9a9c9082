//! The console's HTML, pure: each page rendered from its admin JSON twin,
//! escaped, with the headers every console answer carries (a strict
//! `Content-Security-Policy` allowing no script at all, no framing,
//! forms only to the console itself; `no-store`). Keys appear only as
//! their hashes, except the parts the operator typed on the Keys page.

use crate::config::headers::OwnResponse;
use crate::request::key::KeyPart;
use crate::admin::console::{esc, time, traffic, ConsoleRoute, Page};
use crate::config::Config;
use serde_json::Value;
use std::fmt::Write;

/// The console's `Content-Security-Policy`: no script, styles only from
/// the console's own sheet, forms only to itself, never framed.
pub(crate) const CSP: &str =
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The style sheet (`{prefix}/ui/style.css`).
///
/// At any width down to 320 px the pages reflow (WCAG 2.2 SC 1.4.10): the
/// header wraps, cells break long hashes and commands, charts scale down;
/// an events or controls table, a row per refusal or control, scrolls
/// within its own box.
pub(crate) const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2228;background:#f6f7f9}\
header{display:flex;flex-wrap:wrap;gap:.4em 1.5em;align-items:center;padding:.6em 1.5em;background:#1d2228;color:#fff}\
header a{color:#cfe3ff;text-decoration:none}header a[aria-current]{color:#fff;text-decoration:underline}\
header form{margin:0 0 0 auto}nav{display:flex;flex-wrap:wrap;gap:1em}\
main{padding:1em 1.5em;max-width:70em;box-sizing:border-box}section{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:.6em 1em;margin:.8em 0}\
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #e5e8eb;padding:.3em .5em;text-align:left;vertical-align:top;overflow-wrap:anywhere}\
code{background:#eef1f4;padding:0 .25em;border-radius:3px;overflow-wrap:anywhere}pre.try{white-space:pre-wrap;overflow-wrap:anywhere;margin:.2em 0}th[scope=row]{width:1%;white-space:nowrap;overflow-wrap:normal}\
.err{color:#a30d1b;font-weight:600}.ok{color:#176b2c;font-weight:600}\
form.inline{display:flex;gap:.4em;flex-wrap:wrap;align-items:center;margin:.3em 0}input{padding:.25em .4em;max-width:100%;box-sizing:border-box}\
button{padding:.3em .8em;border:1px solid #55606e;border-radius:4px;background:#fff;color:#1d2228;cursor:pointer}\
.scroll{overflow-x:auto;max-width:100%}.scroll td,.scroll th{overflow-wrap:normal}table.events td,table.events th{white-space:nowrap}table.events td.raw-key{white-space:normal;overflow-wrap:anywhere;min-width:12em}\
.signin{max-width:24em;margin:4em auto}svg{background:#fff;border:1px solid #dde1e6;max-width:100%;height:auto}\
@media (max-width:40em){header{padding:.5em .8em;gap:.3em 1em}main{padding:.5em .8em}section{padding:.5em .6em}td,th{padding:.25em .3em}}";

/// A console answer: `status`, the HTML `body`, the console's headers.
pub(crate) fn html(status: u16, body: String) -> OwnResponse {
    let headers = [
        ("content-type", "text/html; charset=utf-8"),
        ("content-security-policy", CSP),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "same-origin"),
        ("cache-control", "no-store"),
    ];
    OwnResponse { status, headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(), body }
}

/// The style sheet's answer.
pub(crate) fn style() -> OwnResponse {
    let mut own = html(200, STYLE.to_string());
    own.headers[0].1 = "text/css; charset=utf-8".into();
    own.headers.retain(|(n, _)| n != "cache-control");
    own.headers.push(("cache-control".into(), "max-age=300".into()));
    own
}

/// A `303 See Other` to `location`, setting `cookie` when given.
pub(crate) fn redirect(location: &str, cookie: Option<String>) -> OwnResponse {
    let mut own = html(303, String::new());
    own.headers.push(("location".into(), location.to_string()));
    if let Some(c) = cookie {
        own.headers.push(("set-cookie".into(), c));
    }
    own
}

/// A page: `csrf` for a signed-in one (its navigation, the current page
/// marked, and Sign out), with `who` Cloudflare Access signed in, when it
/// did. One `<nav>`, only when there are links in it.
fn document(prefix: &str, title: &str, csrf: Option<&str>, who: Option<&str>, content: &str) -> String {
    let mut bar = String::new();
    if let Some(csrf) = csrf {
        bar.push_str("<nav aria-label=\"Console\">");
        for (page, name) in [(Page::Rules, "Rules"), (Page::Traffic, "Traffic"), (Page::Events, "Events"), (Page::Keys, "Keys"), (Page::Controls, "Controls")] {
            let current = if name == title { " aria-current=\"page\"" } else { "" };
            let _ = write!(bar, "<a href=\"{}{}\"{current}>{name}</a>", esc(prefix), page.path());
        }
        let _ = write!(
            bar,
            "</nav><form method=\"post\" action=\"{}/ui/signout\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">{}<button>Sign out</button></form>",
            esc(prefix),
            esc(csrf),
            who.map(|w| format!("<span id=\"who\" title=\"Signed in by Cloudflare Access\">{}</span> ", esc(w))).unwrap_or_default()
        );
    }
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>tollgate · {t}</title><link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"{p}/ui/style.css\"></head>\
<body><header><strong>tollgate</strong>{bar}</header><main><h1>{t}</h1>{content}</main></body></html>",
        t = esc(title),
        p = esc(prefix)
    )
}

/// The sign-in page, with a message (a wrong token, an ended session).
pub(crate) fn sign_in(prefix: &str, status: u16, message: Option<&str>) -> OwnResponse {
    let note = message.map(|m| format!("<p class=\"err\">{}</p>", esc(m))).unwrap_or_default();
    let form = format!(
        "<section class=\"signin\">{note}<form method=\"post\" action=\"{}/ui/signin\"><p><label>Admin token<br>\
<input type=\"password\" name=\"token\" autocomplete=\"current-password\" required autofocus></label></p>\
<p><button>Sign in</button></p></form></section>",
        esc(prefix)
    );
    html(status, document(prefix, "Sign in", None, None, &form))
}

/// A refused post (another site, no CSRF token).
pub(crate) fn forged(prefix: &str) -> OwnResponse {
    let text = "<p class=\"err\">Refused: this form did not come from the console (cross-site, or without its CSRF token).</p>";
    html(403, document(prefix, "Refused", None, None, text))
}

/// A page of the signed-in console, from its admin answer: `Ok(json)`, or
/// `Err(problem)` (an error the API would answer, shown on the page).
pub(crate) fn page<R>(config: &Config, route: &ConsoleRoute<R>, csrf: &str, answer: Option<Result<&Value, &OwnResponse>>) -> OwnResponse {
    // A problem the API would answer (4xx, 5xx) is shown; an answer of its
    // own that is no problem (a 2xx or 3xx) says nothing.
    let error = match answer {
        Some(Err(problem)) if problem.status >= 400 => {
            let detail = serde_json::from_str::<Value>(&problem.body).ok().and_then(|v| v.get("detail").and_then(Value::as_str).map(str::to_string));
            format!("<p class=\"err\">{} {}</p>", problem.status, esc(&detail.unwrap_or_default()))
        }
        _ => String::new(),
    };
    let json = answer.and_then(Result::ok);
    let (title, content) = match route.page {
        Page::Rules => ("Rules", crate::admin::console::rules::page(&config.rules)),
        Page::Controls => ("Controls", json.map(|body| controls(&route.prefix, csrf, body)).unwrap_or_default()),
        Page::Keys | Page::KeysAction => ("Keys", keys(config, route, csrf, json)),
        Page::Events => ("Events", events_page(&route.prefix, json)),
        _ => ("Traffic", traffic(&route.prefix, json)),
    };
    let status = match answer {
        Some(Err(problem)) if problem.status >= 400 => problem.status,
        _ => 200,
    };
    let banner = if route.short_token { short_token_banner() } else { String::new() };
    html(status, document(&route.prefix, title, Some(csrf), route.who.as_deref(), &format!("{banner}{error}{content}")))
}

/// The banner of every signed-in page while the admin token is short
/// ([`crate::admin::api::short_token_event`] says why).
fn short_token_banner() -> String {
    format!(
        "<p class=\"err\" id=\"short-token\">The admin token is shorter than {} characters: ten wrong tokens from your \
address (or its IPv6 /64) lock the API and the sign-in out there for 15 minutes, and a short token can be guessed. \
Set a long one: <code>openssl rand -hex 32 | wrangler secret put TOLLGATE_ADMIN_TOKEN</code>.</p>",
        crate::admin::api::TOKEN_PASSES_LOCKOUT_CHARS
    )
}

/// A JSON value as short text: strings as they are, `null` as `-`.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// The Controls page: every ban and override in force, each key leading
/// to its page, each with its button (Lift ban, Clear override: a Keys
/// form by key hash, with the session's CSRF token).
fn controls(prefix: &str, csrf: &str, body: &Value) -> String {
    let list = body["controls"].as_array().map(Vec::as_slice).unwrap_or_default();
    if list.is_empty() {
        return "<p>No ban or override is in force.</p>".into();
    }
    let mut out = String::from(
        "<div class=\"scroll\" role=\"region\" aria-label=\"Controls in force\" tabindex=\"0\"><table id=\"controls\"><tr><th scope=\"col\">Rule</th><th scope=\"col\">Key hash</th><th scope=\"col\">Control</th><th scope=\"col\">Limits</th><th scope=\"col\">Ends</th><th scope=\"col\">Reason</th><th scope=\"col\">Set by</th><th scope=\"col\">Set</th><th scope=\"col\">Action</th></tr>",
    );
    for c in list {
        let limits: Vec<String> = c["limits_text"].as_array().into_iter().flatten().map(text).collect();
        let (rule, hash, kind) = (text(&c["rule"]), text(&c["key_hash"]), text(&c["kind"]));
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&rule),
            key_link(prefix, &rule, &hash),
            esc(&kind),
            esc(&limits.join(", ")),
            c["until_ms"].as_i64().map_or_else(|| "never".to_string(), time),
            esc(&text(&c["reason"])),
            esc(&text(&c["by"])),
            c["set_ms"].as_i64().map_or_else(String::new, time),
            lift_form(prefix, csrf, &rule, &hash, &kind),
        );
    }
    out + "</table></div>"
}

/// The button that ends a control (`kind`: `ban` or `override`) of the key
/// of `rule` whose hash is `hash`, through the Keys page's own form.
fn lift_form(prefix: &str, csrf: &str, rule: &str, hash: &str, kind: &str) -> String {
    let (action, label) = match kind {
        "ban" => ("lift", "Lift ban"),
        "override" => ("clear_override", "Clear override"),
        _ => return String::new(),
    };
    format!(
        "<form class=\"inline\" method=\"post\" action=\"{}/ui/keys\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
<input type=\"hidden\" name=\"rule\" value=\"{r}\"><input type=\"hidden\" name=\"key_hash\" value=\"{h}\"><input type=\"hidden\" name=\"do\" value=\"{action}\">\
<button aria-label=\"{label} on {r} {h}\">{label}</button></form>",
        esc(prefix),
        esc(csrf),
        r = esc(rule),
        h = esc(hash),
    )
}

/// The range tabs of a traffic page (`page`: Traffic or Events), the
/// current one marked.
fn range_tabs(prefix: &str, page: Page, body: Option<&Value>) -> String {
    let range = body.and_then(|b| b["range"].as_str()).unwrap_or("hour");
    let mut out = String::from("<p class=\"tabs\">");
    for r in ["hour", "day", "week"] {
        let current = if r == range { " aria-current=\"page\"" } else { "" };
        let _ = write!(out, "<a href=\"{}{}?range={r}\"{current}>Last {r}</a> ", esc(prefix), page.path());
    }
    out + "</p>"
}

/// The traffic's answer, or why there is none (its error and how to set
/// the source up).
fn traffic_body(body: Option<&Value>) -> Result<&Value, String> {
    match body.filter(|b| b.get("error").is_none()) {
        Some(body) => Ok(body),
        None => Err(format!("<p class=\"err\">{}</p>{}", esc(body.and_then(|b| b["error"].as_str()).unwrap_or_default()), how_to())),
    }
}

/// A link to the Keys page of `rule`'s key of `key_hash` (found through
/// the controls registry: [`crate::admin::console::route`]).
fn key_link(prefix: &str, rule: &str, key_hash: &str) -> String {
    if key_hash.is_empty() || key_hash == "-" {
        return "-".into();
    }
    let href = format!("{prefix}/ui/keys?rule={}&key_hash={}", crate::admin::console::rules::form_escape(rule), crate::admin::console::rules::form_escape(key_hash));
    format!("<a href=\"{}\"><code>{}</code></a>", esc(&href), esc(key_hash))
}

fn traffic(prefix: &str, body: Option<&Value>) -> String {
    let mut out = range_tabs(prefix, Page::Traffic, body);
    let body = match traffic_body(body) {
        Ok(body) => body,
        Err(why) => return out + &why,
    };
    let rules = body["rules"].as_object().filter(|r| !r.is_empty());
    match rules {
        None => out.push_str("<p>No points in this range.</p>"),
        Some(rules) => {
            let (from, bucket) = (body["from_s"].as_u64().unwrap_or(0), body["bucket_s"].as_u64().unwrap_or(60));
            out.push_str(&traffic::allowed_blocked(&body["totals"]));
            let _ = write!(out, "<p>Decisions per {} (times in UTC), each line an action; the table under a chart gives its numbers.</p>", human(bucket * 1000));
            for (rule, per_action) in rules {
                let _ = write!(
                    out,
                    "<section><h2>{}</h2>{}{}</section>",
                    esc(rule),
                    traffic::chart(rule, per_action, from, bucket),
                    traffic::table(per_action, from, bucket)
                );
            }
        }
    }
    out.push_str("<section><h2>Top blocked keys</h2><p>Each key hash leads to its page on Keys when the key has a ban or an override.</p><table id=\"top-keys\"><tr><th scope=\"col\">Rule</th><th scope=\"col\">Key hash</th><th scope=\"col\">Blocked</th></tr>");
    for k in body["top_keys"].as_array().into_iter().flatten() {
        let (rule, hash) = (text(&k["rule"]), text(&k["key_hash"]));
        let _ = write!(out, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", esc(&rule), key_link(prefix, &rule, &hash), k["n"]);
    }
    out.push_str("</table></section><section><h2>Top countries and colos (limited traffic)</h2><table id=\"top-places\"><tr><th scope=\"col\">Country</th><th scope=\"col\">Colo</th><th scope=\"col\">Decisions</th></tr>");
    for p in body["top_places"].as_array().into_iter().flatten() {
        let _ = write!(out, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", esc(&text(&p["country"])), esc(&text(&p["colo"])), p["n"]);
    }
    out + "</table></section>" + &spend_by_model(body)
}

/// The spend by model of the priced rules (`spend` of the traffic's
/// answer), dearest first; nothing when no priced answer settled in the
/// range.
fn spend_by_model(body: &Value) -> String {
    let rows = body["spend"].as_array().map(Vec::as_slice).unwrap_or_default();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from("<section><h2>Spend by model</h2><p>What priced answers cost, by the price pattern that priced the model each named (<code>(unpriced)</code>: charged at the table's highest prices). Sums of the metric points, which Analytics Engine may sample; a key's exact spend is on its Keys page.</p><table id=\"spend\"><tr><th scope=\"col\">Rule</th><th scope=\"col\">Model</th><th scope=\"col\">Answers</th><th scope=\"col\">Spent</th></tr>");
    for r in rows {
        let _ = write!(out, "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>", esc(&text(&r["rule"])), esc(&text(&r["model"])), r["answers"], esc(&text(&r["spent"])));
    }
    out + "</table></section>"
}

/// The Events page: the range tabs, then per rule (in the order of its
/// newest refusal) a table of its refusals, newest first: when, why, the
/// action, method, route, country, colo, ASN, the key's hash (leading to
/// its Keys page) and, only on a rule that writes it, the raw key.
pub(crate) fn events_page(prefix: &str, body: Option<&Value>) -> String {
    let mut out = range_tabs(prefix, Page::Events, body);
    let body = match traffic_body(body) {
        Ok(body) => body,
        Err(why) => return out + &why,
    };
    let events = body["events"].as_array().map(Vec::as_slice).unwrap_or_default();
    if events.is_empty() {
        return out + "<p>No refusals in this range.</p>";
    }
    let _ = write!(out, "<p>The newest {} refusals at most (blocked, shadow and fail-closed decisions; times in UTC). Keys show as their hashes; a rule with <code>metrics_raw_key = true</code> shows the key too.</p>", traffic::EVENTS_LISTED);
    let mut rules: Vec<&str> = Vec::new();
    for e in events {
        let rule = e["rule"].as_str().unwrap_or_default();
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
    for rule in rules {
        let of_rule: Vec<&Value> = events.iter().filter(|e| e["rule"].as_str() == Some(rule)).collect();
        let with_key = of_rule.iter().any(|e| e.get("key").is_some());
        let _ = write!(
            out,
            "<section><h2>{r}</h2><div class=\"scroll\" role=\"region\" aria-label=\"Refusals of {r}\" tabindex=\"0\"><table class=\"events\" data-rule=\"{r}\">\
<tr><th scope=\"col\">Time</th><th scope=\"col\">Reason</th><th scope=\"col\">Action</th><th scope=\"col\">Method</th><th scope=\"col\">Route</th>\
<th scope=\"col\">Country</th><th scope=\"col\">Colo</th><th scope=\"col\">ASN</th><th scope=\"col\">Key hash</th>{k}</tr>",
            r = esc(rule),
            k = if with_key { "<th scope=\"col\">Key</th>" } else { "" }
        );
        for e in of_rule {
            out.push_str(&event_row(prefix, rule, e, with_key));
        }
        out.push_str("</table></div></section>");
    }
    out
}

/// One refusal's row of the Events page (`-` for what is unknown).
fn event_row(prefix: &str, rule: &str, e: &Value, with_key: bool) -> String {
    let at = e["t"].as_i64().unwrap_or(0).saturating_mul(1000);
    let cell = |name: &str| esc(&Some(text(&e[name])).filter(|t| !t.is_empty()).unwrap_or_else(|| "-".into()));
    let mut row = format!(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
        time(at),
        cell("reason"),
        cell("action"),
        cell("method"),
        cell("route"),
        cell("country"),
        cell("colo"),
        cell("asn"),
        key_link(prefix, rule, e["key_hash"].as_str().unwrap_or_default()),
    );
    if with_key {
        let _ = write!(row, "<td class=\"raw-key\"><code>{}</code></td>", e.get("key").map(|k| esc(&text(k))).unwrap_or_else(|| "-".into()));
    }
    row + "</tr>"
}

fn how_to() -> String {
    "<p>Traffic charts read the Analytics Engine dataset bound as <code>TOLLGATE_METRICS</code> through its SQL API. \
Set the var <code>TOLLGATE_ACCOUNT_ID</code> and the secret <code>TOLLGATE_ANALYTICS_TOKEN</code> (an API token with \
Account Analytics: Read) to turn them on (and <code>TOLLGATE_ANALYTICS_DATASET</code> when the dataset is not \
named <code>tollgate</code>). Under <code>scripts/dev</code> the Worker keeps the same points in a local sink instead.</p>"
        .into()
}

/// Hidden inputs of the key the operator typed, and the CSRF token.
fn hidden(route_typed: &[(String, String)], csrf: &str) -> String {
    let mut out = format!("<input type=\"hidden\" name=\"csrf\" value=\"{}\">", esc(csrf));
    for (name, value) in route_typed {
        let _ = write!(out, "<input type=\"hidden\" name=\"{}\" value=\"{}\">", esc(name), esc(value));
    }
    out
}

/// The Keys page's forms on a key: the `do` action, then its fields.
const KEY_FORMS: [(&str, &str); 5] = [
    ("ban", "<label>Ban for <input name=\"for\" value=\"1h\" size=\"5\"></label><label>Reason <input name=\"reason\" size=\"30\"></label><button>Ban</button>"),
    ("lift", "<button>Lift ban</button>"),
    (
        "override",
        "<label>Limit <input name=\"limit\" value=\"1000/1d\" size=\"9\"></label><label>for <input name=\"for\" size=\"5\"></label>\
<label>Reason <input name=\"reason\" size=\"20\"></label><button>Override</button>",
    ),
    ("clear_override", "<button>Clear override</button>"),
    ("reset", "<button>Reset count</button>"),
];

fn keys<R>(config: &Config, route: &ConsoleRoute<R>, csrf: &str, status: Option<&Value>) -> String {
    let p = esc(&route.prefix);
    let mut out = String::new();
    if let Some(s) = status {
        let _ = write!(out, "<section id=\"status\"><h2>{} · <code>{}</code></h2>", esc(&text(&s["rule"])), esc(&text(&s["key_hash"])));
        if let Some(done) = done(s["action"].as_str()) {
            let _ = write!(out, "<p class=\"ok\" role=\"status\">Done: {done}.</p>");
        }
        let _ = write!(out, "<p>Limits from: <code>{}</code></p>", esc(&text(&s["limits_source"])));
        out.push_str(&limits_said(s));
        if let Some(spent) = s["spent"].as_str() {
            let _ = write!(out, "<p id=\"spent\">Spent: {} (in its longest window)</p>", esc(spent));
        }
        out.push_str(&key_spend(s));
        out.push_str(&windows(s));
        if s["override"].is_object() {
            let _ = write!(out, "<p id=\"overridden\">Override: <code>{}</code></p>", esc(&s["override"].to_string()));
        }
        let h = hidden(&route.typed, csrf);
        for (action, fields) in KEY_FORMS {
            let _ = write!(out, "<form class=\"inline\" method=\"post\" action=\"{p}/ui/keys\">{h}<input type=\"hidden\" name=\"do\" value=\"{action}\">{fields}</form>");
        }
        out.push_str("</section>");
    }
    for rule in &config.rules {
        let _ = write!(out, "<section><h2>{n}</h2><form class=\"inline\" method=\"get\" action=\"{p}/ui/keys\"><input type=\"hidden\" name=\"rule\" value=\"{n}\">", n = esc(&rule.name));
        let typed = |name: &str| route.typed.iter().find(|(n, _)| n == name && route.typed.first().is_some_and(|(_, r)| *r == rule.name)).map(|(_, v)| v.as_str());
        for name in rule.key.iter().filter_map(KeyPart::param_name) {
            let _ = write!(out, "<label>{n} <input name=\"{n}\" value=\"{}\"></label>", esc(typed(&name).unwrap_or("")), n = esc(&name));
        }
        out.push_str("<button>Look up</button></form></section>");
    }
    out
}

/// What an action did, in words (`None`: a status, nothing done).
fn done(action: Option<&str>) -> Option<&'static str> {
    Some(match action? {
        "ban" => "banned",
        "clear_ban" => "ban lifted",
        "override" => "override set",
        "clear_override" => "override cleared",
        "reset" => "count reset",
        "status" => return None,
        _ => "done",
    })
}

/// A money rule's key: its spend by model over its longest window, from
/// the metrics (status's `spend_by_model`); nothing when none was read.
fn key_spend(status: &Value) -> String {
    let rows = status["spend_by_model"].as_array().map(Vec::as_slice).unwrap_or_default();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from("<table id=\"key-spend\"><caption>By model (from the metrics, which may be sampled)</caption><tr><th scope=\"col\">Model</th><th scope=\"col\">Answers</th><th scope=\"col\">Spent</th></tr>");
    for r in rows {
        let _ = write!(out, "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>", esc(&text(&r["model"])), r["answers"], esc(&text(&r["spent"])));
    }
    out + "</table>"
}

/// The key's windows: what it used and when each resets; on a banned key,
/// the ban in their place (nothing remains while it lasts).
fn windows(status: &Value) -> String {
    if let Some(until) = status["ban"]["until_ms"].as_i64() {
        let reason = status["ban"]["reason"].as_str().or(status["reason"].as_str()).filter(|r| !r.is_empty());
        let why = reason.map(|r| format!(" ({})", esc(r))).unwrap_or_default();
        return format!("<p class=\"err\" id=\"banned\">Banned until {}{why}: every request of this key is refused.</p>", time(until));
    }
    let mut out = String::from("<table id=\"windows\"><tr><th scope=\"col\">Window</th><th scope=\"col\">Used</th><th scope=\"col\">Remaining</th><th scope=\"col\">Resets in</th></tr>");
    for w in status["windows"].as_array().into_iter().flatten() {
        let reset = match w["reset_ms"].as_u64() {
            Some(ms) if ms > 0 && w["used"].as_u64() != Some(0) => human(ms),
            _ => "-".into(),
        };
        // A calendar window: its unit; it resets whole at the
        // period's end, which `reset_ms` is.
        let window = match w["calendar"].as_str() {
            Some(unit) => format!("calendar {}", esc(unit)),
            None => duration(w["window_ms"].as_u64().unwrap_or(0)),
        };
        // A money rule's window in its currency (status's `spend_*`
        // text, the counts' own wording), any other's counts as they are.
        let said = |text: &str, count: &str| esc(&w[text].as_str().map_or_else(|| w[count].to_string(), str::to_string));
        let _ = write!(out, "<tr><td>{}/{window}</td><td>{}</td><td>{}</td><td>{reset}</td></tr>", said("spend_limit", "limit"), said("spent", "used"), said("remaining_spend", "remaining"));
    }
    out + "</table>"
}

/// The key's limits in force in words, as status says them (a
/// calendar window's zone and local reset), or nothing.
fn limits_said(status: &Value) -> String {
    let said: Vec<&str> = status["limits_text"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if said.is_empty() {
        return String::new();
    }
    format!("<p id=\"limits\">Limits: {}</p>", esc(&said.join("; ")))
}

/// A span in ms for a person: its two largest units, the seconds rounded
/// up (`879805` → `14m 40s`, `90000` → `1m 30s`, `3600000` → `1h`, `400` → `1s`).
pub(crate) fn human(ms: u64) -> String {
    let secs = ms.div_ceil(1000);
    let units = [(secs / 86_400, "d"), (secs % 86_400 / 3600, "h"), (secs % 3600 / 60, "m"), (secs % 60, "s")];
    let Some(first) = units.iter().position(|(n, _)| *n > 0) else { return "0s".into() };
    let shown: Vec<String> = units[first..].iter().take(2).filter(|(n, _)| *n > 0).map(|(n, u)| format!("{n}{u}")).collect();
    shown.join(" ")
}

/// A duration in ms as the config writes one (`90s`, `15m`, `2h`, `1d`).
pub(crate) fn duration(ms: u64) -> String {
    match ms {
        0 => "0s".into(),
        ms if ms % 86_400_000 == 0 => format!("{}d", ms / 86_400_000),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_is_escaped_and_times_and_durations_read_as_written() {
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(time(1_796_083_199_000), "2026-11-30 23:59:59 UTC");
        assert_eq!(time(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(duration(900_000), "15m");
        assert_eq!(duration(86_400_000), "1d");
        assert_eq!(duration(1500), "1500ms");
        assert_eq!(human(879_805), "14m 40s", "the issue's own: not 879805ms");
        assert_eq!(human(3_600_000), "1h");
        assert_eq!(human(3_660_000), "1h 1m");
        assert_eq!(human(90_061_000), "1d 1h", "two units at most");
        assert_eq!(human(400), "1s", "rounded up: never sooner than it says");
        assert_eq!(human(0), "0s");
    }

    #[test]
    fn a_banned_key_shows_the_ban_not_what_remains() {
        let status = json!({ "ban": { "until_ms": 0, "reason": "<x>" }, "windows": [{ "limit": 10, "window_ms": 60_000, "used": 0, "remaining": 10, "reset_ms": 0 }] });
        let shown = windows(&status);
        assert!(shown.contains("Banned until 1970-01-01 00:00:00 UTC (&lt;x&gt;)") && !shown.contains("Remaining"), "{shown}");
        let open = windows(&json!({ "windows": [{ "limit": 10, "window_ms": 900_000, "used": 3, "remaining": 7, "reset_ms": 879_805 }] }));
        assert!(open.contains("<td>10/15m</td><td>3</td><td>7</td><td>14m 40s</td>"), "{open}");
        let day = windows(&json!({ "windows": [{ "limit": 300, "window_ms": 93_600_000, "used": 300, "remaining": 0, "reset_ms": 25_200_000, "calendar": "day" }] }));
        assert!(day.contains("<td>300/calendar day</td><td>300</td><td>0</td><td>7h</td>"), "{day}");
        let yen = windows(&json!({ "windows": [{ "limit": 200_000_000, "window_ms": 93_600_000, "used": 12_345_678, "remaining": 187_654_322, "reset_ms": 25_200_000, "calendar": "day",
            "spend_limit": "200 JPY", "spent": "12.345678 JPY", "remaining_spend": "187.654322 JPY" }] }));
        assert!(yen.contains("<td>200 JPY/calendar day</td><td>12.345678 JPY</td><td>187.654322 JPY</td><td>7h</td>"), "a money rule in its currency: {yen}");
        let said = limits_said(&json!({ "limits_text": ["10 per 1m", "300 a day (Asia/Tokyo), resets at 2026-12-07T00:00+09:00"] }));
        assert_eq!(said, "<p id=\"limits\">Limits: 10 per 1m; 300 a day (Asia/Tokyo), resets at 2026-12-07T00:00+09:00</p>");
        assert_eq!(limits_said(&json!({})), "", "an older status: nothing");
        let spend = spend_by_model(&json!({ "spend": [{ "rule": "yen", "model": "gpt-4o*", "answers": 3, "micro": 12_345_678, "spent": "12.345678 JPY" }] }));
        assert!(spend.contains("<tr><td>yen</td><td><code>gpt-4o*</code></td><td>3</td><td>12.345678 JPY</td></tr>"), "{spend}");
        assert_eq!(spend_by_model(&json!({ "spend": [] })), "", "no priced answer: no section");
        let key = key_spend(&json!({ "spend_by_model": [{ "model": "<b>", "answers": 2, "spent": "1.5 JPY" }] }));
        assert!(key.contains("<tr><td><code>&lt;b&gt;</code></td><td>2</td><td>1.5 JPY</td></tr>"), "{key}");
        assert_eq!(key_spend(&json!({ "spend_by_model": null })), "");
        assert_eq!(done(Some("clear_ban")), Some("ban lifted"));
        assert_eq!(done(Some("status")), None);
    }

    #[test]
    fn the_controls_page_names_keys_by_hash_and_escapes_reasons() {
        let body = json!({ "controls": [{ "rule": "login", "key_hash": "274be81a020a0956", "kind": "ban", "until_ms": 0,
            "limits": [], "reason": "<script>alert(1)</script>", "by": "console", "set_ms": 0, "checked": true }] });
        let page = controls("/.tollgate", "c5rf", &body);
        assert!(page.contains("274be81a020a0956") && page.contains("&lt;script&gt;") && !page.contains("<script>"));
        assert!(page.contains("href=\"/.tollgate/ui/keys?rule=login&amp;key_hash=274be81a020a0956\""), "the key leads to its page: {page}");
        for field in ["name=\"csrf\" value=\"c5rf\"", "name=\"key_hash\" value=\"274be81a020a0956\"", "name=\"do\" value=\"lift\"", ">Lift ban</button>"] {
            assert!(page.contains(field), "the lift form holds {field}: {page}");
        }
        assert_eq!(controls("/.tollgate", "c", &json!({ "controls": [] })), "<p>No ban or override is in force.</p>");
    }

    #[test]
    fn the_events_page_lists_refusals_per_rule_and_the_raw_key_only_when_given() {
        let body = json!({ "range": "hour", "events": [
            { "t": 1_796_083_200, "rule": "login", "action": "blocked", "reason": "ban", "method": "POST", "route": "/login", "country": "NL", "colo": "AMS", "asn": "64500", "key_hash": "aa", "key": "ip=<b>" },
            { "t": 1_796_083_100, "rule": "api", "action": "blocked", "reason": "missing_key", "method": "GET", "route": "/api/*", "country": "", "colo": "", "asn": "", "key_hash": "" },
            { "t": 1_796_083_000, "rule": "login", "action": "shadow", "reason": "limit", "method": "POST", "route": "/login", "country": "NL", "colo": "AMS", "asn": "", "key_hash": "bb" }
        ] });
        let page = events_page("/.tollgate", Some(&body));
        assert_eq!(page.matches("<table class=\"events\"").count(), 2, "a table per rule: {page}");
        assert!(page.find("data-rule=\"login\"") < page.find("data-rule=\"api\""), "the rule refused last comes first");
        assert!(page.contains("<td>2026-12-01 00:00:00 UTC</td><td>ban</td><td>blocked</td><td>POST</td><td><code>/login</code></td><td>NL</td><td>AMS</td><td>64500</td>"), "{page}");
        assert!(page.contains("href=\"/.tollgate/ui/keys?rule=login&amp;key_hash=aa\""), "the hash leads to the key's page: {page}");
        assert!(page.contains("<td class=\"raw-key\"><code>ip=&lt;b&gt;</code></td>"), "escaped: {page}");
        assert_eq!(page.matches("<th scope=\"col\">Key</th>").count(), 1, "only the rule that writes raw keys has the column");
        assert!(page.contains("<td>missing_key</td>") && page.contains("<td>-</td><td>-</td><td>-</td><td>-</td></tr>"), "{page}");
        assert!(events_page("/.tollgate", Some(&json!({ "range": "day", "events": [] }))).contains("No refusals in this range."));
        assert!(events_page("/.tollgate", Some(&json!({ "range": "hour", "error": "not set" }))).contains("not set"));
    }

    #[test]
    fn every_console_answer_forbids_script_and_framing() {
        let own = sign_in("/.tollgate", 401, Some("Wrong token."));
        assert_eq!(own.header("content-security-policy"), Some(CSP));
        assert!(CSP.contains("default-src 'none'") && !CSP.contains("script-src") && CSP.contains("frame-ancestors 'none'"));
        assert_eq!(own.header("x-frame-options"), Some("DENY"));
        assert!(!own.body.contains("<script"), "no script at all");
        assert_eq!(redirect("/x", Some("c=1".into())).header("set-cookie"), Some("c=1"));
    }
}
