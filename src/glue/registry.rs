//! The controls registry's Durable Object: one object,
//! [`registry::REGISTRY_OBJECT`], of its own class, bound as
//! [`classes::REGISTRY`]. Glue only: the calls and their rows are
//! [`crate::count::registry`]'s.
//!
//! One table, `registry`, one row per (object, kind), ended rows deleted at
//! each write, and the console's last sign-out ([`registry::SIGN_OUT_ROW`]).
//! The class has no alarm: it never sets one, and nothing but a row's own
//! end removes it (the `Limiter`'s alarm, which deletes an object with no
//! count, cannot reach it).
//!
//! The rows the registry held as a `Limiter` object (0.1.0) are
//! moved in once, as [`crate::count::registry`] sets out ([`Registry::take_over`]);
//! a second table, `handover`, records that they were.

use crate::count::classes;
use crate::count::protocol::CallFailure;
use crate::count::registry::{self, RegistryCall, HANDOVER, REGISTRY_OBJECT, REGISTRY_PATH};
use crate::glue::limiter::error_reply;
use crate::glue::objects::post_to;
use crate::pipeline::credentials::SESSION_MS;
use serde::Deserialize;
use std::cell::{Cell, OnceCell};
use worker::{durable_object, js_sys, DurableObject, Env, Request, Response, SqlStorage, SqlStorageValue, State};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS registry (
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    until_ms INTEGER,
    set_ms INTEGER NOT NULL,
    PRIMARY KEY (id, kind)
)";

/// Whether (and when) the `Limiter` registry's rows were moved in.
const HANDOVER_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS handover (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    at_ms INTEGER NOT NULL
)";

#[derive(Deserialize)]
struct RowValue {
    value: String,
}

#[durable_object(fetch)]
pub struct Registry {
    state: State,
    /// The bindings: the `Limiter` object the rows are moved from.
    env: Env,
    /// The database handle, with both tables created, fetched on first use.
    db: OnceCell<SqlStorage>,
    /// Whether the `Limiter` registry's rows are in; `None` until read once.
    moved: Cell<Option<bool>>,
}

impl DurableObject for Registry {
    fn new(state: State, env: Env) -> Self {
        Registry { state, env, db: OnceCell::new(), moved: Cell::new(None) }
    }

    /// `POST /v1/registry` with one [`RegistryCall`] line: its answer's
    /// text, 400 for anything else, 500 when storage fails.
    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        if req.path() != REGISTRY_PATH {
            return error_reply(404, "not a registry path");
        }
        let text = req.text().await?;
        let Some(call) = RegistryCall::decode(&text) else {
            return error_reply(400, "malformed registry call");
        };
        let answer = async {
            self.take_over(&call).await?;
            self.apply(&call, false)
        };
        match answer.await {
            Ok(text) => Response::ok(text),
            Err(e) => error_reply(500, &e.to_string()),
        }
    }
}

impl Registry {
    /// The database, both tables created once per instance.
    fn db(&self) -> worker::Result<&SqlStorage> {
        if let Some(sql) = self.db.get() {
            return Ok(sql);
        }
        let sql = self.state.storage().sql();
        sql.exec(SCHEMA, None)?;
        sql.exec(HANDOVER_SCHEMA, None)?;
        Ok(self.db.get_or_init(|| sql))
    }

    /// Moves the `Limiter` registry's rows in, until they are
    /// ([`crate::count::registry`]): its handover merged and recorded; from a
    /// `Limiter` of the release before (400), what `list` and `signedout`
    /// tell merged, and `call`, a sign-out, sent there too (the Workers of
    /// that release read it there); unreachable, nothing (asked again at the
    /// next call). Only storage errors fail the call.
    async fn take_over(&self, call: &RegistryCall) -> worker::Result<()> {
        if self.is_moved()? {
            return Ok(());
        }
        let ask = |body: String| post_to(&self.env, classes::LIMITER, REGISTRY_OBJECT, REGISTRY_PATH, body);
        match ask(HANDOVER.to_string()).await {
            Ok(text) => {
                for moved in registry::decode_handover(&text) {
                    self.apply(&moved, true)?;
                }
                let sql = self.db()?;
                sql.exec("INSERT OR REPLACE INTO handover (id, at_ms) VALUES (0, ?)", vec![SqlStorageValue::Integer(now_ms())])?;
                self.moved.set(Some(true));
            }
            Err(CallFailure::Refused { status: 400, .. }) => {
                let (listing, signed_out) = (ask(RegistryCall::List.encode()).await, ask(RegistryCall::SignedOut.encode()).await);
                if let (Ok(listing), Ok(signed_out)) = (listing, signed_out) {
                    for older in registry::from_older(&listing, &signed_out, SESSION_MS, now_ms()) {
                        self.apply(&older, true)?;
                    }
                }
                if matches!(call, RegistryCall::SignOut { .. }) {
                    let _ = ask(call.encode()).await;
                }
            }
            Err(_) => {}
        }
        Ok(())
    }

    /// Whether the rows were moved in: read once per instance.
    fn is_moved(&self) -> worker::Result<bool> {
        if let Some(known) = self.moved.get() {
            return Ok(known);
        }
        let rows: Vec<RowValue> = self.db()?.exec("SELECT CAST(at_ms AS TEXT) AS value FROM handover", None)?.to_array()?;
        let moved = !rows.is_empty();
        self.moved.set(Some(moved));
        Ok(moved)
    }

    /// Applies `call`: a put or a remove (ended entries deleted first), or
    /// the live entries, oldest first, one line each; the console's last
    /// sign-out, kept or read ([`Self::sign_out`]). `merge`: a row moved in
    /// from the `Limiter` registry, stored only over an older one.
    fn apply(&self, call: &RegistryCall, merge: bool) -> worker::Result<String> {
        let sql = self.db()?;
        let now = SqlStorageValue::Integer(now_ms());
        let prune = || sql.exec("DELETE FROM registry WHERE until_ms IS NOT NULL AND until_ms <= ?", vec![now.clone()]);
        match call {
            RegistryCall::Put(entry) => {
                prune()?;
                let until = entry.until_ms.map_or(SqlStorageValue::Null, SqlStorageValue::Integer);
                let statement = if merge {
                    "INSERT INTO registry (id, kind, value, until_ms, set_ms) VALUES (?, ?, ?, ?, ?) \
                     ON CONFLICT (id, kind) DO UPDATE SET value = excluded.value, until_ms = excluded.until_ms, set_ms = excluded.set_ms \
                     WHERE excluded.set_ms > registry.set_ms"
                } else {
                    "INSERT OR REPLACE INTO registry (id, kind, value, until_ms, set_ms) VALUES (?, ?, ?, ?, ?)"
                };
                let args = vec![
                    SqlStorageValue::from(entry.id.clone()),
                    SqlStorageValue::from(entry.kind.name().to_string()),
                    SqlStorageValue::from(entry.encode()),
                    until,
                    SqlStorageValue::Integer(entry.set_ms),
                ];
                sql.exec(statement, args)?;
                Ok(String::new())
            }
            RegistryCall::Remove { id, kind } => {
                prune()?;
                let args = vec![SqlStorageValue::from(id.clone()), SqlStorageValue::from(kind.name().to_string())];
                sql.exec("DELETE FROM registry WHERE id = ? AND kind = ?", args)?;
                Ok(String::new())
            }
            RegistryCall::SignOut { .. } | RegistryCall::SignedOut => self.sign_out(call),
            RegistryCall::List => {
                // Every row but the console's sign-out.
                let query = "SELECT value FROM registry WHERE (until_ms IS NULL OR until_ms > ?) AND kind != 'signout' ORDER BY set_ms LIMIT 500";
                let rows: Vec<RowValue> = sql.exec(query, vec![now.clone()])?.to_array()?;
                Ok(rows.iter().map(|r| r.value.as_str()).collect::<Vec<_>>().join("\n"))
            }
        }
    }

    /// The console's last sign-out: one registry row,
    /// [`registry::SIGN_OUT_ROW`], never listed, kept a session's length.
    fn sign_out(&self, call: &RegistryCall) -> worker::Result<String> {
        let sql = self.db()?;
        let now = SqlStorageValue::Integer(now_ms());
        let (id, kind) = registry::SIGN_OUT_ROW;
        match call {
            RegistryCall::SignOut { at_ms, keep_ms } => {
                sql.exec("DELETE FROM registry WHERE until_ms IS NOT NULL AND until_ms <= ?", vec![now.clone()])?;
                // The latest sign-out wins (isolates' clocks differ a little).
                sql.exec(
                    "INSERT INTO registry (id, kind, value, until_ms, set_ms) VALUES (?, ?, ?, ?, ?) \
                     ON CONFLICT (id, kind) DO UPDATE SET value = excluded.value, until_ms = excluded.until_ms, set_ms = excluded.set_ms \
                     WHERE excluded.set_ms > registry.set_ms",
                    vec![
                        SqlStorageValue::from(id.to_string()),
                        SqlStorageValue::from(kind.to_string()),
                        SqlStorageValue::from(at_ms.to_string()),
                        SqlStorageValue::Integer(at_ms.saturating_add(*keep_ms)),
                        SqlStorageValue::Integer(*at_ms),
                    ],
                )?;
                Ok(String::new())
            }
            RegistryCall::SignedOut => {
                let query = "SELECT value FROM registry WHERE id = ? AND kind = ? AND until_ms > ?";
                let args = vec![SqlStorageValue::from(id.to_string()), SqlStorageValue::from(kind.to_string()), now.clone()];
                let rows: Vec<RowValue> = sql.exec(query, args)?.to_array()?;
                Ok(rows.first().map(|r| r.value.clone()).unwrap_or_default())
            }
            _ => Ok(String::new()),
        }
    }
}

fn now_ms() -> i64 {
    js_sys::Date::now() as i64
}

