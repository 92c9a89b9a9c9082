// Shared by the test suites that start servers of their own (tests/dev,
// tests/package): loopback ports only.
import { createServer } from "node:net";

/** A free loopback port (the OS picks it; released before use). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}
