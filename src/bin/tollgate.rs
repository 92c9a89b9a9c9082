//! The operator's command line.
//!
//! ```text
//! tollgate check [FILE] [--env NAME]          validate the config offline (every environment,
//!                                             or NAME); FILE: wrangler.toml / .json / .jsonc
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
//! ```
//! `check` exits 1 when any config has errors (warnings alone exit 0).

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
    use tollgate::explain::{explain, explain_json, Assumed, Assumptions, ExplainRequest};
    use tollgate::policy::Action;
    use tollgate::wrangler;

    const USAGE: &str = "usage:
  tollgate check [FILE] [--env NAME]      validate the config offline (FILE: wrangler.toml,
                                          wrangler.json or wrangler.jsonc; default ./wrangler.toml)
  tollgate explain <url> [options]        what the Worker does with one request
  tollgate <command> --help               the options of a command";

    const CHECK_USAGE: &str = "usage: tollgate check [FILE] [--env NAME]
  Validates the TOLLGATE config of every environment in FILE (wrangler.toml,
  wrangler.json or wrangler.jsonc; default ./wrangler.toml), or only of the
  environment NAME (--env \"\" for the top level alone).
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
    --outcome O            what the counters say: allowed (default), blocked or failed;
                           or RULE=O for one rule (repeatable)
    --json                 the plan and verdict as JSON";

    fn wants_help(args: &[String]) -> bool {
        args.iter().any(|a| a == "-h" || a == "--help")
    }

    pub fn run(args: Vec<String>) -> i32 {
        let rest = args.get(1..).unwrap_or_default();
        match args.first().map(String::as_str) {
            Some("check") if wants_help(rest) => usage(CHECK_USAGE, 0),
            Some("explain") if wants_help(rest) => usage(EXPLAIN_USAGE, 0),
            Some("check") => match parse_check(rest) {
                Ok((file, env)) => check(&file, env.as_deref()),
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

    /// `[FILE] [--env NAME]`.
    fn parse_check(args: &[String]) -> Result<(String, Option<String>), String> {
        let mut file = None;
        let mut env = None;
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--env" | "-e" => env = Some(it.next().cloned().ok_or("--env needs a value")?),
                other if other.starts_with('-') => return Err(format!("unknown option {other}")),
                path if file.is_none() => file = Some(path.to_string()),
                extra => return Err(format!("unexpected argument {extra}")),
            }
        }
        Ok((file.unwrap_or_else(|| "wrangler.toml".into()), env))
    }

    fn check(path: &str, env: Option<&str>) -> i32 {
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
                    println!("{path} {label}: ok, {} rule(s)", config.rules.len());
                    for warning in section_warnings(&section, &config) {
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
        i32::from(failed)
    }

    /// The config's own warnings, then those about where it is deployed.
    fn section_warnings(section: &wrangler::Section, config: &Config) -> Vec<String> {
        let mut out: Vec<String> = config.warnings().iter().map(ToString::to_string).collect();
        if section.routes.is_empty() {
            out.push("no routes: the Worker attaches to nothing; add routes = [{ pattern = \"example.com/*\", zone_name = \"example.com\" }]".into());
        }
        if !section.logs_kept && config.rules.iter().any(|r| r.action == Action::Log) {
            out.push("shadow rules (action = \"log\") report only through logs, and [observability] is off: Workers Logs keeps none of them (add [observability] enabled = true)".into());
        }
        out.extend(route_warnings(&section.routes, config));
        out
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
        let wrangler = match read_wrangler(&options.config) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        };
        let section = match wrangler::select(&wrangler, options.env.as_deref()) {
            Ok(section) => section,
            Err(e) => {
                eprintln!("error: {}: {e}", options.config);
                return 1;
            }
        };
        let Some(value) = &section.tollgate else {
            eprintln!("error: {} {}: no [vars.TOLLGATE] config", options.config, section.label);
            return 1;
        };
        let config = match Config::from_json(value) {
            Ok(c) => c,
            Err(errors) => {
                for e in errors {
                    eprintln!("error: {e}");
                }
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
