// Billing meter for the Durable Objects of one benchmarked Worker: counts,
// in the isolate, what Cloudflare bills per object (requests, SQLite rows,
// alarms) without touching the system's own code. scripts/bench wraps each
// object class with it (bench/workers/tollgate.mjs, bench/peers/hono-metered.mjs)
// and reads the counters with `GET https://meter.bench/` + METER_HEADER on
// any object of the namespace (that call itself is not counted).
//
// What counts as what follows the Durable Objects pricing page (see
// bench/README.md): every fetch or RPC call into an object and every alarm
// invocation is a billed request; SQL cursors report rows read and written
// (the billed units); key-value `get`/`put`/`delete` on a SQLite-backed
// object are billed as one row read / written per key; each `setAlarm` is
// one row written; the rows a `deleteAll` removes are billed as written but
// are not visible from JavaScript, so only its calls are counted.
//
// workerd runs all objects of a Worker in that Worker's isolate, so one
// module-level meter sees them all.

export const METER_HEADER = "x-bench-meter";

const meter = {
  calls: 0, // fetch + RPC calls into an object (billed requests)
  alarms: 0, // alarm invocations (billed requests)
  sqlRowsRead: 0,
  sqlRowsWritten: 0,
  kvRowsRead: 0, // keys read by storage.get
  kvRowsWritten: 0, // keys written by storage.put / removed by storage.delete
  setAlarm: 0, // one row written each
  getAlarm: 0, // not billed as a row (informational)
  deleteAll: 0, // billed as the rows it deletes (not visible here)
  errors: 0, // calls that threw
};

// Cursors of the calls in flight. `sql.exec` is synchronous and a call
// consumes its cursors before its next `await`, so every cursor here is
// complete once any call settles: its counts are final then.
let cursors = [];

function settleCursors() {
  for (const c of cursors) {
    meter.sqlRowsRead += c.rowsRead;
    meter.sqlRowsWritten += c.rowsWritten;
  }
  cursors = [];
}

const keyCount = (keys) => (Array.isArray(keys) ? keys.length : 1);
const entryCount = (keyOrEntries) =>
  typeof keyOrEntries === "object" && keyOrEntries !== null ? Object.keys(keyOrEntries).length : 1;

/** A view of `target` whose methods run on `target` itself, some wrapped. */
function view(target, wrappers) {
  return new Proxy(target, {
    get(t, name) {
      const v = Reflect.get(t, name, t);
      if (typeof v !== "function") return Object.hasOwn(wrappers, name) ? wrappers[name](v) : v;
      const bound = v.bind(t);
      return Object.hasOwn(wrappers, name) ? wrappers[name](bound) : bound;
    },
  });
}

function meterSql(sql) {
  return view(sql, {
    exec: (exec) => (...args) => {
      const cursor = exec(...args);
      cursors.push(cursor);
      return cursor;
    },
  });
}

function meterStorage(storage) {
  return view(storage, {
    sql: (sql) => (sql ? meterSql(sql) : sql),
    get: (get) => (keys, ...rest) => {
      meter.kvRowsRead += keyCount(keys);
      return get(keys, ...rest);
    },
    put: (put) => (keyOrEntries, ...rest) => {
      meter.kvRowsWritten += entryCount(keyOrEntries);
      return put(keyOrEntries, ...rest);
    },
    delete: (del) => (keys, ...rest) => {
      meter.kvRowsWritten += keyCount(keys);
      return del(keys, ...rest);
    },
    setAlarm: (setAlarm) => (...args) => {
      meter.setAlarm++;
      return setAlarm(...args);
    },
    getAlarm: (getAlarm) => (...args) => {
      meter.getAlarm++;
      return getAlarm(...args);
    },
    deleteAll: (deleteAll) => (...args) => {
      meter.deleteAll++;
      return deleteAll(...args);
    },
  });
}

/** The object state (`ctx`) as the class sees it, with its storage metered. */
export function meterState(state) {
  return view(state, { storage: (storage) => meterStorage(storage) });
}

/** Runs one billed call (`kind`: "calls" or "alarms") and counts it. */
export async function metered(kind, run) {
  meter[kind]++;
  try {
    return await run();
  } catch (e) {
    meter.errors++;
    throw e;
  } finally {
    settleCursors();
  }
}

export const isMeterRequest = (request) => request.headers.has(METER_HEADER);

export function meterResponse() {
  settleCursors();
  return Response.json(meter);
}
