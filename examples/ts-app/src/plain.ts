// The same app without a framework: the fetch handler wrapped by `limited`.
import { limited, type Tollgate } from "../../../clients/ts/index";

type Env = { TOLLGATE: Tollgate };

export default {
  fetch: limited<Env>((env) => env.TOLLGATE, async (request) => {
    const url = new URL(request.url);
    if (url.pathname === "/login" && request.method === "POST") {
      const { password } = (await request.json()) as { password: string };
      return new Response(password === "right" ? "welcome" : "wrong password", { status: password === "right" ? 200 : 401 });
    }
    return Response.json({ path: url.pathname });
  }),
} satisfies ExportedHandler<Env>;
