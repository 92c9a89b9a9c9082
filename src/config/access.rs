//! `admin_access`: Cloudflare Access in front of the console and the admin
//! API: `{ team_domain, audience }`, the Zero Trust team's domain
//! (`acme.cloudflareaccess.com`) and the Access application's audience
//! (AUD) tag, or a list of them. With it, a request under the admin prefix
//! whose `Cf-Access-Jwt-Assertion` holds a valid Access token is the
//! operator's ([`crate::admin::access`]); the admin token stays for API
//! clients and the CLI.

use crate::config::reader::{infos, Field, FieldInfo, Input, Shape};

/// The suffix of every Zero Trust team domain.
pub(crate) const TEAM_SUFFIX: &str = ".cloudflareaccess.com";

/// The Access application in front of the admin prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AdminAccess {
    /// The team domain, a host (`acme.cloudflareaccess.com`), lowercase.
    pub(crate) team_domain: String,
    /// The application audience tags a token's `aud` must hold one of.
    pub(crate) audience: Vec<String>,
}

impl AdminAccess {
    /// What Access writes in a token's `iss`: `https://<team domain>`.
    pub(crate) fn issuer(&self) -> String {
        format!("https://{}", self.team_domain)
    }

    /// What `tollgate check` notes of it, for the admin prefix `prefix`
    /// (not in the Worker's build).
    #[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
    pub(crate) fn note(&self, prefix: &str) -> String {
        format!(
            "admin: Cloudflare Access signs operators in under {prefix} (tokens of {}, audience {}): put the Access application on {prefix}; \
             tollgate checks every token itself, so a request Access did not let through opens nothing",
            self.issuer(),
            self.audience.join(", ")
        )
    }

    /// The team's signing keys (JWKS): `https://<team domain>/cdn-cgi/access/certs`.
    pub(crate) fn certs_url(&self) -> String {
        format!("https://{}/cdn-cgi/access/certs", self.team_domain)
    }
}

/// The team domain as written (`acme.cloudflareaccess.com`, with or
/// without `https://` and a trailing `/`), as a lowercase host; `None`
/// unless it is `<team>.cloudflareaccess.com`.
pub(crate) fn team_host(text: &str) -> Option<String> {
    let host = text.trim();
    let host = host.strip_prefix("https://").unwrap_or(host).trim_end_matches('/').to_ascii_lowercase();
    let team = host.strip_suffix(TEAM_SUFFIX)?;
    let label_ok = |l: &str| (1..=63).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') && !l.starts_with('-') && !l.ends_with('-');
    team.split('.').all(label_ok).then_some(host)
}

/// Whether `tag` can be an audience tag: 1 to 128 visible ASCII characters.
fn valid_tag(tag: &str) -> bool {
    (1..=128).contains(&tag.len()) && tag.bytes().all(|b| b.is_ascii_graphic())
}

const TAG: &str = "must be the Access application's audience (AUD) tag, or a list of them (Zero Trust → Access → Applications → the application → Overview)";

/// The fields of `admin_access`.
pub(super) const ACCESS_FIELDS: &[Field<AdminAccess>] = &[
    Field::required("team_domain", "missing: the Zero Trust team domain, such as \"acme.cloudflareaccess.com\"", Shape::Text("^(https://)?[A-Za-z0-9.-]+\\.cloudflareaccess\\.com/?$"), "The Zero Trust team domain, e.g. \"acme.cloudflareaccess.com\": tokens are issued by https://<it> and signed by the keys at https://<it>/cdn-cgi/access/certs.", |a, i| {
        if let Some(host) = i.text(|t| team_host(t).is_some(), "must be the Zero Trust team domain, such as \"acme.cloudflareaccess.com\"").and_then(|t| team_host(&t)) {
            a.team_domain = host;
        }
    }),
    Field::required("audience", "missing: the Access application's audience (AUD) tag", Shape::AnyOf(&[Shape::NonEmptyText, Shape::List(&Shape::NonEmptyText, 1)]), "The Access application's audience (AUD) tag, or a list of them: a token's aud must hold one.", |a, i| {
        let tags = match i.value.as_str() {
            Some(one) => Some(vec![one.trim().to_string()]),
            None => i.strings(|l| !l.is_empty(), TAG).map(|l| l.iter().map(|t| t.trim().to_string()).collect()),
        };
        match tags {
            Some(tags) if tags.iter().all(|t| valid_tag(t)) => a.audience = tags,
            Some(_) => i.report(TAG),
            None => {}
        }
    }),
];

/// `admin_access = { team_domain, audience }`; `None` when malformed (each
/// error reported under its field).
pub(super) fn read_access(input: &mut Input<'_>) -> Option<AdminAccess> {
    let Some(table) = input.value.as_object() else {
        return input.fail("must be a table { team_domain = \"acme.cloudflareaccess.com\", audience = \"<AUD tag>\" }");
    };
    let mut access = AdminAccess::default();
    input.read_fields(table, ACCESS_FIELDS, &mut access).then_some(access)
}

/// The schema's view of [`ACCESS_FIELDS`].
pub(super) fn access_infos() -> Vec<FieldInfo> {
    infos(ACCESS_FIELDS)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use serde_json::json;

    fn read(access: serde_json::Value) -> Result<Option<super::AdminAccess>, Vec<String>> {
        let value = json!({ "rules": [], "admin_access": access });
        Config::from_json(&value).map(|c| c.admin_access).map_err(|e| e.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn the_team_domain_and_audience_are_read_and_checked() {
        let a = read(json!({ "team_domain": "https://Acme.cloudflareaccess.com/", "audience": "aud1" })).unwrap().unwrap();
        assert_eq!((a.team_domain.as_str(), a.audience.as_slice()), ("acme.cloudflareaccess.com", ["aud1".to_string()].as_slice()));
        assert_eq!(a.issuer(), "https://acme.cloudflareaccess.com");
        assert_eq!(a.certs_url(), "https://acme.cloudflareaccess.com/cdn-cgi/access/certs");
        assert!(a.note("/.tollgate").starts_with("admin: Cloudflare Access signs operators in under /.tollgate (tokens of https://acme.cloudflareaccess.com, audience aud1)"));
        assert_eq!(read(json!({ "team_domain": "acme.cloudflareaccess.com", "audience": ["a", "b"] })).unwrap().unwrap().audience, ["a", "b"]);
        assert_eq!(Config::from_json(&json!({ "rules": [] })).unwrap().admin_access, None, "off by default");
        for (access, says) in [
            (json!({ "team_domain": "acme.example.com", "audience": "a" }), "field `admin_access.team_domain`: must be the Zero Trust team domain"),
            (json!({ "team_domain": ".cloudflareaccess.com", "audience": "a" }), "field `admin_access.team_domain`"),
            (json!({ "team_domain": "evil.com/x.cloudflareaccess.com", "audience": "a" }), "field `admin_access.team_domain`"),
            (json!({ "team_domain": "acme.cloudflareaccess.com" }), "field `admin_access.audience`: missing"),
            (json!({ "team_domain": "acme.cloudflareaccess.com", "audience": "two words" }), "field `admin_access.audience`: must be the Access application's audience"),
            (json!({ "team_domain": "acme.cloudflareaccess.com", "audience": [] }), "field `admin_access.audience`"),
            (json!({ "team_domain": "acme.cloudflareaccess.com", "audience": "a", "aud": "b" }), "field `admin_access.aud`: unknown field"),
            (json!("acme"), "field `admin_access`: must be a table"),
        ] {
            let errors = read(access.clone()).unwrap_err();
            assert_eq!(errors.len(), 1, "{access}: {errors:?}");
            assert!(errors[0].starts_with(says), "{access}: {errors:?}");
        }
    }
}
