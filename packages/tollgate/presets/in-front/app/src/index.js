// A stand-in app: echoes each request as JSON, and answers POST /login 401
// unless the password is "demo-password". tollgate's rules limit /api/* per
// IP and failed logins per account before a request gets here.
export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/login" && request.method === "POST") {
      const form = new URLSearchParams(await request.text());
      const ok = form.get("password") === "demo-password";
      return new Response(ok ? "welcome\n" : "wrong password\n", { status: ok ? 200 : 401 });
    }
    return Response.json({ app: "{{APP}}", method: request.method, path: url.pathname, query: url.search });
  },
};
