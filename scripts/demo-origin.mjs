// A tiny demo origin for scripts/dev: answers 200 with a JSON echo of the
// method, path and query of every request. Loopback only.
import { createServer } from "node:http";

const port = Number(process.env.ORIGIN_PORT ?? 8788);
createServer((req, res) => {
  const url = new URL(req.url, "http://origin.local");
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = JSON.stringify({
      origin: "tollgate demo origin",
      method: req.method,
      path: url.pathname,
      query: Object.fromEntries([...url.searchParams.keys()].map((k) => [k, url.searchParams.getAll(k)])),
      body_bytes: Buffer.concat(chunks).length,
    });
    res.writeHead(200, { "content-type": "application/json" });
    res.end(body + "\n");
  });
}).listen(port, "127.0.0.1", () => console.log(`demo origin listening on http://127.0.0.1:${port}`));
