//! The regular-expression engine under the rules' URLPatterns.
//!
//! `urlpattern` compiles a pattern with more than one group or wildcard, an
//! optional part or a custom regexp (`:id(\d+)`) into a regular expression,
//! through its [`RegExp`] trait. Its default engine is the `regex` crate,
//! whose Unicode tables, DFAs and literal prefilters were 46% of the zone's
//! Wasm (docs/contributing.md). [`Lite`] puts `regex-lite` in its place, in
//! every build, so the Worker, `tollgate check` and `explain` run one engine:
//! - the same syntax (`RegexSyntax::Rust`, so urlpattern writes the same
//!   expression) and leftmost-first captures;
//! - worst-case time linear in the pattern times the input (`O(m * n)`), as
//!   with `regex`: no pattern an operator writes can be driven into
//!   exponential backtracking by a request;
//! - the Perl classes `\d`, `\w`, `\s`, word boundaries and `(?i)` are ASCII
//!   (which is also what the URLPattern standard's ECMAScript expressions
//!   mean by `\d` and `\w`). Every input a rule matches is ASCII (the
//!   canonical path is re-encoded ASCII, hosts are punycode, see
//!   [`crate::request::canon`]), and on ASCII input these classes are the
//!   same sets in both engines;
//! - refused: Unicode classes (`\p{L}`) and class set operations
//!   (`[\d&&[0-1]]`, `[[a-z]--a]`), which `regex` took. `tollgate check`
//!   names the rule and its `path` (or `host`), as for any invalid pattern.
//!
//! `tests` below holds `Lite` equal to `regex` on the web-platform-tests
//! URLPattern data file and on this repo's rule patterns.

use urlpattern::regexp::RegExp;
use urlpattern::UrlPattern;

/// What `tollgate check` says of a pattern whose regular expression the
/// engine refuses (urlpattern keeps no reason).
pub(crate) const REFUSED: &str = "not a valid URLPattern: its regular expression is refused (tollgate's engine is regex-lite: Rust regex syntax, `\\d` `\\w` `\\s` ASCII, no Unicode classes such as `\\p{L}`, no class set operations such as `[a-z--c]`)";

/// A rule's compiled URLPattern, on [`Lite`].
pub(crate) type Pattern = UrlPattern<Lite>;

/// A `regex-lite` expression as urlpattern's engine (the trait is foreign,
/// hence the wrapper).
#[derive(Debug, Clone)]
pub(crate) struct Lite(regex_lite::Regex);

impl RegExp for Lite {
    fn syntax() -> urlpattern::RegexSyntax {
        urlpattern::RegexSyntax::Rust
    }

    /// As urlpattern's own `regex` engine does, `flags` (`u`, `ui`) are
    /// ignored: a case-insensitive rule is compiled and matched lowercased
    /// ([`crate::config::rules::Rule::compile`]).
    fn parse(pattern: &str, _flags: &str, _force_eval: bool) -> Result<Self, ()> {
        regex_lite::Regex::new(pattern).map(Lite).map_err(|_| ())
    }

    fn matches<'a>(&self, text: &'a str) -> Option<Vec<Option<&'a str>>> {
        let captures = self.0.captures(text)?;
        Some(captures.iter().skip(1).map(|c| c.map(|m| m.as_str())).collect())
    }

    fn pattern_string(&self) -> &str {
        self.0.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use urlpattern::{UrlPatternInit, UrlPatternMatchInput, UrlPatternOptions};

    /// One pattern built with both engines: whether each builds, and what
    /// each makes of `inputs`.
    fn both(init: &UrlPatternInit, options: &UrlPatternOptions, inputs: &[UrlPatternMatchInput]) -> Result<(), String> {
        let lite = <UrlPattern<Lite>>::parse(init.clone(), options.clone());
        let full = <UrlPattern<regex::Regex>>::parse(init.clone(), options.clone());
        match (&lite, &full) {
            (Ok(lite), Ok(full)) => {
                for input in inputs {
                    let a = lite.exec(input.clone()).map_err(|e| e.to_string())?;
                    let b = full.exec(input.clone()).map_err(|e| e.to_string())?;
                    if a != b {
                        return Err(format!("{init:?} on {input:?}: lite {a:?}, regex {b:?}"));
                    }
                }
                Ok(())
            }
            (Err(_), Err(_)) => Ok(()),
            (Ok(_), Err(e)) => Err(format!("{init:?}: lite builds, regex refuses ({e})")),
            (Err(e), Ok(_)) => {
                // Only a Unicode class or a class set operation (`[\d&&[0-1]]`,
                // `[[a-z]--a]`) may be refused by lite alone.
                let source = format!("{init:?}");
                if ["\\\\p", "\\\\P", "&&", "--", "~~"].iter().any(|s| source.contains(s)) {
                    Ok(())
                } else {
                    Err(format!("{init:?}: regex builds, lite refuses ({e})"))
                }
            }
        }
    }

    fn init_of(value: &serde_json::Value) -> Option<UrlPatternInit> {
        let object = value.as_object()?;
        let field = |name: &str| object.get(name).and_then(|v| v.as_str()).map(str::to_string);
        Some(UrlPatternInit {
            protocol: field("protocol"),
            username: field("username"),
            password: field("password"),
            hostname: field("hostname"),
            port: field("port"),
            pathname: field("pathname"),
            search: field("search"),
            hash: field("hash"),
            base_url: field("baseURL").and_then(|b| url::Url::parse(&b).ok()),
        })
    }

    /// The web-platform-tests URLPattern data (`tests/data/urlpatterntestdata.json`,
    /// as urlpattern 0.6 ships it): every case whose pattern is a dictionary
    /// builds in both engines or in neither, and matches its inputs alike
    /// (string-form patterns and inputs exercise urlpattern's parser, not
    /// the engine, and are skipped).
    #[test]
    fn lite_is_regex_on_the_platform_cases() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/urlpatterntestdata.json"))
            .expect("the data file");
        let cases: Vec<serde_json::Value> = serde_json::from_str(&text).expect("JSON");
        let (mut compared, mut failures) = (0, Vec::new());
        for case in &cases {
            let Some(pattern) = case["pattern"].as_array().and_then(|p| p.first()).and_then(init_of) else { continue };
            let ignore_case = case["pattern"].as_array().and_then(|p| p.get(1)).and_then(|o| o["ignoreCase"].as_bool());
            let options = UrlPatternOptions { ignore_case: ignore_case.unwrap_or(false), ..Default::default() };
            let inputs: Vec<UrlPatternMatchInput> = case["inputs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(init_of)
                .map(UrlPatternMatchInput::Init)
                .collect();
            compared += 1;
            if let Err(e) = both(&pattern, &options, &inputs) {
                failures.push(e);
            }
        }
        assert!(compared > 200, "only {compared} cases read");
        assert!(failures.is_empty(), "{} of {compared}:\n{}", failures.len(), failures.join("\n"));
    }

    /// Patterns of the kinds rules use, with a custom regexp or several
    /// groups, on ASCII paths spelled to reach each class's edges.
    #[test]
    fn lite_is_regex_on_rule_patterns() {
        let patterns = [
            "/users/:id(\\d+)",
            "/users/:id(\\d+)/posts/:post(\\w+)",
            "/a/:x(\\D+)/:y(\\W*)",
            "/s/:x(\\s?[a-z]+)",
            "/api/:v(v[0-9]+)/*",
            "/files/*/:name([^.]+).:ext(png|jpe?g)",
            "/(login|signin)",
            "/x/:a/:b?/:c*",
            "/w/:word(\\bfoo\\b.*)",
            "/i/:x((?i)abc)",
            "/*/admin/*",
        ];
        let paths = [
            "/users/123", "/users/12a", "/users/%D9%A3", "/users/123/posts/ab_9", "/users/1/posts/a-b",
            "/a/xyz/", "/a/x1/..", "/s/ abc", "/s/%20abc", "/api/v2/x/y", "/api/vx/y",
            "/files/a/b/pic.png", "/files/a/pic.jpeg", "/files/pic.gif", "/login", "/signin", "/x/1",
            "/x/1/2/3/4", "/w/foo", "/w/foobar", "/w/foo-bar", "/i/ABC", "/i/abc", "/a/admin/b", "/admin",
        ];
        let inputs: Vec<UrlPatternMatchInput> = paths
            .iter()
            .map(|p| {
                UrlPatternMatchInput::Init(UrlPatternInit { pathname: Some(p.to_string()), ..Default::default() })
            })
            .collect();
        for pattern in patterns {
            let init = UrlPatternInit { pathname: Some(pattern.to_string()), ..Default::default() };
            assert!(<UrlPattern<Lite>>::parse(init.clone(), Default::default()).is_ok(), "{pattern}");
            both(&init, &Default::default(), &inputs).unwrap();
        }
    }

    /// A Unicode class is refused, and the config names the rule, its
    /// `path` and why.
    #[test]
    fn a_unicode_class_is_refused() {
        let init = UrlPatternInit { pathname: Some("/u/:x(\\p{L}+)".into()), ..Default::default() };
        assert!(<UrlPattern<Lite>>::parse(init, Default::default()).is_err());
        let config = r#"{"rules":[{"name":"letters","path":"/u/:x(\\p{L}+)","key":["ip"],"limits":[{"requests":1,"window":"1m"}]}]}"#;
        let errors = crate::config::Config::from_json_str(config).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        let error = errors[0].to_string();
        assert!(error.contains("letters") && error.contains("path") && error.contains("regex-lite"), "{error}");
        assert_eq!(error.matches("regex-lite").count(), 1, "{error}");
    }
}

