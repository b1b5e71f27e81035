import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { createHash, randomUUID } from "node:crypto";
import { FILE_PART_BYTES } from "./wire.js";
export function inboxDir() {
    const uid = typeof process.getuid === "function" ? process.getuid() : "user";
    return path.join(os.tmpdir(), `pi-telegram-${uid}`, "in");
}
function localDir(inbox, hubDir) {
    return path.join(inbox, createHash("sha256").update(hubDir).digest("hex").slice(0, 16));
}
function safeName(name) {
    const base = name.replace(/[/\\\0]/g, "_").replace(/^\.+/, "");
    return base === "" ? "file" : base.slice(0, 120);
}
export class Inbox {
    dir;
    open = new Map();
    received = new Map();
    constructor(dir = inboxDir()) {
        this.dir = dir;
    }
    onPart(p) {
        try {
            let f = this.open.get(p.id);
            if (!f) {
                if (p.offset !== 0)
                    return `a piece of ${p.name} came without its beginning`;
                const dir = localDir(this.dir, path.dirname(p.path));
                fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
                const local = path.join(dir, safeName(path.basename(p.path) || p.name));
                f = { fd: fs.openSync(local, "w", 0o600), local, written: 0 };
                this.open.set(p.id, f);
            }
            if (p.offset !== f.written)
                throw new Error(`a piece of ${p.name} came out of order`);
            const bytes = Buffer.from(p.data, "base64");
            fs.writeSync(f.fd, bytes);
            f.written += bytes.length;
            if (p.done) {
                fs.closeSync(f.fd);
                this.open.delete(p.id);
                this.received.set(path.dirname(p.path), path.dirname(f.local));
            }
            return undefined;
        }
        catch (e) {
            const f = this.open.get(p.id);
            if (f) {
                this.open.delete(p.id);
                try {
                    fs.closeSync(f.fd);
                    fs.rmSync(f.local, { force: true });
                }
                catch {
                }
            }
            return e instanceof Error ? e.message : String(e);
        }
    }
    localize(text) {
        let out = text;
        const folders = [...this.received].sort((a, b) => b[0].length - a[0].length);
        for (const [hub, local] of folders)
            out = out.split(hub).join(local);
        return out;
    }
}
export async function upload(paths, send, drained, signal) {
    const ids = [];
    for (const p of paths) {
        let fd;
        try {
            fd = fs.openSync(p, "r");
        }
        catch (e) {
            const code = e.code;
            throw new Error(code === "ENOENT" ? `${p}: no such file` : `${p} could not be read: ${String(e)}`);
        }
        try {
            const st = fs.fstatSync(fd);
            if (st.isDirectory())
                throw new Error(`${p} is a folder; attach the files in it`);
            if (!st.isFile())
                throw new Error(`${p} is not a regular file: only files are sent`);
            const id = randomUUID();
            const name = path.basename(p);
            const buf = Buffer.alloc(FILE_PART_BYTES);
            let offset = 0;
            for (;;) {
                if (signal?.aborted)
                    throw new Error("telegram_attach was cancelled");
                const want = Math.min(buf.length, st.size - offset);
                let filled = 0;
                while (filled < want) {
                    const n = fs.readSync(fd, buf, filled, want - filled, offset + filled);
                    if (n === 0)
                        break;
                    filled += n;
                }
                const done = filled < want || offset + filled >= st.size;
                const piece = {
                    type: "upload",
                    id,
                    name,
                    size: st.size,
                    offset,
                    data: buf.subarray(0, filled).toString("base64"),
                    done,
                };
                if (!send(piece))
                    throw new Error("the connection to the pi-telegram hub was lost while sending a file");
                offset += filled;
                if (done)
                    break;
                await drained();
            }
            ids.push(id);
        }
        finally {
            fs.closeSync(fd);
        }
    }
    return ids;
}
