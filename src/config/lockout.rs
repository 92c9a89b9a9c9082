//! The built-in rule that counts failed admin authentications per client
//! (the admin API's lockout; `crate::admin::api` asks it). It is a
//! config rule's defaults with what [`lockout_spec`] sets, compiled once in
//! [`crate::config::Config::admin_lockout`]; never among `rules`, never
//! matched against a request.

use crate::config::policy::FailPolicy;
use crate::config::rules::RuleSpec;
use crate::count::window::Limit;
use crate::request::key::KeyPart;

/// The name of the built-in rule counting failed admin authentications. It
/// holds a `:`, which no config rule name may, so it never shares a counter
/// (an object named `rule \n key`) with one.
pub(crate) const LOCKOUT_RULE: &str = "tollgate:admin-auth";

/// Failed authentications a client may make per [`LOCKOUT_WINDOW_MS`]. Ten
/// leaves room for typos and a misconfigured script; against a random
/// 32-byte token any number of guesses is hopeless anyway, so the limit is
/// there to stop a client hammering the admin API (and to make a leaked but
/// mistyped token, or a scanner, visible in the logs), not to protect a
/// weak token.
pub(crate) const LOCKOUT_FAILURES: u32 = 10;

/// The lockout's window: 15 minutes.
pub(crate) const LOCKOUT_WINDOW_MS: u64 = 15 * 60 * 1000;

/// Makes `spec` (a config rule's defaults) the built-in lockout rule:
/// [`LOCKOUT_RULE`], keyed by `ip`, [`LOCKOUT_FAILURES`] per
/// [`LOCKOUT_WINDOW_MS`], failing closed (an authorized request whose
/// lockout cannot be checked gets 503). Its path is never matched: the
/// admin route asks its counter directly.
pub(crate) fn lockout_spec(spec: &mut RuleSpec) {
    spec.name = LOCKOUT_RULE.to_string();
    spec.key = vec![KeyPart::Ip];
    spec.limits = Limit::new(LOCKOUT_FAILURES, LOCKOUT_WINDOW_MS).into_iter().collect();
    spec.on_error = FailPolicy::Deny;
}
