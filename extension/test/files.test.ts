/**
 * extension/lib/files.ts: files across a connection to a hub on another machine. The inbox
 * writes the hub's pieces and puts this machine's paths in the prompts; `upload` cuts a file
 * into pieces the hub puts together again.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, test } from "node:test";
import { Inbox, upload } from "../lib/files.ts";
import { FILE_PART_BYTES, type HubFile, type Upload } from "../lib/wire.ts";

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "pi-telegram-files-"));

function piece(id: string, bytes: Buffer, offset: number, size: number, done: boolean): HubFile {
	return {
		type: "file",
		id,
		name: "report.pdf",
		path: "/hub/files/in/1-report.pdf",
		size,
		offset,
		data: bytes.toString("base64"),
		done,
	};
}

describe("Inbox", () => {
	test("puts the pieces together and names the file's folder by the one here", () => {
		const dir = tmp();
		const inbox = new Inbox(dir);
		// As the hub writes it: the folder, then the files in it.
		const prompt = "see this\n[attachments] /hub/files/in\n- 1-report.pdf (document, 11 B)";
		assert.equal(inbox.onPart(piece("t1-0", Buffer.from("hello "), 0, 11, false)), undefined);
		// Not whole yet: the prompt keeps the hub's folder.
		assert.equal(inbox.localize(prompt), prompt);
		assert.equal(inbox.onPart(piece("t1-0", Buffer.from("world"), 6, 11, true)), undefined);
		const localized = inbox.localize(prompt);
		const folder = /\[attachments\] (\S+)/.exec(localized)?.[1] ?? "";
		assert.ok(folder.startsWith(dir), localized);
		const local = path.join(folder, "1-report.pdf");
		assert.equal(fs.readFileSync(local, "utf8"), "hello world");
		assert.equal(fs.statSync(local).mode & 0o777, 0o600);
		// A full path to it is this machine's too.
		assert.equal(inbox.localize("/hub/files/in/1-report.pdf"), local);
	});

	test("a piece out of order drops its file", () => {
		const dir = tmp();
		const inbox = new Inbox(dir);
		assert.equal(inbox.onPart(piece("t2-0", Buffer.from("ab"), 0, 10, false)), undefined);
		assert.match(inbox.onPart(piece("t2-0", Buffer.from("cd"), 5, 10, true)) ?? "", /out of order/);
		assert.equal(inbox.localize("/hub/files/in/1-report.pdf"), "/hub/files/in/1-report.pdf");
		assert.deepEqual(
			fs.readdirSync(dir).flatMap((d) => fs.readdirSync(path.join(dir, d))),
			[],
		);
		assert.match(inbox.onPart(piece("t3-0", Buffer.from("x"), 3, 10, true)) ?? "", /without its beginning/);
	});
});

describe("upload", () => {
	test("sends a file in pieces of at most FILE_PART_BYTES, in order, the last one done", async () => {
		const dir = tmp();
		const file = path.join(dir, "big.bin");
		const bytes = Buffer.alloc(FILE_PART_BYTES * 2 + 1000);
		for (let i = 0; i < bytes.length; i++) bytes[i] = i % 251;
		fs.writeFileSync(file, bytes);
		const sent: Upload[] = [];
		const ids = await upload([file], (m) => sent.push(m) > 0, async () => {}, undefined);
		assert.equal(ids.length, 1);
		assert.equal(sent.length, 3);
		assert.deepEqual(
			sent.map((p) => [p.offset, p.done, p.size, p.name, p.id]),
			[
				[0, false, bytes.length, "big.bin", ids[0]],
				[FILE_PART_BYTES, false, bytes.length, "big.bin", ids[0]],
				[FILE_PART_BYTES * 2, true, bytes.length, "big.bin", ids[0]],
			],
		);
		const back = Buffer.concat(sent.map((p) => Buffer.from(p.data, "base64")));
		assert.ok(back.equals(bytes));
	});

	test("an empty file is one piece; a folder or a missing file is refused", async () => {
		const dir = tmp();
		const empty = path.join(dir, "empty.txt");
		fs.writeFileSync(empty, "");
		const sent: Upload[] = [];
		await upload([empty], (m) => sent.push(m) > 0, async () => {}, undefined);
		assert.deepEqual(
			sent.map((p) => [p.offset, p.size, p.data, p.done]),
			[[0, 0, "", true]],
		);
		await assert.rejects(upload([dir], () => true, async () => {}, undefined), /is a folder/);
		await assert.rejects(upload([path.join(dir, "nope")], () => true, async () => {}, undefined), /no such file/);
		await assert.rejects(upload([empty], () => false, async () => {}, undefined), /connection .* was lost/);
	});
});
