//! The operator's command line.
//!
//! ```text
//! tollgate check [wrangler.toml]             validate the config (every environment) offline
//! tollgate explain <url> [options]           what the Worker does with one request
//!     --config FILE          wrangler.toml to read (default: ./wrangler.toml)
//!     --env NAME             use [env.NAME.vars.TOLLGATE]
//!     -X, --method M         request method (default GET)
//!     -H, --header 'K: V'    a request header (repeatable; repeats join with ", ")
//!     --data TEXT            request body (alias --body); set content-type with -H
//!     --data-file FILE       request body from a file
//!     --ip ADDR              client IP, as CF-Connecting-IP
//!     --country CC           request.cf.country
//!     --asn N                request.cf.asn
//!     --outcome O            what the counters say: allowed (default), blocked or
//!                            failed; or RULE=O for one rule (repeatable)
//!     --json                 the plan and verdict as JSON
//!     --log-key-file FILE    the Worker's TOLLGATE_LOG_KEY secret, so key hashes
//!                            match its logs (default: the env var TOLLGATE_LOG_KEY)
//! tollgate hash <key>                        the key_hash the Worker logs for a key
//! tollgate hash --rule NAME PART=VALUE...    ... for the key a rule derives from raw
//!                                            values (`ip=203.0.113.7`, `body:email=a@b.io`)
//!     --config FILE, --env NAME, --log-key-file FILE   as for explain
//! ```
//! `check` exits 1 when any config has errors (warnings alone exit 0).
//!
//! Key hashes are HMAC-SHA256 under the Worker's `TOLLGATE_LOG_KEY` secret
//! when it has one: the CLI reads the same key from `--log-key-file` or the
//! env var `TOLLGATE_LOG_KEY`; with neither, it prints the unkeyed hash, as
//! a Worker without the secret logs.

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    std::process::exit(native::run(std::env::args().skip(1).collect()));
}

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use serde_json::Value;
    use tollgate::config::Config;
    use tollgate::coverage::route_warnings;
    use tollgate::explain::{explain, explain_json, key_hash, log_key, rule_key, Assumed, Assumptions, ExplainRequest};

    const USAGE: &str = "usage:
  tollgate check [wrangler.toml]
  tollgate explain <url> [--config FILE] [--env NAME] [-X METHOD] [-H 'Name: value']...
                   [--data TEXT | --data-file FILE] [--ip ADDR] [--country CC] [--asn N]
                   [--outcome allowed|blocked|failed|RULE=...]... [--json] [--log-key-file FILE]
  tollgate hash <key> [--log-key-file FILE]
  tollgate hash --rule NAME PART=VALUE... [--config FILE] [--env NAME] [--log-key-file FILE]
  (the log key: --log-key-file, else the env var TOLLGATE_LOG_KEY)";

    /// The Worker secret (and the CLI's env var) that keys log hashes.
    const LOG_KEY_VAR: &str = "TOLLGATE_LOG_KEY";

    pub fn run(args: Vec<String>) -> i32 {
        match args.first().map(String::as_str) {
            Some("check") => check(args.get(1).map_or("wrangler.toml", String::as_str)),
            Some("explain") => match parse_explain(&args[1..]) {
                Ok(options) => run_explain(&options),
                Err(e) => {
                    eprintln!("tollgate explain: {e}\n{USAGE}");
                    2
                }
            },
            Some("hash") => match parse_hash(&args[1..]) {
                Ok(options) => run_hash(&options),
                Err(e) => {
                    eprintln!("tollgate hash: {e}\n{USAGE}");
                    2
                }
            },
            Some("-h" | "--help" | "help") => {
                println!("{USAGE}");
                0
            }
            _ => {
                eprintln!("{USAGE}");
                2
            }
        }
    }

    /// The wrangler.toml as JSON (what the Worker's `env` sees).
    fn read_wrangler(path: &str) -> Result<Value, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        let parsed: toml::Value = toml::from_str(&text).map_err(|e| format!("{path} is not valid TOML: {e}"))?;
        serde_json::to_value(parsed).map_err(|e| format!("{path}: {e}"))
    }

    fn routes(section: &Value) -> Option<Vec<String>> {
        let one = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => o.get("pattern").and_then(Value::as_str).map(str::to_string),
            _ => None,
        };
        if let Some(list) = section.get("routes").and_then(Value::as_array) {
            return Some(list.iter().filter_map(one).collect());
        }
        section.get("route").and_then(one).map(|r| vec![r])
    }

    /// Every (label, TOLLGATE value, routes) to validate: the top level and
    /// each `[env.NAME]` (vars are not inherited by environments; routes are).
    fn configs(wrangler: &Value) -> Vec<(String, Option<Value>, Vec<String>)> {
        let top_routes = routes(wrangler).unwrap_or_default();
        let tollgate = |section: &Value| section.get("vars").and_then(|v| v.get("TOLLGATE")).cloned();
        let mut out = vec![("top level".to_string(), tollgate(wrangler), top_routes.clone())];
        if let Some(envs) = wrangler.get("env").and_then(Value::as_object) {
            for (name, section) in envs {
                let env_routes = routes(section).unwrap_or_else(|| top_routes.clone());
                out.push((format!("env `{name}`"), tollgate(section), env_routes));
            }
        }
        out
    }

    fn check(path: &str) -> i32 {
        let wrangler = match read_wrangler(path) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        };
        let mut failed = false;
        for (label, value, routes) in configs(&wrangler) {
            let Some(value) = value else {
                eprintln!("error: {path} {label}: no [vars.TOLLGATE] (vars are not inherited by environments); the Worker would answer 503 to everything");
                failed = true;
                continue;
            };
            match Config::from_json(&value) {
                Ok(config) => {
                    println!("{path} {label}: ok, {} rule(s)", config.rules.len());
                    for warning in route_warnings(&routes, &config) {
                        println!("warning: {path} {label}: {warning}");
                    }
                }
                Err(errors) => {
                    failed = true;
                    for e in errors {
                        eprintln!("error: {path} {label}: {e}");
                    }
                }
            }
        }
        // Once, not per environment: check cannot see secrets, so this is a
        // reminder, not a finding.
        println!(
            "warning: key_hash in logs and admin output is an unkeyed SHA-256 prefix (reversible for IPv4 keys by \
             trying every address) unless the Worker has the secret {LOG_KEY_VAR}; check cannot see secrets: \
             `npx wrangler secret put {LOG_KEY_VAR}` (and `--env NAME` for each environment) if not done yet"
        );
        i32::from(failed)
    }

    /// The log key: the file's content (`--log-key-file`), else the env var
    /// [`LOG_KEY_VAR`]; `None` with neither (or a blank one): unkeyed, as a
    /// Worker without the secret. Trimmed as the Worker trims the secret.
    fn read_log_key(file: Option<&str>) -> Result<Option<Vec<u8>>, String> {
        match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
                log_key(&text).map(Some).ok_or_else(|| format!("{path} holds no log key (it is blank)"))
            }
            None => Ok(std::env::var(LOG_KEY_VAR).ok().and_then(|v| log_key(&v))),
        }
    }

    /// The validated config of `path` (its top level, or `[env.NAME]`), or
    /// the messages saying why there is none.
    fn load_config(path: &str, env: Option<&str>) -> Result<Config, Vec<String>> {
        let wrangler = read_wrangler(path).map_err(|e| vec![e])?;
        let section = match env {
            None => &wrangler,
            Some(name) => wrangler
                .get("env")
                .and_then(|e| e.get(name))
                .ok_or_else(|| vec![format!("{path} has no environment `{name}` ([env.{name}])")])?,
        };
        let value = section
            .get("vars")
            .and_then(|v| v.get("TOLLGATE"))
            .ok_or_else(|| vec![format!("no TOLLGATE config in {path}")])?;
        Config::from_json(value).map_err(|errors| errors.iter().map(ToString::to_string).collect())
    }

    struct HashOptions {
        /// The key itself (`ip=203.0.113.7`), or, with `rule`, `PART=VALUE`s.
        args: Vec<String>,
        rule: Option<String>,
        config: String,
        env: Option<String>,
        log_key_file: Option<String>,
    }

    fn parse_hash(args: &[String]) -> Result<HashOptions, String> {
        let mut options =
            HashOptions { args: Vec::new(), rule: None, config: "wrangler.toml".into(), env: None, log_key_file: None };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let mut value = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value"));
            match arg.as_str() {
                "--rule" => options.rule = Some(value("--rule")?),
                "--config" => options.config = value("--config")?,
                "--env" => options.env = Some(value("--env")?),
                "--log-key-file" => options.log_key_file = Some(value("--log-key-file")?),
                other if other.starts_with("--") => return Err(format!("unknown option {other}")),
                other => options.args.push(other.to_string()),
            }
        }
        match (&options.rule, options.args.len()) {
            (None, 1) => Ok(options),
            (None, _) => Err("give one key (`ip=203.0.113.7`), or --rule NAME and its PART=VALUEs".into()),
            (Some(_), 0) => Err("--rule needs the raw value of each key part (`ip=203.0.113.7`)".into()),
            (Some(_), _) => Ok(options),
        }
    }

    /// Prints `HASH  KEY`, as `sha256sum` prints a file's.
    fn run_hash(options: &HashOptions) -> i32 {
        let log_key = match read_log_key(options.log_key_file.as_deref()) {
            Ok(key) => key,
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        };
        let key = match &options.rule {
            None => options.args.concat(),
            Some(rule) => {
                let config = match load_config(&options.config, options.env.as_deref()) {
                    Ok(config) => config,
                    Err(errors) => {
                        for e in errors {
                            eprintln!("error: {e}");
                        }
                        return 1;
                    }
                };
                let mut values = Vec::new();
                for arg in &options.args {
                    let Some((part, value)) = arg.split_once('=') else {
                        eprintln!("error: `{arg}` is not PART=VALUE (`ip=203.0.113.7`, `body:email=a@b.io`)");
                        return 2;
                    };
                    values.push((part.to_string(), value.to_string()));
                }
                match rule_key(&config, rule, &values) {
                    Ok(key) => key,
                    Err(e) => {
                        eprintln!("error: {e}");
                        return 1;
                    }
                }
            }
        };
        if log_key.is_none() {
            eprintln!(
                "note: no log key ({LOG_KEY_VAR} or --log-key-file): this is the unkeyed hash a Worker without the secret logs"
            );
        }
        println!("{}  {key}", key_hash(&key, log_key.as_deref()));
        0
    }

    struct ExplainOptions {
        url: Option<String>,
        config: String,
        env: Option<String>,
        method: String,
        headers: Vec<(String, String)>,
        body: Option<Vec<u8>>,
        country: Option<String>,
        asn: Option<u32>,
        default_outcome: Assumed,
        outcomes: Vec<(String, Assumed)>,
        json: bool,
        log_key_file: Option<String>,
    }

    fn parse_explain(args: &[String]) -> Result<ExplainOptions, String> {
        let mut options = ExplainOptions {
            url: None,
            config: "wrangler.toml".into(),
            env: None,
            method: "GET".into(),
            headers: Vec::new(),
            body: None,
            country: None,
            asn: None,
            default_outcome: Assumed::Allowed,
            outcomes: Vec::new(),
            json: false,
            log_key_file: None,
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let mut value = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value"));
            match arg.as_str() {
                "--config" => options.config = value("--config")?,
                "--env" => options.env = Some(value("--env")?),
                "-X" | "--method" => options.method = value(arg)?,
                "--ip" => options.headers.push(("cf-connecting-ip".into(), value("--ip")?)),
                "--data" | "--body" => options.body = Some(value(arg)?.into_bytes()),
                "--data-file" => {
                    let file = value("--data-file")?;
                    options.body = Some(std::fs::read(&file).map_err(|e| format!("cannot read {file}: {e}"))?);
                }
                "--country" => options.country = Some(value("--country")?),
                "--asn" => {
                    let asn = value("--asn")?;
                    options.asn = Some(asn.trim().parse().map_err(|_| format!("--asn `{asn}` is not a number"))?);
                }
                "--outcome" => {
                    let text = value("--outcome")?;
                    let bad = || format!("--outcome `{text}`: use allowed, blocked or failed, or RULE=one of them");
                    match text.split_once('=') {
                        Some((rule, o)) => options.outcomes.push((rule.to_string(), Assumed::parse(o).ok_or_else(bad)?)),
                        None => options.default_outcome = Assumed::parse(&text).ok_or_else(bad)?,
                    }
                }
                "--json" => options.json = true,
                "--log-key-file" => options.log_key_file = Some(value("--log-key-file")?),
                "-H" | "--header" => {
                    let h = value(arg)?;
                    let (k, v) = h.split_once(':').ok_or(format!("header `{h}` is not `Name: value`"))?;
                    options.headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
                other if other.starts_with('-') && other.len() > 1 => return Err(format!("unknown option {other}")),
                url if options.url.is_none() => options.url = Some(url.to_string()),
                extra => return Err(format!("unexpected argument {extra}")),
            }
        }
        if options.url.is_none() {
            return Err("missing <url>".into());
        }
        Ok(options)
    }

    fn run_explain(options: &ExplainOptions) -> i32 {
        let config = match load_config(&options.config, options.env.as_deref()) {
            Ok(c) => c,
            Err(errors) => {
                for e in errors {
                    eprintln!("error: {e}");
                }
                return 1;
            }
        };
        let log_key = match read_log_key(options.log_key_file.as_deref()) {
            Ok(key) => key,
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        };
        let request = ExplainRequest {
            method: &options.method,
            url: options.url.as_deref().unwrap_or_default(),
            headers: &options.headers,
            body: options.body.as_deref(),
            country: options.country.as_deref(),
            asn: options.asn,
            log_key: log_key.as_deref(),
        };
        let assumed = Assumptions { default: options.default_outcome, per_rule: &options.outcomes };
        if options.json {
            println!("{}", explain_json(&config, &request, &assumed));
        } else {
            print!("{}", explain(&config, &request, &assumed));
        }
        0
    }
}
