// A real SOCKS5 proxy for the hub's network tests: the `simple-socks` package, on a loopback
// address only. scripts/install-test-deps.sh copies this file next to the package and writes
// bin/socks-proxy to run it on Node 22.
// Usage: socks-proxy [PORT] [HOST]  (0 or nothing: a free port). Prints "listening HOST PORT" once
// it listens, and to stderr one line per connection the package made for a client
// ("socks CONNECT 127.0.0.1:4321", from its proxyConnect event).
import socks5 from "simple-socks";

const port = Number(process.argv[2] ?? 0);
const host = process.argv[3] ?? "127.0.0.1";
const server = socks5.createServer();
server.on("proxyConnect", (info) => console.error(`socks CONNECT ${info.address}:${info.port}`));
server.on("proxyError", (e) => console.error(`socks error: ${e.message}`));
server.on("error", (e) => {
  console.error(`socks-proxy: ${e.message}`);
  process.exit(1);
});
server.listen(port, host, () => {
  console.log(`listening ${host} ${server.address().port}`);
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
