// tollgate as Hono middleware: `app.use("/api/*", tollgate((c) => c.env.TOLLGATE))`.
import type { Context, MiddlewareHandler } from "hono";
import { clientOf, settleWith, withFields, type Tollgate } from "./index";

export function tollgate(binding: (c: Context) => Tollgate): MiddlewareHandler {
  return async (c, next) => {
    const tg = binding(c);
    const decision = await tg.check(c.req.raw.clone(), clientOf(c.req.raw));
    if (decision.response) return decision.response;
    await next();
    const [sent, fields] = await settleWith(tg, decision, c.res);
    c.res = withFields(sent ?? c.res, fields);
  };
}
