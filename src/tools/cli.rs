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
//!     --now MS               the Worker's clock, Unix ms (default: now), for
//!                            reproducible runs (a trusted-device cookie expires)
//! tollgate hash <key>                        the key_hash the Worker logs for a key
//! tollgate hash --rule NAME PART=VALUE...    ... for the key a rule derives from raw
//!                                            values (`ip=203.0.113.7`, `body:email=a@b.io`)
//!     --config FILE, --env NAME, --log-key-file FILE   as for explain
//! tollgate diff OLD NEW [--env NAME]         what deploying NEW over OLD does to live
//!     [--fail-on-reset]                      counts, rule by rule (tools::diff)
//! tollgate migrate FILE                      FILE in the config's current spelling
//!                                            (tools::migrate), on stdout
//! tollgate --version                         the version, the object protocol's
//!                                            and the config spelling's
//! tollgate schema                            the JSON Schema (draft 2020-12) of the TOLLGATE
//!                                            var, from the config's own field tables
//! ```
//! `check` exits 1 when any config has errors (warnings alone exit 0).
//!
//! Key hashes are HMAC-SHA256 under the Worker's `TOLLGATE_LOG_KEY` secret
//! when it has one: the CLI reads the same key from `--log-key-file` or the
//! env var `TOLLGATE_LOG_KEY`; with neither, it prints the unkeyed hash, as
//! a Worker without the secret logs.
//!
//! The logic lives here, not in the binary, so that the native binary
//! (`src/bin/tollgate.rs`) and the npm package's `tollgate` bin for Node
//! (this crate built for wasm32 with the `cli` feature, driven by
//! `packages/tollgate/bin/tollgate.mjs`) give the same answers: [`run`]
//! takes the arguments and a [`Host`] (files, environment variables) and
//! returns the exit code and what to print, as data.

use serde_json::Value;
use crate::config::Config;
use crate::tools::coverage::route_warnings;
use crate::tools::explain::{explain, explain_json, key_hash, log_key, rule_key, Assumed, Assumptions, ExplainRequest};
use crate::config::policy::Action;
use crate::tools::wrangler;

/// What the CLI reads from the machine it runs on.
pub trait Host {
    /// The bytes of the file at `path`, or the OS's reason why not
    /// (`No such file or directory (os error 2)`, as `std::io::Error` says it).
    fn read_file(&self, path: &str) -> Result<Vec<u8>, String>;
    /// The environment variable `name`, if set (and valid Unicode).
    fn env_var(&self, name: &str) -> Option<String>;
    /// Now, Unix ms: what `explain` judges a trusted-device cookie's
    /// expiry by, as the Worker does (`--now` overrides it).
    fn now_ms(&self) -> i64;
}

/// What one run of the CLI printed, and its exit code.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// The file `stdout` is to be written to instead of printed
    /// (`tollgate migrate FILE --write`): the caller, which does the I/O,
    /// writes it.
    pub write: Option<String>,
}

/// Runs the CLI on `args` (without the program name).
pub fn run(args: &[String], host: &dyn Host) -> Output {
    let mut cli = Cli { host, out: Output::default() };
    cli.out.code = cli.run(args);
    cli.out
}

/// One run: the host to read from and what it printed so far.
struct Cli<'h> {
    host: &'h dyn Host,
    out: Output,
}

macro_rules! outln {
    ($cli:expr, $($arg:tt)*) => {{
        $cli.out.stdout.push_str(&format!($($arg)*));
        $cli.out.stdout.push('\n');
    }};
}

macro_rules! outs {
    ($cli:expr, $($arg:tt)*) => {
        $cli.out.stdout.push_str(&format!($($arg)*))
    };
}

macro_rules! errln {
    ($cli:expr, $($arg:tt)*) => {{
        $cli.out.stderr.push_str(&format!($($arg)*));
        $cli.out.stderr.push('\n');
    }};
}

impl Cli<'_> {
    /// A text file, as `std::fs::read_to_string` reads it.
    fn read_text(&self, path: &str) -> Result<String, String> {
        let bytes = self.host.read_file(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        String::from_utf8(bytes).map_err(|_| format!("cannot read {path}: stream did not contain valid UTF-8"))
    }

    fn run(&mut self, args: &[String]) -> i32 {
        let rest = args.get(1..).unwrap_or_default();
        match args.first().map(String::as_str) {
            Some("check") if wants_help(rest) => self.usage(CHECK_USAGE, 0),
            Some("explain") if wants_help(rest) => self.usage(EXPLAIN_USAGE, 0),
            Some("check") => match parse_check(rest) {
                Ok((file, env, app)) => self.check(&file, env.as_deref(), app.as_deref()),
                Err(e) => {
                    errln!(self, "tollgate check: {e}");
                    self.usage(CHECK_USAGE, 2)
                }
            },
            Some("explain") => match self.parse_explain(rest) {
                Ok(options) => self.run_explain(&options),
                Err(e) => {
                    errln!(self, "tollgate explain: {e}");
                    self.usage(EXPLAIN_USAGE, 2)
                }
            },
            Some("hash") if wants_help(rest) => self.usage(HASH_USAGE, 0),
            Some("hash") => match parse_hash(rest) {
                Ok(options) => self.run_hash(&options),
                Err(e) => {
                    errln!(self, "tollgate hash: {e}");
                    self.usage(HASH_USAGE, 2)
                }
            },
            Some("diff") if wants_help(rest) => self.usage(DIFF_USAGE, 0),
            Some("diff") => match parse_diff(rest) {
                Ok(options) => self.run_diff(&options),
                Err(e) => {
                    errln!(self, "tollgate diff: {e}");
                    self.usage(DIFF_USAGE, 2)
                }
            },
            Some("migrate") if wants_help(rest) => self.usage(MIGRATE_USAGE, 0),
            Some("migrate") => match rest {
                [file] if !file.starts_with('-') => self.migrate(file, false),
                [file, flag] | [flag, file] if flag == "--write" && !file.starts_with('-') => self.migrate(file, true),
                _ => {
                    errln!(self, "tollgate migrate: give one FILE");
                    self.usage(MIGRATE_USAGE, 2)
                }
            },
            Some("-V" | "--version" | "version") => {
                outln!(self, "{}", version());
                0
            }
            Some("schema") if wants_help(rest) => self.usage(SCHEMA_USAGE, 0),
            Some("schema") => self.schema(rest),
            Some("-h" | "--help" | "help") => self.usage(USAGE, 0),
            _ => self.usage(USAGE, 2),
        }
    }

    /// `tollgate schema`: the JSON Schema of the `TOLLGATE` var
    /// ([`crate::config::schema`]); no arguments.
    fn schema(&mut self, args: &[String]) -> i32 {
        if let Some(extra) = args.first() {
            errln!(self, "tollgate schema: unexpected argument {extra}");
            return self.usage(SCHEMA_USAGE, 2);
        }
        let schema = crate::config::schema::schema();
        outln!(self, "{}", serde_json::to_string_pretty(&schema).unwrap_or_default());
        0
    }

    /// `tollgate migrate FILE`: the file in the current spelling on stdout
    /// ([`crate::tools::migrate`]), what changed on stderr, and each
    /// section of the result read as `check` reads it. 1 when a field was
    /// left as written or the result does not pass. `write` (`--write`):
    /// the result is for FILE itself ([`Output::write`]), only when it
    /// passes and something changed.
    fn migrate(&mut self, path: &str, write: bool) -> i32 {
        let migrated = self.read_text(path).and_then(|text| crate::tools::migrate::migrate(path, &text));
        let out = match migrated {
            Ok(out) => out,
            Err(e) => return self.failed(&[e]),
        };
        outs!(self, "{}", out.text);
        let spelling = crate::config::spelling::SPELLING;
        for change in &out.changes {
            errln!(self, "migrated: {path} {change}");
        }
        for refused in &out.refused {
            errln!(self, "error: {path} {refused}");
        }
        for hint in &out.hints {
            errln!(self, "note: {path} {hint}");
        }
        if let Some(lost) = &out.lost {
            errln!(self, "warning: lost {lost}");
        }
        let mut failed = !out.refused.is_empty();
        let sections = wrangler::parse(path, &out.text).map(|w| wrangler::sections(&w));
        for section in sections.unwrap_or_default() {
            let Some(value) = &section.tollgate else { continue };
            if let Err(errors) = Config::from_json(value) {
                failed = true;
                for e in errors {
                    errln!(self, "error: {path} {} (migrated): {e}", section.label);
                }
            }
        }
        let verdict = if failed { "left errors for check to name" } else { "check reads it" };
        let written = match (write, failed, out.changes.is_empty()) {
            (false, ..) => "",
            (true, true, _) => "; FILE left as it was (--write writes only a result check reads)",
            (true, false, true) => "; nothing to write",
            (true, false, false) => "; written in place",
        };
        errln!(self, "{path}: {} field(s) respelled into the config's {spelling} spelling; {verdict}{written}", out.changes.len());
        if write {
            self.out.write = (!failed && !out.changes.is_empty()).then(|| path.to_string());
            if self.out.write.is_none() {
                self.out.stdout.clear();
            }
        }
        i32::from(failed)
    }

    /// Writes `text` to stdout for a requested help, else to stderr.
    fn usage(&mut self, text: &str, code: i32) -> i32 {
        if code == 0 {
            outln!(self, "{text}");
        } else {
            errln!(self, "{text}");
        }
        code
    }

    fn read_wrangler(&self, path: &str) -> Result<Value, String> {
        let text = self.read_text(path)?;
        wrangler::parse(path, &text)
    }

    /// `tollgate check`: every environment's config of `path` (or `env`'s),
    /// each on its own; 1 when any has errors.
    fn check(&mut self, path: &str, env: Option<&str>, app: Option<&str>) -> i32 {
        // The app behind a service upstream: what leaves it reachable around
        // tollgate (read once; an unreadable file is an error).
        let app = match app.map(|file| self.read_wrangler(file).map(|w| (file, wrangler::exposures(&w)))).transpose() {
            Ok(app) => app,
            Err(e) => {
                errln!(self, "error: --app: {e}");
                return 1;
            }
        };
        let parsed = self.read_wrangler(path).and_then(|w| match env {
            None => Ok(wrangler::sections(&w)),
            Some(name) => wrangler::select(&w, Some(name).filter(|n| !n.is_empty())).map(|s| vec![s]),
        });
        let sections = match parsed {
            Ok(sections) => sections,
            Err(e) => {
                errln!(self, "error: {path}: {e}");
                return 1;
            }
        };
        let app = app.as_ref().map(|(file, open)| (*file, open.as_slice()));
        let mut failed = false;
        let sections_len = sections.len();
        for section in sections {
            failed |= !self.check_section(path, &section, app);
        }
        // Once, not per environment: check cannot see secrets, so this is a
        // reminder, not a finding.
        // One line, what to do first: it was four in a terminal.
        let each_env = if sections_len > 1 { ", --env NAME for each environment" } else { "" };
        outln!(self, "note: before deploying, set the secret {LOG_KEY_VAR} (npx wrangler secret put {LOG_KEY_VAR}{each_env}): without it, key_hash in logs is reversible for IPv4 keys");
        i32::from(failed)
    }

    /// Checks one environment's config: its errors, or `ok` with its notes
    /// and warnings (`app`: the app's config behind a service upstream, and
    /// what reaches it). Whether it is valid.
    fn check_section(&mut self, path: &str, section: &wrangler::Section, app: Option<(&str, &[String])>) -> bool {
        let label = &section.label;
        let Some(value) = &section.tollgate else {
            errln!(self, "error: {path} {label}: no [vars.TOLLGATE] (vars are not inherited by environments); the Worker would answer 503 to everything");
            return false;
        };
        let config = match Config::from_json(value) {
            Ok(config) => config,
            Err(errors) => {
                for e in errors {
                    errln!(self, "error: {path} {label}: {e}");
                }
                return false;
            }
        };
        if let Some(e) = wrangler::missing_objects(section).or_else(|| crate::config::upstream::missing_binding(&config.upstream, &section.services)) {
            errln!(self, "error: {path} {label}: {e}");
            return false;
        }
        outln!(self, "{path} {label}: ok, {} rule(s)", config.rules.len());
        for note in config.rules.iter().filter_map(crate::tools::explain::lease_note) {
            outln!(self, "note: {path} {label}: {note}");
        }
        for note in config.rules.iter().filter_map(crate::config::unit_note) {
            outln!(self, "note: {path} {label}: {note}");
        }
        for note in config.rules.iter().filter_map(crate::config::relief_note) {
            outln!(self, "note: {path} {label}: {note}");
        }
        if let Some(access) = &config.admin_access {
            outln!(self, "note: {path} {label}: {}", access.note(&config.admin_prefix));
        }
        // The memory arithmetic once a config sets what it depends on (the
        // shipped defaults say nothing, so three lines are no noise).
        let sizes = ["memory_budget", "upload_budget", "body_limit", "body_timeout"];
        let sized = sizes.iter().any(|f| value.get(f).is_some()) || value.get("rules").and_then(Value::as_array).is_some_and(|rules| rules.iter().any(|r| r.pointer("/counting/upload_buffer").is_some()));
        if let Some(note) = crate::config::memory_note(&config).filter(|_| sized) {
            outln!(self, "note: {path} {label}: {note}");
        }
        for warning in section_warnings(section, &config) {
            outln!(self, "warning: {path} {label}: {warning}");
        }
        if let Some(warning) = crate::config::upstream::bypass_warning(&config.upstream, app) {
            outln!(self, "warning: {path} {label}: {warning}");
        }
        true
    }

    /// The log key: the file's content (`--log-key-file`), else the env var
    /// [`LOG_KEY_VAR`]; `None` with neither (or a blank one): unkeyed, as a
    /// Worker without the secret. Trimmed as the Worker trims the secret.
    fn read_log_key(&self, file: Option<&str>) -> Result<Option<Vec<u8>>, String> {
        match file {
            Some(path) => {
                let text = self.read_text(path)?;
                log_key(&text).map(Some).ok_or_else(|| format!("{path} holds no log key (it is blank)"))
            }
            None => Ok(self.host.env_var(LOG_KEY_VAR).and_then(|v| log_key(&v))),
        }
    }

    /// The validated config of `path` (its top level, or `[env.NAME]`), or
    /// the messages saying why there is none.
    fn load_config(&self, path: &str, env: Option<&str>) -> Result<Config, Vec<String>> {
        let wrangler = self.read_wrangler(path).map_err(|e| vec![e])?;
        let section = wrangler::select(&wrangler, env).map_err(|e| vec![format!("{path}: {e}")])?;
        let value = section
            .tollgate
            .ok_or_else(|| vec![format!("{path} {}: no [vars.TOLLGATE] config", section.label)])?;
        Config::from_json(&value).map_err(|errors| errors.iter().map(ToString::to_string).collect())
    }

    /// The environments of `path` other than `env` (the top level's when
    /// `env` is one) whose valid config writes fields in the older
    /// spelling, with how many: what `tollgate migrate` respells there and
    /// a diff of one section does not count.
    fn respelled_elsewhere(&self, path: &str, env: Option<&str>) -> Vec<(Option<String>, usize)> {
        let Ok(wrangler) = self.read_wrangler(path) else { return Vec::new() };
        let envs = wrangler.get("env").and_then(serde_json::Value::as_object).map(|envs| envs.keys().cloned().map(Some).collect::<Vec<_>>()).unwrap_or_default();
        std::iter::once(None)
            .chain(envs)
            .filter(|name| name.as_deref() != env)
            .filter_map(|name| Some((name.clone(), self.load_config(path, name.as_deref()).ok()?.respelled.len())))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Prints each error on its own `error:` line; the exit code of a run
    /// that stopped on them (1).
    fn failed(&mut self, errors: &[String]) -> i32 {
        for e in errors {
            errln!(self, "error: {e}");
        }
        1
    }

    /// `tollgate diff`: what deploying NEW over OLD does to live counts;
    /// 1 when either config is invalid, 3 with `--fail-on-reset` when some
    /// keys' counts start from zero, else 0.
    fn run_diff(&mut self, options: &DiffOptions) -> i32 {
        let load = |path: &str| {
            let named = |e: String| if e.starts_with(path) { e } else { format!("{path}: {e}") };
            self.load_config(path, options.env.as_deref()).map_err(|errors| errors.into_iter().map(named).collect::<Vec<_>>())
        };
        let (old, new) = (load(&options.old), load(&options.new));
        let (old, new) = match (old, new) {
            (Ok(old), Ok(new)) => (old, new),
            (old, new) => {
                let errors: Vec<String> = [old.err(), new.err()].into_iter().flatten().flatten().collect();
                return self.failed(&errors);
            }
        };
        let diffs = crate::tools::diff::diff(&old, &new);
        if let Some(note) = crate::tools::diff::spelling_note(&old, &new) {
            outs!(self, "{note}");
        }
        for (side, path) in [("OLD", &options.old), ("NEW", &options.new)] {
            for (env, n) in self.respelled_elsewhere(path, options.env.as_deref()) {
                let (section, flag) = match &env {
                    Some(name) => (format!("[env.{name}]"), format!(" --env {name}")),
                    None => ("top level".to_string(), String::new()),
                };
                outs!(
                    self,
                    "spelling: {side}'s {section} writes {n} more field(s) in the {} spelling, not compared here (`tollgate diff OLD NEW{flag}` compares them; `tollgate migrate` respells every environment)\n",
                    crate::config::spelling::OLD_SPELLING
                );
            }
        }
        outs!(self, "{}", crate::tools::diff::report(&diffs));
        let resets = diffs.iter().flat_map(|d| &d.changes).any(crate::tools::diff::ConfigChange::resets);
        if options.fail_on_reset && resets {
            errln!(self, "tollgate diff: some keys' counts start from zero (RESET above)");
            return 3;
        }
        0
    }

    /// Prints `HASH  KEY`, as `sha256sum` prints a file's.
    fn run_hash(&mut self, options: &HashOptions) -> i32 {
        let log_key = match self.read_log_key(options.log_key_file.as_deref()) {
            Ok(key) => key,
            Err(e) => return self.failed(&[e]),
        };
        let key = match &options.rule {
            None => options.args.concat(),
            Some(rule) => {
                let config = match self.load_config(&options.config, options.env.as_deref()) {
                    Ok(config) => config,
                    Err(errors) => return self.failed(&errors),
                };
                let mut values = Vec::new();
                for arg in &options.args {
                    let Some((part, value)) = arg.split_once('=') else {
                        errln!(self, "error: `{arg}` is not PART=VALUE (`ip=203.0.113.7`, `body:email=a@b.io`)");
                        return 2;
                    };
                    values.push((part.to_string(), value.to_string()));
                }
                match rule_key(&config, rule, &values) {
                    Ok(key) => key,
                    Err(e) => return self.failed(&[e]),
                }
            }
        };
        if log_key.is_none() {
            errln!(self, 
                "note: no log key ({LOG_KEY_VAR} or --log-key-file): this is the unkeyed hash a Worker without the secret logs"
            );
        }
        outln!(self, "{}  {key}", key_hash(&key, log_key.as_deref()));
        0
    }

    /// `<url> [options]`: the request's options ([`Cli::request_option`])
    /// and the run's ([`run_option`]).
    fn parse_explain(&self, args: &[String]) -> Result<ExplainOptions, String> {
        let mut options = ExplainOptions::new();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let mut value = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value"));
            if self.request_option(&mut options, arg, &mut value)? || run_option(&mut options, arg, &mut value)? {
                continue;
            }
            match arg.as_str() {
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

    /// An option of `explain` that describes the request (method, headers,
    /// body, `cf` fields, secrets), read into `options`; `false` when `arg`
    /// is none of them. `value` takes the option's value.
    fn request_option(&self, options: &mut ExplainOptions, arg: &str, value: &mut dyn FnMut(&str) -> Result<String, String>) -> Result<bool, String> {
        match arg {
            "-X" | "--method" => options.method = value(arg)?,
            "--ip" => options.headers.push(("cf-connecting-ip".into(), value("--ip")?)),
            "--data" | "--body" => options.body = Some(value(arg)?.into_bytes()),
            "--data-file" => {
                let file = value("--data-file")?;
                options.body = Some(self.host.read_file(&file).map_err(|e| format!("cannot read {file}: {e}"))?);
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
            "-H" | "--header" => {
                let h = value(arg)?;
                let (k, v) = h.split_once(':').ok_or(format!("header `{h}` is not `Name: value`"))?;
                options.headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn run_explain(&mut self, options: &ExplainOptions) -> i32 {
        let config = match self.load_config(&options.config, options.env.as_deref()) {
            Ok(c) => c,
            Err(errors) => return self.failed(&errors),
        };
        let log_key = match self.read_log_key(options.log_key_file.as_deref()) {
            Ok(key) => key,
            Err(e) => return self.failed(&[e]),
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
            now_ms: options.now_ms.unwrap_or_else(|| self.host.now_ms()),
        };
        let assumed = Assumptions { default: options.default_outcome, per_rule: &options.outcomes };
        if options.json {
            outln!(self, "{}", explain_json(&config, &request, &assumed));
        } else {
            outs!(self, "{}", explain(&config, &request, &assumed));
        }
        0
    }
}

const USAGE: &str = "usage:
  tollgate check [FILE] [--env NAME] [--app FILE]
                                      validate the config offline (FILE: wrangler.toml,
                                      wrangler.json or wrangler.jsonc; default ./wrangler.toml)
  tollgate explain <url> [options]        what the Worker does with one request
  tollgate hash <key> | --rule NAME PART=VALUE...
                                      a key's hash, as the Worker logs it
  tollgate schema                         the JSON Schema of the TOLLGATE var (for editors)
  tollgate diff OLD NEW [--env NAME]      what deploying NEW over OLD does to live counts
  tollgate migrate FILE [--write]         FILE in the config's current spelling, on stdout
                                      (--write: in place)
  tollgate --version                      the version, and the object protocol's
  tollgate <command> --help               the options of a command";

const DIFF_USAGE: &str = "usage: tollgate diff OLD NEW [--env NAME] [--fail-on-reset]
  What deploying the config NEW over OLD does to the counts already kept, rule
  by rule (each file: wrangler.toml, wrangler.json or wrangler.jsonc; --env
  NAME reads [env.NAME] of both): which counts start from zero (a renamed rule,
  a changed key or ipv6_prefix: marked RESET), which limits tighten (keys over
  them are blocked at once) or loosen, what an algorithm change does to rows of
  the other algorithm, which static overrides appear or vanish, and whether
  two-phase counting or leases switch on or off.
  Exits 0; 1 when a config is invalid; 3 with --fail-on-reset when some counts
  start from zero (a gate for CI).";

/// `tollgate --version`: the crate's version, the call format's and the
/// config spelling's.
pub(crate) fn version() -> String {
    let spelling = crate::config::spelling::SPELLING;
    format!("tollgate {} (object protocol v{}, config spelling {spelling})", env!("CARGO_PKG_VERSION"), crate::count::protocol::VERSION)
}

const MIGRATE_USAGE: &str = "usage: tollgate migrate FILE > NEW, or tollgate migrate FILE --write
  --write rewrites FILE in place, as a formatter does, and only when the
  result passes check (else FILE is left as it was).
  Prints FILE (wrangler.toml, wrangler.json or wrangler.jsonc) with every
  TOLLGATE config (the top level's and each [env.NAME]'s) in the config's
  current spelling: count_statuses, reservation_ttl, upload_buffer and
  upload_timeout move under counting = { mode = \"response\", ... }, a cost
  table becomes metering, a concurrency rule gets counting = { mode =
  \"response\" }, clear_on_success = true becomes on_success = \"clear\".
  A TOML file keeps its comments and layout; a value moved into an inline table
  loses the comment at the end of its line. What changed goes to stderr.
  Exits 1 when a field names both spellings (left as written) or the result
  does not pass check.";

const SCHEMA_USAGE: &str = "usage: tollgate schema
  Prints the JSON Schema (draft 2020-12) of the TOLLGATE var, written from the
  tables the config is read by: every field, its type, its names and what it
  does. Save it (tollgate schema > tollgate.schema.json) and point an editor at
  it for completion and typos flagged as you type (docs/configuration.md says
  how). It is looser than check, which validates every rule in full.";

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
                       (else the env var TOLLGATE_LOG_KEY)
--now MS               the Worker's clock, Unix ms (default: now), for reproducible
                       runs (a trusted-device cookie expires)";

/// `tollgate diff`'s arguments.
#[derive(Debug, Default)]
struct DiffOptions {
    old: String,
    new: String,
    env: Option<String>,
    fail_on_reset: bool,
}

/// `OLD NEW [--env NAME] [--fail-on-reset]`.
fn parse_diff(args: &[String]) -> Result<DiffOptions, String> {
    let mut options = DiffOptions::default();
    let mut files = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--env" => options.env = Some(it.next().ok_or("--env needs a value")?.clone()),
            "--fail-on-reset" => options.fail_on_reset = true,
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            file => files.push(file.to_string()),
        }
    }
    let [old, new] = <[String; 2]>::try_from(files).map_err(|f| format!("needs two files, OLD and NEW (got {})", f.len()))?;
    (options.old, options.new) = (old, new);
    Ok(options)
}

fn wants_help(args: &[String]) -> bool {
    args.iter().any(|a| a == "-h" || a == "--help")
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

/// The config's own warnings, then those about where it is deployed.
fn section_warnings(section: &wrangler::Section, config: &Config) -> Vec<String> {
    let mut out: Vec<String> = config.warnings().iter().map(ToString::to_string).collect();
    // The admin Worker (its objects the zone Worker's) is served on its workers.dev name.
    if section.routes.is_empty() && section.elsewhere.is_empty() {
        out.push("no routes: add routes = [{ pattern = \"example.com/*\", zone_name = \"example.com\" }] to deploy (or none, for RPC only)".into());
    }
    if !section.logs_kept && config.rules.iter().any(|r| r.action == Action::Log) {
        out.push("shadow rules (action = \"log\") report only through logs, and [observability] is off: Workers Logs keeps none of them (add [observability] enabled = true)".into());
    }
    out.extend(wrangler::object_warnings(section));
    out.extend(route_warnings(&section.routes, config));
    out
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
    /// `--now`; `None`: the host's clock.
    now_ms: Option<i64>,
}

impl ExplainOptions {
    /// The defaults: `GET`, `./wrangler.toml`, counters allowing.
    fn new() -> ExplainOptions {
        ExplainOptions {
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
            now_ms: None,
        }
    }
}

/// An option of `explain` that describes the run (config, environment,
/// assumed outcomes, output, log key, clock), read into `options`; `false`
/// when `arg` is none of them. `value` takes the option's value.
fn run_option(options: &mut ExplainOptions, arg: &str, value: &mut dyn FnMut(&str) -> Result<String, String>) -> Result<bool, String> {
    match arg {
        "--config" => options.config = value("--config")?,
        "--env" => options.env = Some(value("--env")?),
        "--outcome" => {
            let text = value("--outcome")?;
            let bad = || format!("--outcome `{text}`: use allowed, blocked or failed, or RULE=one of them");
            match text.split_once('=') {
                Some((rule, o)) => options.outcomes.push((rule.to_string(), Assumed::parse(o).ok_or_else(bad)?)),
                None => options.default_outcome = Assumed::parse(&text).ok_or_else(bad)?,
            }
        }
        "--json" => options.json = true,
        "--now" => {
            let now = value("--now")?;
            options.now_ms = Some(now.trim().parse().map_err(|_| format!("--now `{now}` is not Unix milliseconds"))?);
        }
        "--log-key-file" => options.log_key_file = Some(value("--log-key-file")?),
        _ => return Ok(false),
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::{run, Host};

    /// A machine of a few in-memory files and environment variables.
    struct Fake {
        files: &'static [(&'static str, &'static str)],
        vars: &'static [(&'static str, &'static str)],
    }

    impl Host for Fake {
        fn read_file(&self, path: &str) -> Result<Vec<u8>, String> {
            self.files
                .iter()
                .find(|(name, _)| *name == path)
                .map(|(_, text)| text.as_bytes().to_vec())
                .ok_or_else(|| "No such file or directory (os error 2)".to_string())
        }

        fn now_ms(&self) -> i64 {
            1_800_000_000_000
        }

        fn env_var(&self, name: &str) -> Option<String> {
            self.vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
        }
    }

    const CONFIG: &str = r#"
[vars.TOLLGATE]
[[vars.TOLLGATE.rules]]
name = "heavy"
path = "/api/example"
key = ["ip"]
limits = [{ requests = 10, window = "60s" }]
"#;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn everything_read_comes_from_the_host_and_everything_printed_is_returned() {
        let host = Fake { files: &[("w.toml", CONFIG)], vars: &[] };
        let out = run(&args(&["check", "w.toml"]), &host);
        assert_eq!(out.code, 0, "{out:?}");
        assert!(out.stdout.starts_with("w.toml top level: ok, 1 rule(s)\n"), "{out:?}");
        assert_eq!(out.stderr, "");

        let missing = run(&args(&["check", "other.toml"]), &host);
        assert_eq!(missing.code, 1);
        assert_eq!(missing.stderr, "error: other.toml: cannot read other.toml: No such file or directory (os error 2)\n");
    }

    #[test]
    fn the_log_key_is_the_hosts_environment_variable() {
        let unkeyed = run(&args(&["hash", "ip=203.0.113.7"]), &Fake { files: &[], vars: &[] });
        let keyed = run(&args(&["hash", "ip=203.0.113.7"]), &Fake { files: &[], vars: &[("TOLLGATE_LOG_KEY", "k")] });
        assert_eq!((unkeyed.code, keyed.code), (0, 0));
        assert!(unkeyed.stderr.contains("no log key"), "{unkeyed:?}");
        assert_eq!(keyed.stderr, "");
        assert_ne!(unkeyed.stdout, keyed.stdout);
    }

    #[test]
    fn a_file_that_is_not_utf8_is_refused_as_std_refuses_it() {
        struct Bytes;
        impl Host for Bytes {
            fn read_file(&self, _: &str) -> Result<Vec<u8>, String> {
                Ok(vec![0xff, 0xfe])
            }
            fn env_var(&self, _: &str) -> Option<String> {
                None
            }
            fn now_ms(&self) -> i64 {
                0
            }
        }
        let out = run(&args(&["check", "w.toml"]), &Bytes);
        assert_eq!(out.code, 1);
        assert_eq!(out.stderr, "error: w.toml: cannot read w.toml: stream did not contain valid UTF-8\n");
    }
}

/// The Node bin's entry (`packages/tollgate/bin/tollgate.mjs`): the host is
/// two JS functions, `readFile(path)` returning a `Uint8Array` or an error
/// string, and `envVar(name)` returning a string or `undefined`. Returns
/// `[code, stdout, stderr, write]`: `write`, the file to write stdout to
/// instead of printing it (`migrate --write`), or `undefined`.
#[cfg(all(target_arch = "wasm32", feature = "cli"))]
mod node {
    use super::{run, Host};
    use wasm_bindgen::prelude::*;

    struct JsHost<'a> {
        read_file: &'a js_sys::Function,
        env_var: &'a js_sys::Function,
    }

    impl Host for JsHost<'_> {
        fn read_file(&self, path: &str) -> Result<Vec<u8>, String> {
            match self.read_file.call1(&JsValue::NULL, &JsValue::from_str(path)) {
                Ok(value) => match value.as_string() {
                    Some(error) => Err(error),
                    None => Ok(js_sys::Uint8Array::new(&value).to_vec()),
                },
                Err(e) => Err(e.as_string().unwrap_or_else(|| "unreadable".into())),
            }
        }

        fn env_var(&self, name: &str) -> Option<String> {
            self.env_var.call1(&JsValue::NULL, &JsValue::from_str(name)).ok().and_then(|v| v.as_string())
        }

        fn now_ms(&self) -> i64 {
            js_sys::Date::now() as i64
        }
    }

    #[wasm_bindgen(js_name = runCli)]
    pub fn run_cli(args: Vec<String>, read_file: &js_sys::Function, env_var: &js_sys::Function) -> js_sys::Array {
        let output = run(&args, &JsHost { read_file, env_var });
        js_sys::Array::of4(
            &JsValue::from(output.code),
            &JsValue::from_str(&output.stdout),
            &JsValue::from_str(&output.stderr),
            &output.write.as_deref().map_or(JsValue::UNDEFINED, JsValue::from_str),
        )
    }
}
