// Peer B: the Workers Rate Limiting binding (env.LIMITER, configured by
// scripts/bench as { simple: { limit: 10, period: 60 } }) on the same rule as
// tollgate's shipped config: per CF-Connecting-IP on /api/example?mode=heavy.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/api/example" && url.searchParams.get("mode") === "heavy") {
      const key = request.headers.get("cf-connecting-ip") ?? "";
      const { success } = await env.LIMITER.limit({ key });
      if (!success) {
        return new Response("Too Many Requests\n", { status: 429, headers: { "retry-after": "60" } });
      }
    }
    return fetch(request);
  },
};
