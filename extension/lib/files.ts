/**
 * Files across a connection to a hub on another machine (its welcome said `files: "bytes"`): the
 * hub's disk is not this one, so a path names nothing on the other side.
 *
 * - In: the files the person sent come as `file` pieces before the prompt that names them by
 *   their path on the hub's disk (the prompt names their folder, then each file in it); each
 *   is written here under its own name, in a private folder that stands for that folder of
 *   the hub's (under the system's temporary folder), and the prompt gets this machine's
 *   folder in place of the hub's.
 * - Out: `telegram_attach` sends each file as `upload` pieces, then names them in the call.
 *
 * Writes and reads are synchronous and a piece at a time (at most FILE_PART_BYTES): pieces are
 * handled in the order they came, so a file is whole before the prompt after it is read.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { createHash, randomUUID } from "node:crypto";

import { FILE_PART_BYTES, type HubFile, type Upload } from "./wire.ts";

/** Where files the person sent are kept on this machine. */
export function inboxDir(): string {
	const uid = typeof process.getuid === "function" ? process.getuid() : "user";
	return path.join(os.tmpdir(), `pi-telegram-${uid}`, "in");
}

/** This machine's folder for the hub's folder `hubDir`. */
function localDir(inbox: string, hubDir: string): string {
	return path.join(inbox, createHash("sha256").update(hubDir).digest("hex").slice(0, 16));
}

/** A file name safe on this machine: no folders, nothing hidden. */
function safeName(name: string): string {
	const base = name.replace(/[/\\\0]/g, "_").replace(/^\.+/, "");
	return base === "" ? "file" : base.slice(0, 120);
}

interface Incoming {
	fd: number;
	local: string;
	written: number;
}

/** The files the hub sends, and the paths the next prompts name them by. */
export class Inbox {
	private readonly dir: string;
	private open = new Map<string, Incoming>();
	/** The hub's folders -> this machine's, for folders of files received whole. */
	private received = new Map<string, string>();

	constructor(dir = inboxDir()) {
		this.dir = dir;
	}

	/** One piece; a piece out of order (or a write that fails) drops its file, which the
	 * prompt then names by the hub's path. Returns the reason when it did. */
	onPart(p: HubFile): string | undefined {
		try {
			let f = this.open.get(p.id);
			if (!f) {
				if (p.offset !== 0) return `a piece of ${p.name} came without its beginning`;
				const dir = localDir(this.dir, path.dirname(p.path));
				fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
				// Its name on the hub's disk, which the prompt uses (that of the person's file
				// when the hub's path has none).
				const local = path.join(dir, safeName(path.basename(p.path) || p.name));
				f = { fd: fs.openSync(local, "w", 0o600), local, written: 0 };
				this.open.set(p.id, f);
			}
			if (p.offset !== f.written) throw new Error(`a piece of ${p.name} came out of order`);
			const bytes = Buffer.from(p.data, "base64");
			fs.writeSync(f.fd, bytes);
			f.written += bytes.length;
			if (p.done) {
				fs.closeSync(f.fd);
				this.open.delete(p.id);
				this.received.set(path.dirname(p.path), path.dirname(f.local));
			}
			return undefined;
		} catch (e) {
			const f = this.open.get(p.id);
			if (f) {
				this.open.delete(p.id);
				try {
					fs.closeSync(f.fd);
					fs.rmSync(f.local, { force: true });
				} catch {
					// already gone
				}
			}
			return e instanceof Error ? e.message : String(e);
		}
	}

	/** `text` with the hub's folder of every file received replaced by this machine's (the
	 * longest first: one folder may hold another). */
	localize(text: string): string {
		let out = text;
		const folders = [...this.received].sort((a, b) => b[0].length - a[0].length);
		for (const [hub, local] of folders) out = out.split(hub).join(local);
		return out;
	}
}

/** Sends `paths` (absolute, on this machine) as upload pieces; returns their ids. Throws with
 * the reason when a file cannot be read or a piece cannot be written. */
export async function upload(
	paths: string[],
	send: (msg: Upload) => boolean,
	drained: () => Promise<void>,
	signal: AbortSignal | undefined,
): Promise<string[]> {
	const ids: string[] = [];
	for (const p of paths) {
		let fd: number;
		try {
			fd = fs.openSync(p, "r");
		} catch (e) {
			const code = (e as NodeJS.ErrnoException).code;
			throw new Error(code === "ENOENT" ? `${p}: no such file` : `${p} could not be read: ${String(e)}`);
		}
		try {
			const st = fs.fstatSync(fd);
			if (st.isDirectory()) throw new Error(`${p} is a folder; attach the files in it`);
			if (!st.isFile()) throw new Error(`${p} is not a regular file: only files are sent`);
			const id = randomUUID();
			const name = path.basename(p);
			const buf = Buffer.alloc(FILE_PART_BYTES);
			let offset = 0;
			for (;;) {
				if (signal?.aborted) throw new Error("telegram_attach was cancelled");
				// The size it had when opened: a file that grows meanwhile is sent as it was.
				const want = Math.min(buf.length, st.size - offset);
				let filled = 0;
				while (filled < want) {
					const n = fs.readSync(fd, buf, filled, want - filled, offset + filled);
					if (n === 0) break;
					filled += n;
				}
				const done = filled < want || offset + filled >= st.size;
				const piece: Upload = {
					type: "upload",
					id,
					name,
					size: st.size,
					offset,
					data: buf.subarray(0, filled).toString("base64"),
					done,
				};
				if (!send(piece)) throw new Error("the connection to the pi-telegram hub was lost while sending a file");
				offset += filled;
				if (done) break;
				await drained();
			}
			ids.push(id);
		} finally {
			fs.closeSync(fd);
		}
	}
	return ids;
}
