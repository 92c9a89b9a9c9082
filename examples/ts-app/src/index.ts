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
// A streamed LLM-style answer (OpenAI's SSE: usage in the final chunk) of
// `x-tokens` tokens: tollgate reads the usage as the stream passes.
app.post("/v1/chat", (c) => {
  const tokens = Number(c.req.header("x-tokens") ?? 0);
  const events = [
    { choices: [{ index: 0, delta: { content: "Hel" } }], usage: null },
    { choices: [{ index: 0, delta: { content: "lo" } }], usage: null },
    { choices: [], usage: { prompt_tokens: 0, completion_tokens: tokens, total_tokens: tokens } },
  ];
  const encoder = new TextEncoder();
  const body = new ReadableStream({
    async start(controller) {
      for (const event of events) {
        controller.enqueue(encoder.encode(`data: ${JSON.stringify(event)}\n\n`));
        await new Promise((r) => setTimeout(r, 5));
      }
      controller.enqueue(encoder.encode("data: [DONE]\n\n"));
      controller.close();
    },
  });
  return new Response(body, { headers: { "content-type": "text/event-stream" } });
});
app.get("/", (c) => c.text("home (not limited)"));
app.get("/stats", (c) => c.json({ served }));

export default app;
