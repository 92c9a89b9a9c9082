//! A JSON request body as origins read it (pure): every member of an
//! object kept, duplicates and case twins included, in order.
//!
//! `serde_json::Value` keeps only the last of a member given twice, but
//! first-wins scanners (Go's gjson and jsonparser, hand-rolled readers)
//! read the first, and Go's `encoding/json` and ASP.NET Core's web
//! defaults match member names case-insensitively. A reader that must see
//! every value an origin could read needs all of them.

use std::fmt;

/// A parsed JSON document; only objects and scalars are kept.
pub(crate) enum Json {
    /// Every member, in order, duplicates included.
    Object(Vec<(String, Json)>),
    /// An array's scalar elements (`{"mode": ["heavy"]}`: Rails' `params`
    /// and Laravel's `input()` hand the array over).
    Array(Vec<Json>),
    /// A string, number or boolean, as text (`42`, `true`).
    Scalar(String),
    /// `null`, or a value no reader here looks into.
    Other,
}

/// Parses `bytes` as JSON; a leading UTF-8 byte-order mark is skipped
/// (System.Text.Json and several servers skip it). `None` when malformed.
pub(crate) fn parse(bytes: &[u8]) -> Option<Json> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    serde_json::from_slice(bytes).ok()
}

impl Json {
    /// The values of the members named `name`, in any ASCII case.
    pub(crate) fn members<'j>(&'j self, name: &'j str) -> impl Iterator<Item = &'j Json> + 'j {
        let members: &[(String, Json)] = match self {
            Json::Object(members) => members,
            _ => &[],
        };
        members.iter().filter(move |(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v)
    }

    /// The text of a scalar.
    pub(crate) fn scalar(&self) -> Option<&str> {
        match self {
            Json::Scalar(text) => Some(text),
            _ => None,
        }
    }

    /// A top-level object's members as form-like `(name, value)` pairs:
    /// each scalar member, and each scalar element of an array member
    /// under its member's name. Nested objects give nothing; a document
    /// that is not an object has no pairs.
    pub(crate) fn parameters(&self) -> Vec<(String, String)> {
        let Json::Object(members) = self else { return Vec::new() };
        let mut pairs = Vec::new();
        for (name, value) in members {
            match value {
                Json::Scalar(text) => pairs.push((name.clone(), text.clone())),
                Json::Array(items) => pairs.extend(items.iter().filter_map(Json::scalar).map(|t| (name.clone(), t.to_string()))),
                Json::Object(_) | Json::Other => {}
            }
        }
        pairs
    }
}

impl<'de> serde::Deserialize<'de> for Json {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Json;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
                let mut members = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Json>()? {
                    members.push((k, v));
                }
                Ok(Json::Object(members))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Json>()? {
                    if matches!(item, Json::Scalar(_)) {
                        items.push(item);
                    }
                }
                Ok(Json::Array(items))
            }
            fn visit_str<E>(self, v: &str) -> Result<Json, E> {
                Ok(Json::Scalar(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Json, E> {
                Ok(Json::Scalar(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
                Ok(Json::Scalar(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
                Ok(Json::Scalar(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
                Ok(Json::Scalar(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
                Ok(serde_json::Number::from_f64(v).map_or(Json::Other, |n| Json::Scalar(n.to_string())))
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Other)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_keep_duplicates_and_case_twins_in_order() {
        let json = parse(br#"{"email":"a","x":{"email":"n"},"Email":"b","email":"c"}"#).expect("valid");
        let found: Vec<_> = json.members("email").filter_map(Json::scalar).collect();
        assert_eq!(found, ["a", "b", "c"]);
    }

    #[test]
    fn parameters_are_top_level_scalars_and_array_elements() {
        let json = parse("\u{feff}{\"_method\":\"DELETE\",\"n\":42,\"ok\":true,\"mode\":[\"heavy\",{\"x\":1},2],\"deep\":{\"mode\":\"heavy\"},\"z\":null}".as_bytes())
            .expect("a BOM is skipped");
        assert_eq!(
            json.parameters(),
            [("_method", "DELETE"), ("n", "42"), ("ok", "true"), ("mode", "heavy"), ("mode", "2")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        assert!(parse(b"[1,2]").expect("valid").parameters().is_empty());
        assert!(parse(b"{\"a\":").is_none());
        assert!(parse(b"").is_none());
    }
}
