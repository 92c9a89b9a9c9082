// An app Worker that limits its own routes with tollgate over RPC: Hono
// middleware in front of every route; tollgate's rules limit /api/* and /login. tollgate runs as its own Worker (see
// tollgate.wrangler.toml here) with no routes, bound as TOLLGATE.
import { Hono } from "hono";
import { tollgate } from "../../../clients/ts/hono";
import type { Tollgate } from "../../../clients/ts/index";

type Env = { TOLLGATE: Tollgate };

const app = new Hono<{ Bindings: Env }>();
// Every request goes through check; tollgate's rules pick what to limit
// (Hono's own "/api/*" would miss /API/items, which tollgate canonicalizes).
app.use("*", tollgate((c) => (c.env as Env).TOLLGATE));

let served = 0;
app.get("/api/items", (c) => c.json({ items: ["a", "b"], served: ++served }));
app.post("/login", async (c) => {
  const { password } = await c.req.json<{ email: string; password: string }>();
  return password === "right" ? c.text("welcome") : c.text("wrong password", 401);
});
app.get("/", (c) => c.text("home (not limited)"));
app.get("/stats", (c) => c.json({ served }));

export default app;
