//! The operator's command line.
//!
//! ```text
//! tollgate check [FILE] [--env NAME]          validate the config offline (every environment,
//!                                             or NAME); FILE: wrangler.toml / .json / .jsonc
//!     --app FILE             the app's wrangler config behind `upstream = { service }`:
//!                            warn while workers_dev, preview_urls or routes reach it
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
//!     --verified-bot CAT     request.cf.verifiedBotCategory ("" for a verified bot of no category)
//!     --secret NAME=VALUE    a Workers secret the Worker would read (an exempt header's,
//!                            a trusted device's key); repeatable
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
    use tollgate::policy::Action;
    use tollgate::wrangler;

    const USAGE: &str = "usage:
  tollgate check [FILE] [--env NAME] [--app FILE]
                                          validate the config offline (FILE: wrangler.toml,
                                          wrangler.json or wrangler.jsonc; default ./wrangler.toml)
  tollgate explain <url> [options]        what the Worker does with one request
  tollgate hash <key> | --rule NAME PART=VALUE...
                                          a key's hash, as the Worker logs it
  tollgate <command> --help               the options of a command";

    const HASH_USAGE: &str = "usage:
  tollgate hash <key> [--log-key-file FILE]
  tollgate hash --rule NAME PART=VALUE... [--config FILE] [--env NAME] [--log-key-file FILE]
  The key_hash the Worker logs for a key (`ip=203.0.113.7`), or for a rule's key
  derived from raw values as the rule derives it. The log key: --log-key-file,
  else the env var TOLLGATE_LOG_KEY; without either, the unkeyed hash.";

    /// The Worker secret (and the CLI's env var) that keys log hashes.
    const LOG_KEY_VAR: &str = "TOLLGATE_LOG_KEY";

    const CHECK_USAGE: &str = "usage: tollgate check [FILE] [--env NAME] [--app FILE]
  Validates the TOLLGATE config of every environment in FILE (wrangler.toml,
  wrangler.json or wrangler.jsonc; default ./wrangler.toml), or only of the
  environment NAME (--env \"\" for the top level alone).
  --app FILE: the wrangler config of the app behind `upstream = { service }`,
  checked for what leaves it reachable around tollgate (workers_dev,
  preview_urls, routes of its own); without it check only reminds you.
  Errors name the rule and the field, and exit 1; warnings alone exit 0.";

    const EXPLAIN_USAGE: &str = "usage: tollgate explain <url> [options]
  Runs the Worker's own pipeline on one request, with assumed counter outcomes.
    --config FILE          wrangler.toml / .json / .jsonc to read (default ./wrangler.toml)
    --env NAME             use [env.NAME.vars.TOLLGATE]
    -X, --method M         request method (default GET)
    -H, --header 'K: V'    a request header (repeatable; repeats join with \", \")
    --data TEXT            request body (alias --body); set content-type with -H
    --data-file FILE       request body from a file
    --ip ADDR              client IP, as CF-Connecting-IP
    --country CC           request.cf.country
    --asn N                request.cf.asn
    --verified-bot CAT     request.cf.verifiedBotCategory (\"\" for a verified bot of no category)
    --secret NAME=VALUE    a Workers secret the Worker would read (an exempt header's,
                           a trusted device's key); repeatable
    --outcome O            what the counters say: allowed (default), blocked or failed;
                           or RULE=O for one rule (repeatable)
    --json                 the plan and verdict as JSON
    --log-key-file FILE    the TOLLGATE_LOG_KEY secret, so key hashes match the logs
                           (else the env var TOLLGATE_LOG_KEY)";

    fn wants_help(args: &[String]) -> bool {
        args.iter().any(|a| a == "-h" || a == "--help")
    }

    pub fn run(args: Vec<String>) -> i32 {
        let rest = args.get(1..).unwrap_or_default();
        match args.first().map(String::as_str) {
            Some("check") if wants_help(rest) => usage(CHECK_USAGE, 0),
            Some("explain") if wants_help(rest) => usage(EXPLAIN_USAGE, 0),
            Some("check") => match parse_check(rest) {
                Ok((file, env, app)) => check(&file, env.as_deref(), app.as_deref()),
                Err(e) => {
                    eprintln!("tollgate check: {e}");
                    usage(CHECK_USAGE, 2)
                }
            },
            Some("explain") => match parse_explain(rest) {
                Ok(options) => run_explain(&options),
                Err(e) => {
                    eprintln!("tollgate explain: {e}");
                    usage(EXPLAIN_USAGE, 2)
                }
            },
            Some("hash") if wants_help(rest) => usage(HASH_USAGE, 0),
            Some("hash") => match parse_hash(rest) {
                Ok(options) => run_hash(&options),
                Err(e) => {
                    eprintln!("tollgate hash: {e}");
                    usage(HASH_USAGE, 2)
                }
            },
            Some("-h" | "--help" | "help") => usage(USAGE, 0),
            _ => usage(USAGE, 2),
        }
    }

    /// Prints `text` (to stdout for a requested help, else stderr); a
    /// closed pipe (`| head`) is not an error worth a panic.
    fn usage(text: &str, code: i32) -> i32 {
        use std::io::Write;
        let _ = if code == 0 {
            writeln!(std::io::stdout(), "{text}")
        } else {
            writeln!(std::io::stderr(), "{text}")
        };
        code
    }

    fn read_wrangler(path: &str) -> Result<Value, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        wrangler::parse(path, &text)
    }

    /// `[FILE] [--env NAME] [--app FILE]`.
    fn parse_check(args: &[String]) -> Result<(String, Option<String>, Option<String>), String> {
        let mut file = None;
        let mut env = None;
        let mut app = None;
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--env" | "-e" => env = Some(it.next().cloned().ok_or("--env needs a value")?),
                "--app" => app = Some(it.next().cloned().ok_or("--app needs a value")?),
                other if other.starts_with('-') => return Err(format!("unknown option {other}")),
                path if file.is_none() => file = Some(path.to_string()),
                extra => return Err(format!("unexpected argument {extra}")),
            }
        }
        Ok((file.unwrap_or_else(|| "wrangler.toml".into()), env, app))
    }

    fn check(path: &str, env: Option<&str>, app: Option<&str>) -> i32 {
        // The app behind a service upstream: what leaves it reachable around
        // tollgate (read once; an unreadable file is an error).
        let app = match app.map(|file| read_wrangler(file).map(|w| (file, wrangler::exposures(&w)))).transpose() {
            Ok(app) => app,
            Err(e) => {
                eprintln!("error: --app: {e}");
                return 1;
            }
        };
        let parsed = read_wrangler(path).and_then(|w| match env {
            None => Ok(wrangler::sections(&w)),
            Some(name) => wrangler::select(&w, Some(name).filter(|n| !n.is_empty())).map(|s| vec![s]),
        });
        let sections = match parsed {
            Ok(sections) => sections,
            Err(e) => {
                eprintln!("error: {path}: {e}");
                return 1;
            }
        };
        let mut failed = false;
        for section in sections {
            let label = &section.label;
            let Some(value) = &section.tollgate else {
                eprintln!("error: {path} {label}: no [vars.TOLLGATE] (vars are not inherited by environments); the Worker would answer 503 to everything");
                failed = true;
                continue;
            };
            match Config::from_json(value) {
                Ok(config) => {
                    if let Some(e) = tollgate::upstream::missing_binding(&config.upstream, &section.services) {
                        eprintln!("error: {path} {label}: {e}");
                        failed = true;
                        continue;
                    }
                    println!("{path} {label}: ok, {} rule(s)", config.rules.len());
                    for note in config.rules.iter().filter_map(tollgate::explain::lease_note) {
                        println!("note: {path} {label}: {note}");
                    }
                    for note in config.rules.iter().filter_map(tollgate::config::relief_note) {
                        println!("note: {path} {label}: {note}");
                    }
                    for warning in section_warnings(&section, &config) {
                        println!("warning: {path} {label}: {warning}");
                    }
                    let app = app.as_ref().map(|(file, open)| (*file, open.as_slice()));
                    if let Some(warning) = tollgate::upstream::bypass_warning(&config.upstream, app) {
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

    /// The config's own warnings, then those about where it is deployed.
    fn section_warnings(section: &wrangler::Section, config: &Config) -> Vec<String> {
        let mut out: Vec<String> = config.warnings().iter().map(ToString::to_string).collect();
        if section.routes.is_empty() {
            out.push("no routes: the Worker attaches to nothing (as meant when apps call it only over RPC, through a service binding); otherwise add routes = [{ pattern = \"example.com/*\", zone_name = \"example.com\" }]".into());
        }
        if !section.logs_kept && config.rules.iter().any(|r| r.action == Action::Log) {
            out.push("shadow rules (action = \"log\") report only through logs, and [observability] is off: Workers Logs keeps none of them (add [observability] enabled = true)".into());
        }
        out.extend(route_warnings(&section.routes, config));
        out
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
        let section = wrangler::select(&wrangler, env).map_err(|e| vec![format!("{path}: {e}")])?;
        let value = section
            .tollgate
            .ok_or_else(|| vec![format!("{path} {}: no [vars.TOLLGATE] config", section.label)])?;
        Config::from_json(&value).map_err(|errors| errors.iter().map(ToString::to_string).collect())
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
        verified_bot: Option<String>,
        secrets: Vec<(String, String)>,
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
            verified_bot: None,
            secrets: Vec::new(),
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
                "--verified-bot" => options.verified_bot = Some(value("--verified-bot")?),
                "--secret" => {
                    let pair = value("--secret")?;
                    let (name, secret) = pair.split_once('=').ok_or(format!("--secret `{pair}` is not NAME=VALUE"))?;
                    options.secrets.push((name.trim().to_string(), secret.to_string()));
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
            verified_bot: options.verified_bot.as_deref(),
            secrets: &options.secrets,
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
