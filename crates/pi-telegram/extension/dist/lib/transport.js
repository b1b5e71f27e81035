import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import * as tls from "node:tls";
import { agentDir } from "./paths.js";
import { isJson } from "./wire.js";
const KEEPALIVE_MS = 30_000;
export function localTarget(paths) {
    return { kind: "local", socket: paths.socket };
}
export function isRemote(t) {
    return t.kind !== "local";
}
export function describeTarget(t) {
    switch (t.kind) {
        case "local":
            return t.socket;
        case "forwarded":
            return `${t.socket} (forwarded)`;
        case "tls":
            return `${t.host.includes(":") ? `[${t.host}]` : t.host}:${t.port} (TLS)`;
    }
}
export function resolveTarget(profile, paths) {
    const file = path.join(agentDir(), "telegram.json");
    let cfg;
    try {
        cfg = JSON.parse(fs.readFileSync(file, "utf8").replace(/^\uFEFF/, ""));
    }
    catch {
        return localTarget(paths);
    }
    const profiles = isJson(cfg) ? cfg.profiles : undefined;
    const prof = isJson(profiles) ? profiles[profile] : undefined;
    const remote = isJson(prof) ? prof.remote : undefined;
    if (!isJson(remote) || (remote.connect === undefined && remote.socket === undefined))
        return localTarget(paths);
    const key = `profiles.${profile}.remote`;
    const bad = (what) => ({ kind: "invalid", message: `${key} in ${file}: ${what}` });
    if (remote.connect !== undefined && remote.socket !== undefined)
        return bad("has both connect and socket; keep one");
    const secret = remoteSecret(remote.secret, file, paths.secret);
    if ("message" in secret)
        return bad(secret.message);
    if (remote.socket !== undefined) {
        if (typeof remote.socket !== "string" || !path.isAbsolute(remote.socket))
            return bad("socket must be an absolute path");
        return { kind: "forwarded", socket: remote.socket, secret: secret.value };
    }
    const addr = typeof remote.connect === "string" ? parseHostPort(remote.connect.trim()) : undefined;
    if (!addr)
        return bad('connect must be "host:port" (an IPv6 address in brackets: "[::1]:7391")');
    const fingerprint = typeof remote.fingerprint === "string" ? normalizeFingerprint(remote.fingerprint) : undefined;
    if (!fingerprint) {
        return bad('fingerprint must be the hub certificate\'s "sha256:<64 hex digits>" (`pi-telegram remote-config` on the hub\'s machine prints it)');
    }
    return { kind: "tls", host: addr.host, port: addr.port, fingerprint, secret: secret.value };
}
function remoteSecret(value, configFile, secretFile) {
    const from = value !== undefined ? configFile : secretFile;
    let text;
    if (value !== undefined) {
        if (typeof value !== "string" || value.trim() === "")
            return { message: "secret must be a non-empty string" };
        text = value.trim();
    }
    else {
        try {
            text = fs.readFileSync(secretFile, "utf8").trim();
        }
        catch {
            return { message: `has no secret: add the hub's "secret" (\`pi-telegram remote-config\` prints it), or copy the hub's hub.secret to ${secretFile}` };
        }
        if (text === "")
            return { message: `${secretFile} is empty: copy the hub's hub.secret there` };
    }
    try {
        if ((fs.statSync(from).mode & 0o077) !== 0) {
            return { message: `${from} holds the hub secret and others can read it: run chmod 600 ${from}` };
        }
    }
    catch (e) {
        return { message: `cannot check who can read ${from}: ${e instanceof Error ? e.message : String(e)}` };
    }
    return { value: text };
}
export function parseHostPort(s) {
    const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(s) ?? /^([^:[\]\s]+):(\d{1,5})$/.exec(s);
    if (!m)
        return undefined;
    const port = Number(m[2]);
    if (!(port >= 1 && port <= 65535))
        return undefined;
    return { host: m[1], port };
}
export function normalizeFingerprint(s) {
    const hex = s
        .trim()
        .replace(/^sha256:/i, "")
        .replace(/[:\s]/g, "")
        .toLowerCase();
    return /^[0-9a-f]{64}$/.test(hex) ? hex : undefined;
}
export function openTransport(t, h) {
    if (t.kind !== "tls") {
        const s = net.createConnection(t.socket);
        s.on("connect", () => h.ready());
        return s;
    }
    const s = tls.connect({ host: t.host, port: t.port, rejectUnauthorized: false, minVersion: "TLSv1.3" });
    s.setKeepAlive(true, KEEPALIVE_MS);
    s.on("secureConnect", () => {
        const raw = s.getPeerCertificate()?.raw;
        const seen = raw ? crypto.createHash("sha256").update(raw).digest("hex") : undefined;
        if (seen !== t.fingerprint) {
            s.end();
            setTimeout(() => s.destroy(), 2000).unref();
            h.untrusted(`the server at ${describeTarget(t)} is not the hub this pi trusts: its certificate is sha256:${seen ?? "(none)"}, ` +
                `the pinned one sha256:${t.fingerprint}. Nothing was sent. If the hub's certificate was made anew, ` +
                `copy the new fingerprint from \`pi-telegram remote-config\` on the hub's machine.`);
            return;
        }
        h.ready();
    });
    return s;
}
