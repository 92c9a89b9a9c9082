// An app Worker limited by tollgate over RPC: `limited` checks every request
// with the TOLLGATE service binding (tollgate's rules pick what to limit:
// send it every request, as the app's own routing would miss /API/items),
// returns tollgate's 429 when limited, and settles failures-only rules
// (the login rule counts only the 401s) with the app's status.
// With Hono instead: app.use("*", tollgate((c) => c.env.TOLLGATE)), from "tollgate/hono".
import { limited, type Tollgate } from "tollgate";

type Env = { TOLLGATE: Tollgate };

export default {
  fetch: limited<Env>((env) => env.TOLLGATE, async (request) => {
    const url = new URL(request.url);
    if (url.pathname === "/login" && request.method === "POST") {
      const form = new URLSearchParams(await request.text());
      const ok = form.get("password") === "demo-password";
      return new Response(ok ? "welcome\n" : "wrong password\n", { status: ok ? 200 : 401 });
    }
    return Response.json({ app: "{{APP}}", method: request.method, path: url.pathname, query: url.search });
  }),
};
