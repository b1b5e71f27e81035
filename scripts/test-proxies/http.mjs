// A real HTTP proxy for the hub's network tests: TooTallNate's `proxy` package (forwards plain
// HTTP requests, tunnels CONNECT), on a loopback address only, never on every interface as its
// own CLI would listen. scripts/install-test-deps.sh copies this file next to the package and
// writes bin/http-proxy to run it on Node 22.
// Usage: http-proxy [PORT] [HOST]  (0 or nothing: a free port). Prints "listening HOST PORT" once
// it listens. Every request it takes is logged to stderr by the package itself (DEBUG=proxy*,
// set here when unset; its namespaces are "proxy ← ← ←" and the like): "proxy ← ← ← CONNECT
// 127.0.0.1:4321 HTTP/1.1", "proxy ← ← ← POST http://… HTTP/1.1".
process.env.DEBUG ??= "proxy*";
const http = await import("node:http");
const { createProxy } = await import("proxy");

const port = Number(process.argv[2] ?? 0);
const host = process.argv[3] ?? "127.0.0.1";
const server = createProxy(http.createServer());
server.on("error", (e) => {
  console.error(`http-proxy: ${e.message}`);
  process.exit(1);
});
server.listen(port, host, () => {
  console.log(`listening ${host} ${server.address().port}`);
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
