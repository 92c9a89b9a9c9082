// `tollgate admin URL COMMAND ...`: the admin API from a terminal (issue 28),
// plain fetch, the token from the environment (TOLLGATE_ADMIN_TOKEN). Each
// command is one call of the API the console's pages are made of, and prints
// its JSON answer.

export const ADMIN_USAGE = `  tollgate admin URL status|reset|ban|lift|override|clear-override --rule NAME PART=VALUE...
                  [--for 1h | --until UNIX_S] [--limit N/WINDOW]... [--reason TEXT] [--by LABEL]
  tollgate admin URL controls | rules | traffic [--range hour|day|week]
                                          the admin API of the admin Worker at URL (its
                                          origin), the token from $TOLLGATE_ADMIN_TOKEN;
                                          --prefix P when admin_prefix is not /.tollgate`;

const ENDPOINTS = {
  status: ["GET", "/status"],
  reset: ["POST", "/reset"],
  ban: ["POST", "/ban"],
  lift: ["DELETE", "/ban"],
  override: ["PUT", "/override"],
  "clear-override": ["DELETE", "/override"],
  controls: ["GET", "/controls"],
  rules: ["GET", "/rules"],
  traffic: ["GET", "/traffic"],
};

/** The request a command line asks for: { method, url } or { error }. */
export function adminRequest(args) {
  const [base, command, ...rest] = args;
  if (!base || !command || !(command in ENDPOINTS)) return { error: `usage:\n${ADMIN_USAGE}` };
  let prefix = "/.tollgate";
  const params = [["by", "cli"]];
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    const value = () => {
      if (i + 1 >= rest.length) throw new Error(`${arg} needs a value`);
      return rest[++i];
    };
    const flag = { "--rule": "rule", "--for": "for", "--until": "until", "--limit": "limit", "--reason": "reason", "--by": "by", "--range": "range", "--bucket": "bucket" }[arg];
    try {
      if (arg === "--prefix") prefix = value();
      else if (flag === "by") params[0][1] = value();
      else if (flag) params.push([flag, value()]);
      else if (arg.includes("=") && !arg.startsWith("--")) params.push([arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)]);
      else return { error: `unknown argument ${arg}\nusage:\n${ADMIN_USAGE}` };
    } catch (e) {
      return { error: e.message };
    }
  }
  let origin;
  try {
    origin = new URL(base).origin;
  } catch {
    return { error: `not a URL: ${base}` };
  }
  const [method, path] = ENDPOINTS[command];
  // Percent-encoded throughout (a space as %20, a plus as %2B): the API
  // refuses a literal `+`, which could mean either.
  const query = params.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&");
  return { method, url: `${origin}${prefix.replace(/\/$/, "")}${path}?${query}` };
}

/** Runs `tollgate admin ...`; the exit code. */
export async function admin(args, { env = process.env, out = process.stdout, err = process.stderr } = {}) {
  const request = adminRequest(args);
  if (request.error) {
    err.write(`${request.error}\n`);
    return 2;
  }
  const token = env.TOLLGATE_ADMIN_TOKEN?.trim();
  if (!token) {
    err.write("set TOLLGATE_ADMIN_TOKEN to the Worker's admin token\n");
    return 2;
  }
  let res;
  try {
    res = await fetch(request.url, { method: request.method, headers: { authorization: `Bearer ${token}` }, redirect: "manual" });
  } catch (e) {
    err.write(`${request.method} ${request.url}: ${e.cause?.message ?? e.message}\n`);
    return 1;
  }
  const text = await res.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  if (res.ok && body) {
    out.write(`${JSON.stringify(body, null, 2)}\n`);
    return 0;
  }
  err.write(`${res.status}: ${body?.detail ?? text}\n`);
  return 1;
}
