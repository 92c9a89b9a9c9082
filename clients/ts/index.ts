// tollgate's RPC interface for TS/JS Workers, and a plain fetch-handler
// wrapper. Bind the deployed tollgate Worker as a service:
//   [[services]]
//   binding = "TOLLGATE"
//   service = "tollgate"
// then `env.TOLLGATE.check(request)` applies tollgate's own config (its
// TOLLGATE var, its counters), with the canonicalization of the standalone
// Worker. See docs/guide.md, "Adding tollgate to a zone that already has a
// Worker".

/** What `check` may read of the client that `request.cf` says (RPC does not carry `cf`). */
export interface TollgateCheckOptions {
  cf?: { country?: string; asn?: number };
}

/** `check`'s answer. */
export interface TollgateDecision {
  /** Whether the app may serve the request. */
  allowed: boolean;
  /** tollgate's own answer (429 problem+json, 503, 400) when not allowed: return it as is. */
  response?: Response;
  /** Fields to add to the app's response (`RateLimit`, `RateLimit-Policy`). */
  headers: [string, string][];
  /** Present when a failures-only rule (`counting.statuses`) applied: pass it to `settle`. */
  ticket?: string;
  /**
   * True when the settlement reads the response's body (a usage rule reading
   * an LLM's JSON or SSE answer, a `concurrency` slot held while it is sent):
   * settle with the whole response, `settle(ticket, response)`, and send the
   * response it hands back.
   */
  settleWithResponse?: boolean;
}

/** `settle`'s answer. */
export interface TollgateSettlement {
  /** `Set-Cookie` fields of trusted devices (`trusted_device` rules), for the app's response. */
  headers: [string, string][];
  /** With `settle(ticket, response)`: the response to send (its body is the one tollgate reads). */
  response?: Response;
}

/** The RPC methods of the tollgate service binding. */
export interface Tollgate {
  check(request: Request, options?: TollgateCheckOptions): Promise<TollgateDecision>;
  /**
   * Settles a ticket with the app's status (`null`: no answer, the held
   * slots are released). `headers`: the app's response headers, read for
   * `success_identity_header`. Unsettled tickets hold their slot until the
   * rule's `reservation_ttl`.
   */
  /*
   * Or with the app's whole `Response` in place of the status (no
   * `headers`): settled as tollgate in front of an origin settles its
   * answer, usage read from the JSON or SSE body as it streams, a
   * `concurrency` slot held until it is sent, the settlement once the body
   * is done. Send the `response` it returns (RPC moved the body).
   */
  settle(ticket: string, status: number | Response | null, headers?: Record<string, string>): Promise<TollgateSettlement>;
}

/** `request.cf`'s country and ASN, for `check`. */
export function clientOf(request: Request): TollgateCheckOptions {
  const cf = (request as { cf?: { country?: unknown; asn?: unknown } }).cf;
  return {
    cf: {
      country: typeof cf?.country === "string" ? cf.country : undefined,
      asn: typeof cf?.asn === "number" ? cf.asn : undefined,
    },
  };
}

/** `response` with `fields` appended (a WebSocket upgrade, 101, is returned as is). */
export function withFields(response: Response, fields: [string, string][]): Response {
  if (fields.length === 0 || response.status === 101) return response;
  const out = new Response(response.body, response);
  for (const [name, value] of fields) out.headers.append(name, value);
  return out;
}

/**
 * Settles `decision`'s ticket, if any, with `response` (`null`: none): the
 * response to send (the one tollgate hands back when it reads the body) and
 * the fields to add to it.
 */
export async function settleWith(
  tollgate: Tollgate,
  decision: TollgateDecision,
  response: Response | null,
): Promise<[Response | null, [string, string][]]> {
  if (decision.ticket === undefined) return [response, decision.headers];
  if (response && decision.settleWithResponse) {
    const settled = await tollgate.settle(decision.ticket, response);
    return [settled.response ?? response, [...decision.headers, ...settled.headers]];
  }
  const headers = response ? Object.fromEntries(response.headers) : undefined;
  const settled = await tollgate.settle(decision.ticket, response ? response.status : null, headers);
  return [response, [...decision.headers, ...settled.headers]];
}

/**
 * A fetch handler limited by tollgate: `export default { fetch: limited((env) => env.TOLLGATE, handler) }`.
 * The request is checked (a clone: the handler still reads the body), then
 * served, settled and given the RateLimit fields.
 */
export function limited<Env>(
  binding: (env: Env) => Tollgate,
  handler: (request: Request, env: Env, ctx: ExecutionContext) => Response | Promise<Response>,
): (request: Request, env: Env, ctx: ExecutionContext) => Promise<Response> {
  return async (request, env, ctx) => {
    const tollgate = binding(env);
    const decision = await tollgate.check(request.clone(), clientOf(request));
    if (decision.response) return decision.response;
    let response: Response;
    try {
      response = await handler(request, env, ctx);
    } catch (e) {
      await settleWith(tollgate, decision, null);
      throw e;
    }
    const [sent, fields] = await settleWith(tollgate, decision, response);
    return withFields(sent ?? response, fields);
  };
}
