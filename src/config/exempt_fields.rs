//! The `exempt` table, at the top level or in a rule
//! (`{ ips, asns, verified_bots, header }`, [`EXEMPT_FIELDS`]), and its
//! `header` table, which must name a Workers secret ([`SECRET_HEADER_FIELDS`]):
//! a bare header name is spoofable, so it is refused.

use crate::config::reader::{infos, FieldInfo, Shape, HEADER_NAME, SECRET_NAME, read_table, valid_header_name, valid_secret_name, Field, Input};
use crate::request::exempt::{Bots, Exemptions, IpRange, SecretHeader};
use serde_json::Value;

/// The fields of an `exempt` table.
pub(super) const EXEMPT_FIELDS: &[Field<Exemptions>] = &[
    Field::optional("ips", Shape::List(&Shape::Text(""), 0), "Client address ranges (CIDR), e.g. [\"10.0.0.0/8\", \"2001:db8::/32\"].", |e, i| {
        let Some(list) = i.strings(|_| true, "must be a list of CIDR ranges such as [\"10.0.0.0/8\", \"2001:db8::/32\"]") else {
            return;
        };
        for (n, text) in list.iter().enumerate() {
            match IpRange::parse(text.trim()) {
                Ok(range) => e.ips.push(range),
                Err(message) => i.errors.push(format!("{}[{n}]", i.field), message),
            }
        }
    }),
    Field::optional("asns", Shape::List(&Shape::Integer(1, u32::MAX as u64), 0), "Autonomous system numbers (request.cf.asn), e.g. [13335].", |e, i| {
        let asn = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|n| *n > 0);
        match i.value.as_array().and_then(|list| list.iter().map(asn).collect::<Option<Vec<u32>>>()) {
            Some(asns) => e.asns = asns,
            None => i.report("must be a list of AS numbers such as [13335]"),
        }
    }),
    Field::optional("verified_bots", Shape::AnyOf(&[Shape::Flag, Shape::List(&Shape::NonEmptyText, 1)]), "true (every verified bot) or a list of verified bot categories, e.g. [\"Search Engine Crawler\"].", |e, i| {
        e.bots = match i.value {
            Value::Bool(true) => Bots::Any,
            Value::Bool(false) => Bots::None,
            _ => match i.strings(|l| !l.is_empty() && l.iter().all(|c| !c.trim().is_empty()), VERIFIED_BOTS) {
                Some(list) => Bots::Categories(list.iter().map(|c| c.trim().to_string()).collect()),
                None => Bots::None,
            },
        };
    }),
    Field::optional("header", Shape::Table(secret_header_infos), "A request header whose value equals a Workers secret: { name, secret }.", |e, i| e.header = read_secret_header(i)),
];

pub(super) const VERIFIED_BOTS: &str =
    "must be true (every verified bot) or a list of verified bot categories such as [\"Search Engine Crawler\", \"Monitoring & Analytics\"]";

/// `exempt = { ips, asns, verified_bots, header }`, at the top level or in
/// a rule.
pub(super) fn read_exempt(input: &mut Input<'_>) -> Exemptions {
    let mut exemptions = Exemptions::default();
    match input.value.as_object() {
        Some(table) => read_table(table, EXEMPT_FIELDS, &mut exemptions, input.errors, &format!("{}.", input.field)),
        None => input.report("must be a table { ips = [...], asns = [...], verified_bots = true, header = { name, secret } }"),
    }
    exemptions
}

/// The fields of `exempt.header`.
pub(super) const SECRET_HEADER_FIELDS: &[Field<SecretHeader>] = &[
    Field::required("name", "missing", HEADER_NAME, "The request header, e.g. \"x-tollgate-exempt\".", |h, i| {
        if let Some(name) = i.text(valid_header_name, "must be a request header name such as \"x-tollgate-exempt\"") {
            h.name = name.to_ascii_lowercase();
        }
    }),
    Field::required("secret", SPOOFABLE_HEADER, SECRET_NAME, "The Workers secret its value must equal, e.g. \"TOLLGATE_EXEMPT_KEY\" (wrangler secret put).", |h, i| {
        if let Some(secret) = i.text(valid_secret_name, "must be a Workers secret name such as \"TOLLGATE_EXEMPT_KEY\"") {
            h.secret = secret;
        }
    }),
];

/// Why `tollgate check` refuses a header exemption without a secret.
pub(super) const SPOOFABLE_HEADER: &str = "missing: any client can send any header, so a header exempts only when its value equals a Workers secret; name it (secret = \"TOLLGATE_EXEMPT_KEY\", then `wrangler secret put TOLLGATE_EXEMPT_KEY`)";

/// `header = { name = "x-tollgate-exempt", secret = "TOLLGATE_EXEMPT_KEY" }`.
pub(super) fn read_secret_header(input: &mut Input<'_>) -> Option<SecretHeader> {
    let Some(table) = input.value.as_object() else {
        return input.fail(format!("must be a table {{ name, secret }}; a bare header name is spoofable ({SPOOFABLE_HEADER})"));
    };
    let mut header = SecretHeader { name: String::new(), secret: String::new() };
    input.read_fields(table, SECRET_HEADER_FIELDS, &mut header).then_some(header)
}

/// The schema's view of [`EXEMPT_FIELDS`].
pub(super) fn exempt_infos() -> Vec<FieldInfo> {
    infos(EXEMPT_FIELDS)
}

fn secret_header_infos() -> Vec<FieldInfo> {
    infos(SECRET_HEADER_FIELDS)
}
