//! The limiter Durable Object: one per (rule, key), SQLite-backed.
//!
//! Glue only. It loads its row (one row holding the whole log or GCRA
//! state) and its controls, lets [`crate::count::object`] decide (a call,
//! the alarm, an admin change), and applies what it returns: the row
//! stored in place, what to delete, the alarm to make sure of. The alarm
//! deletes all of its storage once the row has expired. A corrupt row is
//! refused with 500 and deleted by the alarm, as the `counter` module doc
//! sets out.
//!
//! Costs per call, in SQLite rows: at most 1 read, on an instance's first
//! call only (the instance is its storage's only writer, so it keeps the
//! row it last read or wrote); 1 written when allowed
//! (the log row, updated in place, pruning included), and by a reserve, a
//! commit, and a release that finds its reservation; 0 written and no
//! `setAlarm` when blocked. `setAlarm` runs only when no alarm is pending.
//!
//! Runtime overrides and bans ([`crate::count::controls`]) live in a second table,
//! `controls`, read once per instance (then kept in memory: the instance is
//! its only writer) and changed through `POST /v1/control`. They apply in
//! the same synchronous step as the count; a reset deletes only the count
//! while controls are set; the alarm keeps them until they end.
//!
//! What each decision does to storage, and in which order, is
//! [`crate::count::store`]'s: this object applies its [`Effect`]s one by
//! one ([`Limiter::apply`]), as the in-memory [`store::Storage`] of the
//! native harness does, and builds its reply with [`store::reply`].
//!
//! This class holds counts and controls only: the controls
//! registry and the local metrics sink are classes of their own
//! ([`crate::glue::registry`], and `MetricsSink` in `src/entry.mjs`). The one object that
//! was the registry before keeps its rows, read-only: it answers the
//! registry's handover ([`registry::HANDOVER`]) and refuses every other
//! registry call.

use crate::count::controls::{self, Change, Controls};
use crate::count::registry::{self, Entry};
use crate::count::object::{self, Alarm, ControlEffect, Delete};
use crate::count::protocol::{decode_call_url, encode_reply_line, encode_rpc_answer, Call, Reply, VERSION};
use crate::count::store::{self, StoreApplied, Effect};
use serde::Deserialize;
use std::cell::{Cell, OnceCell, RefCell};
use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsValue};
use worker::{
    durable_object, js_sys, DurableObject, Env, Request, Response, ScheduledTime, SqlStorage,
    SqlStorageValue, State,
};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS hit_log (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    log TEXT NOT NULL,
    horizon_ms INTEGER NOT NULL
)";

const CONTROLS_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS controls (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    value TEXT NOT NULL
)";

#[wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen, inline_js = r#"
export function storeLog(sql, log, horizonMs) {
  return sql.exec(
    "INSERT INTO hit_log (id, log, horizon_ms) VALUES (0, ?, ?) ON CONFLICT (id) DO UPDATE SET log = excluded.log, horizon_ms = excluded.horizon_ms",
    log, horizonMs,
  ).rowsWritten;
}
"#)]
extern "C" {
    /// Writes the count's row in place: the statement, its two values and
    /// the rows it wrote in one crossing into JavaScript (the query text
    /// stays on that side instead of being copied out of Wasm per call).
    #[wasm_bindgen(catch, js_name = storeLog)]
    fn store_log(sql: &JsValue, log: &str, horizon_ms: f64) -> Result<f64, JsValue>;
}

/// Which of this object's tables exist.
#[derive(Clone, Copy, Default)]
struct Tables {
    hit_log: bool,
    controls: bool,
}

#[derive(Deserialize)]
struct StoredControls {
    value: String,
}

#[derive(Deserialize, Clone)]
struct StoredRow {
    log: String,
    horizon_ms: i64,
}

#[durable_object(alarm)]
pub struct Limiter {
    state: State,
    /// The database handle (`ctx.storage.sql`), fetched on first use.
    db: OnceCell<SqlStorage>,
    /// The tables this instance's database has (`None` until read once,
    /// with one statement on `sqlite_master`: cheaper than a statement per
    /// table that fails with "no such table"); kept in step as this
    /// instance creates them or `deleteAll` drops them.
    tables: Cell<Option<Tables>>,
    /// Whether an alarm is known to be pending; `None` until asked once.
    alarm_pending: Cell<Option<bool>>,
    /// The key's runtime override and ban; `None` until read once.
    controls: RefCell<Option<Controls>>,
    /// The count's row as this instance last read or wrote it (`Some(None)`:
    /// none). The instance is its storage's only writer, so the row is read
    /// once per instance and then kept in step with every write: a call
    /// costs one statement (the write), or none when blocked. `None` until
    /// read, and again after a failed write (read anew).
    row: RefCell<Option<Option<StoredRow>>>,
}

impl DurableObject for Limiter {
    fn new(state: State, _env: Env) -> Self {
        Limiter {
            state,
            db: OnceCell::new(),
            tables: Cell::new(None),
            alarm_pending: Cell::new(None),
            controls: RefCell::new(None),
            row: RefCell::new(None),
        }
    }

    /// `POST /v1/control` changes the key's controls; any other request is
    /// a compact call (the fetch form of [`Limiter::rpc_answer`], for an
    /// app that exports this class without `src/entry.mjs`): a `GET` of the
    /// call's URL, answered by a reply line, or 400 (refused) / 500
    /// (failed) with a JSON `{"v":1,"error":...}`.
    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let path = req.path();
        if [registry::REGISTRY_PATH, controls::CONTROL_PATH].contains(&path.as_str()) {
            // One read of the body for the two posted forms (code size).
            let text = req.text().await?;
            return self.posted(&path, &text).await;
        }
        let (status, body) = self.compact(&req.inner().url()).await;
        Ok(Response::ok(body)?.with_status(status))
    }

    /// Deletes all storage once the log has expired; otherwise re-arms for
    /// when the newest hit expires. Idempotent: alarms are at-least-once.
    async fn alarm(&self) -> worker::Result<Response> {
        let sql = self.db();
        let (row, _) = self.load_row(sql)?;
        let (stored, horizon) = match row {
            Some(row) => (row.log, u64::try_from(row.horizon_ms).unwrap_or(0)),
            None => (String::new(), 0),
        };
        let kept = self.load_controls()?;
        let plan = object::on_alarm(&stored, horizon, &kept, now_ms());
        // The alarm fired: none is pending until the plan arms one.
        self.alarm_pending.set(Some(false));
        self.apply_all(&store::of_alarm(plan)).await?;
        Response::ok("")
    }
}

impl Limiter {
    /// Answers a posted `text` on `path`: the registry's handover (any
    /// other registry call refused, 400) or a control change.
    async fn posted(&self, path: &str, text: &str) -> worker::Result<Response> {
        if path == registry::REGISTRY_PATH {
            if text != registry::HANDOVER {
                return error_reply(400, "malformed registry call: the controls registry is the Registry class's");
            }
            return match self.handover() {
                Ok(text) => Response::ok(text),
                Err(e) => error_reply(500, &e.to_string()),
            };
        }
        let Some(change) = Change::decode(text) else {
            return error_reply(400, "malformed control");
        };
        match self.control(&change).await {
            Ok(Ok(controls)) => Response::ok(controls.encode()),
            Ok(Err(refused)) => error_reply(400, &refused.to_string()),
            Err(e) => error_reply(500, &e.to_string()),
        }
    }
}

/// The RPC form of a compact call, `stub.answer(url)`: what the Worker sends
/// for every count when the class is exported through `src/entry.mjs`
/// (which declares it `extends DurableObject`, as workerd requires of an
/// RPC receiver). No `Request` or `Response` is built on either side.
#[wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen, wasm_bindgen_futures = ::worker::wasm_bindgen_futures)]
impl Limiter {
    /// Answers the call in `url` ([`crate::count::protocol::encode_call_url`]) with
    /// [`encode_rpc_answer`]: the reply line, or `!{status} {body}`.
    #[wasm_bindgen(js_name = answer)]
    pub async fn rpc_answer(&self, url: String) -> Result<JsValue, JsValue> {
        let (status, body) = self.compact(&url).await;
        Ok(JsValue::from_str(&encode_rpc_answer(status, &body)))
    }
}

impl Limiter {
    /// A compact call (its URL) answered as a status and body: 200 with
    /// the reply line, 400 when refused, 500 when it failed, the last two
    /// with a JSON `{"v":1,"error":...}`.
    async fn compact(&self, url: &str) -> (u16, String) {
        let call = match decode_call_url(url) {
            Ok(call) => call,
            Err(refused) => return (400, error_body(&refused.to_string())),
        };
        match self.answer(&call).await {
            Ok(reply) => (200, encode_reply_line(&reply)),
            Err(e) => (500, error_body(&e.to_string())),
        }
    }

    /// The database, with the count's table created if it is missing.
    fn db_with_count_table(&self) -> worker::Result<&SqlStorage> {
        let sql = self.db();
        let (tables, _) = self.tables(sql)?;
        if !tables.hit_log {
            sql.exec(SCHEMA, None)?;
            self.tables.set(Some(Tables { hit_log: true, ..tables }));
        }
        Ok(sql)
    }

    /// The object's database handle, fetched from its state once.
    fn db(&self) -> &SqlStorage {
        self.db.get_or_init(|| self.state.storage().sql())
    }

    /// The tables that exist, and the rows read to learn it (0 once known).
    fn tables(&self, sql: &SqlStorage) -> worker::Result<(Tables, u64)> {
        if let Some(known) = self.tables.get() {
            return Ok((known, 0));
        }
        // One row, the names joined (read as `StoredControls`' one text
        // column: no second row type to deserialize).
        let cursor = sql.exec(
            "SELECT coalesce(group_concat(name, ' '), '') AS value FROM sqlite_master WHERE type = 'table' AND name IN ('hit_log', 'controls')",
            None,
        )?;
        let names: Vec<StoredControls> = cursor.to_array()?;
        let has = |table: &str| names.iter().any(|n| n.value.split(' ').any(|name| name == table));
        let known = Tables { hit_log: has("hit_log"), controls: has("controls") };
        self.tables.set(Some(known));
        Ok((known, cursor.rows_read() as u64))
    }

    /// Loads, lets [`object::answer`] decide, and applies its effects
    /// ([`store::of_answer`]: the row stored, what to delete, the alarm
    /// made sure of); the reply is [`store::reply`]'s.
    async fn answer(&self, call: &Call) -> worker::Result<Reply> {
        let sql = self.db();
        // Read, decide, write: synchronous, no `.await` in between, so no
        // other request to this object can interleave.
        let (stored, rows_read) = self.load(sql)?;
        if stored.is_empty() && self.alarm_pending.get().is_none() {
            // No row: never written, or deleted with its alarm by `deleteAll`
            // (the only way the row goes). No alarm can be pending, so the
            // first write need not ask.
            self.alarm_pending.set(Some(false));
        }
        let kept = self.load_controls()?;
        let answered = match object::answer(&stored, &kept, now_ms(), call) {
            Ok(answered) => answered,
            Err(refused) => {
                // Refused (500: the Worker applies the rule's fail policy),
                // and never left without an alarm to delete it.
                self.apply_all(&store::of_refusal(&refused)).await?;
                return Err(worker::Error::RustError(refused.corrupt.to_string()));
            }
        };
        let applied = self.apply_all(&store::of_answer(&answered)).await?;
        let alarm_pending = match answered.alarm_pending(self.alarm_pending.get()) {
            Some(known) => known,
            None => {
                let pending = self.state.storage().get_alarm().await?.is_some();
                self.alarm_pending.set(Some(pending));
                pending
            }
        };
        Ok(store::reply(answered, alarm_pending, applied.alarm_set, rows_read, applied.rows_written))
    }

    /// Applies `effects` in order ([`Limiter::apply`]); stops at the first
    /// that fails.
    async fn apply_all(&self, effects: &[Effect<'_>]) -> worker::Result<StoreApplied> {
        let mut applied = StoreApplied::default();
        for effect in effects {
            applied += self.apply(effect).await?;
        }
        Ok(applied)
    }

    /// Applies one of [`crate::count::store`]'s effects to SQLite and the
    /// alarm, keeping what this instance remembers (row, controls, alarm)
    /// in step: the rows it wrote, and whether it set the alarm.
    async fn apply(&self, effect: &Effect<'_>) -> worker::Result<StoreApplied> {
        let mut applied = StoreApplied::default();
        match effect {
            // Only a call that writes creates the schema: an object whose
            // storage the alarm deleted stays empty when merely looked at.
            Effect::Store { row, horizon_ms } => applied.rows_written = self.store(row, *horizon_ms)?,
            Effect::StoreControls(controls) => applied.rows_written = self.store_controls(controls)?,
            Effect::Delete(delete) => self.delete(*delete).await?,
            Effect::MakeSure(alarm) => applied.alarm_set = self.make_sure(*alarm).await?,
            Effect::Arm(at) => {
                self.alarm_pending.set(Some(true));
                self.state.storage().set_alarm(at_time(*at)).await?;
            }
        }
        Ok(applied)
    }

    /// Makes sure of `alarm` ([`Alarm::kept_by`]: whether the pending one
    /// will do); returns whether it set one. The pending alarm is read from
    /// storage only when its time matters or nothing is known of it.
    async fn make_sure(&self, alarm: Alarm) -> worker::Result<bool> {
        let known = self.alarm_pending.get();
        // Marked pending before the awaits, so concurrent writes do not all
        // arm it; unmarked if arming fails, so the next write tries again
        // instead of leaving a row no alarm will ever delete.
        self.alarm_pending.set(Some(true));
        let storage = self.state.storage();
        let armed = async {
            let pending = match known {
                Some(true) if !alarm.reads_time() => return Ok(false),
                Some(false) if !alarm.reads_time() => None,
                _ => storage.get_alarm().await?,
            };
            if alarm.kept_by(pending) {
                return Ok(false);
            }
            storage.set_alarm(at_time(alarm.at())).await?;
            Ok(true)
        }
        .await;
        if armed.is_err() {
            self.alarm_pending.set(None);
        }
        armed
    }

    /// Deletes what `delete` names.
    async fn delete(&self, delete: Delete) -> worker::Result<()> {
        let sql = self.db();
        match delete {
            Delete::Count => self.delete_count(sql),
            Delete::Everything => self.delete_everything().await,
            Delete::Controls => {
                if self.tables(sql)?.0.controls {
                    sql.exec("DELETE FROM controls", None)?;
                }
                *self.controls.borrow_mut() = Some(Controls::default());
                Ok(())
            }
        }
    }

    /// The stored row's text (empty when none) and the rows read for it
    /// (0 once this instance knows its row).
    fn load(&self, sql: &SqlStorage) -> worker::Result<(String, u64)> {
        let (row, rows_read) = self.load_row(sql)?;
        Ok((row.map(|r| r.log).unwrap_or_default(), rows_read))
    }

    /// The count's row: read from storage the first time, then from memory.
    /// A database without the table (never written, or deleted by the
    /// alarm) reads as no row and is left as it is.
    fn load_row(&self, sql: &SqlStorage) -> worker::Result<(Option<StoredRow>, u64)> {
        if let Some(known) = self.row.borrow().as_ref() {
            return Ok((known.clone(), 0));
        }
        let (tables, probed) = self.tables(sql)?;
        if !tables.hit_log {
            *self.row.borrow_mut() = Some(None);
            return Ok((None, probed));
        }
        // `to_array`, not `one`: `one` throws across the Wasm boundary when
        // the row does not exist yet.
        let cursor = sql.exec("SELECT log, horizon_ms FROM hit_log WHERE id = 0", None)?;
        let rows: Vec<StoredRow> = cursor.to_array()?;
        let rows_read = probed + cursor.rows_read() as u64;
        let row = rows.into_iter().next();
        *self.row.borrow_mut() = Some(row.clone());
        Ok((row, rows_read))
    }

    /// Deletes the count's row only (the controls stay).
    fn delete_count(&self, sql: &SqlStorage) -> worker::Result<()> {
        if self.tables(sql)?.0.hit_log {
            if let Err(e) = sql.exec("DELETE FROM hit_log", None) {
                *self.row.borrow_mut() = None;
                return Err(e);
            }
        }
        *self.row.borrow_mut() = Some(None);
        Ok(())
    }

    /// Writes the row in place (the schema first, once per instance);
    /// returns the rows written.
    fn store(&self, log: &str, horizon: u64) -> worker::Result<u64> {
        let horizon_ms = i64::try_from(horizon).unwrap_or(i64::MAX);
        let written = self.db_with_count_table().and_then(|sql| {
            // Window lengths are far inside a JS number's exact range.
            store_log(sql.as_ref(), log, horizon_ms as f64).map_err(worker::Error::from)
        });
        match written {
            Ok(rows) => {
                *self.row.borrow_mut() = Some(Some(StoredRow { log: log.to_string(), horizon_ms }));
                Ok(rows as u64)
            }
            Err(e) => {
                *self.row.borrow_mut() = None;
                Err(e)
            }
        }
    }

    async fn delete_everything(&self) -> worker::Result<()> {
        // From compatibility date 2026-02-24, deleteAll also clears the alarm.
        self.state.storage().delete_all().await?;
        self.tables.set(Some(Tables::default()));
        self.alarm_pending.set(Some(false));
        *self.controls.borrow_mut() = Some(Controls::default());
        *self.row.borrow_mut() = Some(None);
        Ok(())
    }

    /// The key's controls: read from storage once per instance, as
    /// [`Controls::stored`] reads them (a corrupt row as none).
    fn load_controls(&self) -> worker::Result<Controls> {
        if let Some(kept) = self.controls.borrow().as_ref() {
            return Ok(kept.clone());
        }
        let sql = self.db();
        let kept = if self.tables(sql)?.0.controls {
            let rows: Vec<StoredControls> = sql.exec("SELECT value FROM controls WHERE id = 0", None)?.to_array()?;
            Controls::stored(rows.first().map(|r| r.value.as_str()))
        } else {
            Controls::default()
        };
        *self.controls.borrow_mut() = Some(kept.clone());
        Ok(kept)
    }

    /// Writes the key's controls in place (the table first, once per
    /// instance); returns the rows written.
    fn store_controls(&self, next: &Controls) -> worker::Result<u64> {
        let sql = self.db();
        let (tables, _) = self.tables(sql)?;
        if !tables.controls {
            sql.exec(CONTROLS_SCHEMA, None)?;
            self.tables.set(Some(Tables { controls: true, ..tables }));
        }
        let cursor = sql.exec(
            "INSERT INTO controls (id, value) VALUES (0, ?) ON CONFLICT (id) DO UPDATE SET value = excluded.value",
            vec![SqlStorageValue::from(next.encode())],
        )?;
        *self.controls.borrow_mut() = Some(next.clone());
        Ok(cursor.rows_written() as u64)
    }

    /// Applies an admin change to the key's controls as
    /// [`object::control`] decides, with [`store::of_control`]'s effects:
    /// stored (the alarm made sure of for their end), or the last one
    /// cleared ([`object::after_clearing`]: with no count left, everything
    /// deleted). `Ok(Err)`: the change is refused.
    async fn control(&self, change: &Change) -> worker::Result<Result<Controls, controls::ControlError>> {
        let kept = self.load_controls()?;
        let controlled = match object::control(&kept, change, now_ms()) {
            Ok(controlled) => controlled,
            Err(refused) => return Ok(Err(refused)),
        };
        // The count's row is read only when clearing needs it.
        let row = match controlled.effect {
            ControlEffect::Cleared => self.load(self.db())?.0,
            ControlEffect::Unchanged | ControlEffect::Store { .. } => String::new(),
        };
        self.apply_all(&store::of_control(&controlled, &row)).await?;
        Ok(Ok(controlled.controls))
    }
}

impl Limiter {
    /// The registry's rows this object kept in 0.1.0, before the registry had a class of its own (only the object
    /// named [`registry::REGISTRY_OBJECT`] has any), read, never changed
    /// (a rollback reads them again): [`registry::encode_handover`]'s text,
    /// empty without the table.
    fn handover(&self) -> worker::Result<String> {
        #[derive(Deserialize)]
        struct Row {
            value: String,
            kind: String,
            until_ms: Option<i64>,
        }
        let sql = self.db();
        let table = "SELECT name AS value FROM sqlite_master WHERE type = 'table' AND name = 'registry'";
        if sql.exec(table, None)?.to_array::<StoredControls>()?.is_empty() {
            return Ok(String::new());
        }
        let query = "SELECT value, kind, until_ms FROM registry WHERE until_ms IS NULL OR until_ms > ? ORDER BY set_ms";
        let rows: Vec<Row> = sql.exec(query, vec![SqlStorageValue::Integer(now_ms())])?.to_array()?;
        let (_, sign_out_kind) = registry::SIGN_OUT_ROW;
        let sign_out = rows.iter().find(|r| r.kind == sign_out_kind).and_then(|r| Some((r.value.parse().ok()?, r.until_ms?)));
        let entries: Vec<Entry> = rows.iter().filter(|r| r.kind != sign_out_kind).filter_map(|r| Entry::decode(&r.value)).collect();
        Ok(registry::encode_handover(&entries, sign_out))
    }
}

fn now_ms() -> i64 {
    js_sys::Date::now() as i64
}

/// An absolute alarm time. workers-rs reads an `i64` or `Duration` as an
/// offset from now, so epoch times go through a `Date`.
fn at_time(epoch_ms: i64) -> ScheduledTime {
    ScheduledTime::new(js_sys::Date::new(&(epoch_ms as f64).into()))
}

fn error_body(message: &str) -> String {
    // `{"error":...,"v":1}`, as `json!` wrote it (keys sorted), without building a map.
    format!("{{\"error\":{},\"v\":{VERSION}}}", serde_json::Value::from(message))
}

/// A JSON `{"error":...,"v":1}` answer with `status` (every class's).
pub(crate) fn error_reply(status: u16, message: &str) -> worker::Result<Response> {
    let headers = worker::Headers::new();
    headers.set("content-type", "application/json")?;
    Ok(Response::ok(error_body(message))?.with_status(status).with_headers(headers))
}
