/**
 * extension/lib/wire.ts: the line framing (`LineReader`), the decoding of what the hub sends
 * (`decodeHandshake`, `decodeHubMessage`) on the shared sample lines, and `encodeLine`.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
	type ClientMessage,
	decodeHandshake,
	decodeHubMessage,
	decodeImages,
	encodeLine,
	type Json,
	LineReader,
	MAX_HUB_LINE_BYTES,
	MAX_LINE_BYTES,
	wellFormed,
} from "../lib/wire.ts";
import { asJson, type Expectation, padded, type SampleCase, sampleBytes, sampleCases, shown } from "./samples.ts";

const MiB = 1024 * 1024;

/** Every message and the error of pushing `chunks` into one reader. */
function readAll(chunks: (Buffer | string)[]): { messages: Json[]; error?: string } {
	const reader = new LineReader();
	const messages: Json[] = [];
	for (const c of chunks) {
		const r = reader.push(c);
		messages.push(...r.messages);
		if (r.error) return { messages, error: r.error };
	}
	return { messages };
}

/** What the reader's errors mean, in the sample file's terms. */
const REJECTIONS: Record<string, string> = {
	"a line is longer than 64 MiB": "too_long",
	"a line is not JSON": "not_json",
	"a line is not a JSON object": "not_object",
};

/** What the extension makes of a line from the hub, in the sample file's terms. */
function readFromHub(c: SampleCase, bytes: Buffer): unknown {
	const input = Buffer.concat([bytes, Buffer.from("\n")]);
	// in two chunks, cut in the middle (inside a character, for some)
	const half = Math.floor(input.length / 2);
	const { messages, error } = readAll([input.subarray(0, half), input.subarray(half)]);
	if (error !== undefined) return { rejected: REJECTIONS[error] ?? error };
	if (messages.length === 0) return "blank";
	assert.equal(messages.length, 1, "one line, one message");
	const decoded = c.first ? decodeHandshake(messages[0]) : decodeHubMessage(messages[0]);
	if (decoded === undefined) return "ignored";
	const { value, lone } = asJson(decoded);
	return lone ? { message: value, notes: ["lone surrogate"] } : { message: value };
}

/** What the extension writes for a line's message: JSON.parse of `encodeLine`'s line. */
function writtenByTheExtension(c: SampleCase, bytes: Buffer): unknown {
	const line = encodeLine(JSON.parse(bytes.toString("utf8")) as ClientMessage);
	assert.ok(line.endsWith("\n") && !line.slice(0, -1).includes("\n"), "one line");
	assert.ok(Buffer.byteLength(line) <= MAX_LINE_BYTES, "within the limit");
	const { value, lone } = asJson(JSON.parse(line));
	assert.equal(lone, false, `${c.name}: encodeLine wrote half a character`);
	return { message: value };
}

describe("the shared sample lines", () => {
	const cases = sampleCases();
	test("are there, named once per direction", () => {
		assert.ok(cases.length >= 100, `${cases.length} cases`);
		const names = cases.map((c) => `${c.from}/${c.name}`);
		assert.equal(new Set(names).size, names.length, "a name is taken twice");
		for (const c of cases) assert.ok(c.from === "hub" || c.from === "extension", `${c.name}: from ${String(c.from)}`);
	});
	for (const c of cases) {
		const want: Expectation | undefined = c.ts ?? (c.from === "hub" ? c.expect : undefined);
		if (want === undefined) continue; // a line from the extension without a ts: only the hub reads it
		test(`${c.from}/${c.name}`, () => {
			const { bytes, pad } = sampleBytes(c);
			const got = c.from === "hub" ? readFromHub(c, bytes) : writtenByTheExtension(c, bytes);
			const expected = padded(want, pad);
			// compared whole, shown short (some lines are 64 MiB)
			try {
				assert.deepStrictEqual(got, expected);
			} catch {
				assert.fail(`wanted ${shown(expected)}\ngot    ${shown(got)}`);
			}
		});
	}
});

describe("LineReader", () => {
	test("splits a stream into lines across chunk boundaries", () => {
		const reader = new LineReader();
		assert.deepStrictEqual(reader.push('{"a":1}\n{"b":'), { messages: [{ a: 1 }] });
		assert.deepStrictEqual(reader.push("2}"), { messages: [] }, "a partial line waits for its newline");
		assert.deepStrictEqual(reader.push('\n{"c":3}\n{"d":4}\n'), { messages: [{ b: 2 }, { c: 3 }, { d: 4 }] });
	});

	test("reads a line one byte at a time, characters split across chunks", () => {
		const text = "café 😀 中 \u2028 end";
		const line = Buffer.from(`${JSON.stringify({ type: "notify", text })}\n`);
		const chunks = [...line].map((b) => Buffer.from([b]));
		const { messages, error } = readAll(chunks);
		assert.equal(error, undefined);
		assert.deepStrictEqual(messages, [{ type: "notify", text }]);
	});

	test("ignores a \\r before the newline and blank lines; never splits on U+2028/2029", () => {
		const { messages, error } = readAll(['{"a":"x\u2028y\u2029z"}\r\n', "\n", "  \t\r\n", '{"b":1}\n']);
		assert.equal(error, undefined);
		assert.deepStrictEqual(messages, [{ a: "x\u2028y\u2029z" }, { b: 1 }]);
	});

	test("returns the lines before a bad one with the error", () => {
		assert.deepStrictEqual(readAll(['{"a":1}\nnot json\n{"b":2}\n']), { messages: [{ a: 1 }], error: "a line is not JSON" });
		for (const v of ["[1]", '"x"', "null", "5", "true"]) {
			assert.deepStrictEqual(readAll([`${v}\n`]), { messages: [], error: "a line is not a JSON object" }, v);
		}
	});

	test("takes a line of just under 64 MiB and refuses one of 64 MiB", () => {
		const line = (bytes: number) => {
			const head = '{"t":"';
			const tail = '"}';
			return head + "x".repeat(bytes - head.length - tail.length) + tail;
		};
		const under = readAll([`${line(MAX_HUB_LINE_BYTES - 1)}\n`]);
		assert.equal(under.error, undefined);
		assert.equal((under.messages[0]?.t as string).length, MAX_HUB_LINE_BYTES - 1 - 8);
		assert.deepStrictEqual(readAll([`${line(MAX_HUB_LINE_BYTES)}\n`]), { messages: [], error: "a line is longer than 64 MiB" });
	});

	test("refuses a partial line as soon as it reaches 64 MiB, without waiting for its newline", () => {
		const reader = new LineReader();
		const chunk = Buffer.alloc(30 * MiB, "x");
		assert.deepStrictEqual(reader.push('{"t":"'), { messages: [] });
		assert.deepStrictEqual(reader.push(chunk), { messages: [] });
		assert.deepStrictEqual(reader.push(chunk), { messages: [] });
		assert.deepStrictEqual(reader.push(chunk), { messages: [], error: "a line is longer than 64 MiB" });
	});

	test("counts a partial line's limit in bytes, not in UTF-16 units", () => {
		const reader = new LineReader();
		// 32 Mi two-byte characters: half the limit in units, the whole limit in bytes
		const r = reader.push(Buffer.from("é".repeat(MAX_HUB_LINE_BYTES / 2)));
		assert.deepStrictEqual(r, { messages: [], error: "a line is longer than 64 MiB" });
	});
});

describe("decoding", () => {
	test("decodeImages keeps the images and counts the rest", () => {
		const img = { type: "image", data: "aGk=", mimeType: "image/png", extra: 1 };
		assert.deepStrictEqual(decodeImages([img, { type: "image", data: 1, mimeType: "x" }, null, "x"]), {
			images: [{ type: "image", data: "aGk=", mimeType: "image/png" }],
			dropped: 3,
		});
		assert.deepStrictEqual(decodeImages(undefined), { images: [], dropped: 0 });
		assert.deepStrictEqual(decodeImages({ type: "image" }), { images: [], dropped: 0 });
	});

	test("decodeHandshake answers only welcome and refused; decodeHubMessage neither", () => {
		const welcome = { type: "welcome", protocol: 1, hub_pid: 1, instance_id: "i1", hub_version: "0.1.0" };
		assert.equal(decodeHubMessage(welcome), undefined);
		assert.equal(decodeHubMessage({ type: "refused", code: "secret", message: "no" }), undefined);
		assert.deepStrictEqual(
			decodeHandshake(welcome),
			{ ...welcome, store_id: null, files: "paths" },
			"an older hub says no store id, and files go as paths",
		);
		assert.deepStrictEqual(decodeHandshake({ ...welcome, store_id: "ab12" }), { ...welcome, store_id: "ab12", files: "paths" });
		assert.deepStrictEqual(decodeHandshake({ ...welcome, files: "bytes" }), { ...welcome, store_id: null, files: "bytes" });
		assert.deepStrictEqual(decodeHandshake({ ...welcome, files: "carrier pigeon" }), { ...welcome, store_id: null, files: "paths" });
		assert.equal(decodeHandshake({ type: "error", message: "closing" }), undefined);
	});
});

describe("encodeLine", () => {
	test("writes one line of JSON with its newline", () => {
		const msg: ClientMessage = { type: "ack", turn_id: "t1", disposition: "started" };
		const line = encodeLine(msg);
		assert.equal(line, `${JSON.stringify(msg)}\n`);
	});

	test("writes every lone surrogate as U+FFFD, keeps pairs and escaped backslashes", () => {
		const text = ["lone \ud800", "\udc00", "\ude00\ud83d", "\ud83d\ud83d\ude00", "\ud83d\ude00", "\\ud800", "\\\ud800"];
		const line = encodeLine({ type: "event", turn_id: null, event: { type: "x", text, ["k\ud800"]: [{ t: "\udbff" }] } });
		assert.ok(!/(?<!\\)(\\\\)*\\ud[89a-f]/.test(line), line);
		const back = JSON.parse(line) as { event: Json };
		assert.deepStrictEqual(back.event, {
			type: "x",
			text: ["lone \ufffd", "\ufffd", "\ufffd\ufffd", "\ufffd😀", "😀", "\\ud800", "\\\ufffd"],
			"k\ufffd": [{ t: "\ufffd" }],
		});
		assert.equal(Buffer.from(line).toString(), line, "well-formed: UTF-8 changes nothing");
	});

	test("wellFormed leaves escaped backslashes alone", () => {
		assert.equal(wellFormed('"\\\\ud800"'), '"\\\\ud800"');
		assert.equal(wellFormed('"\\ud800"'), '"\\ufffd"');
		assert.equal(wellFormed('"\\\\\\ud800"'), '"\\\\\\ufffd"');
		assert.equal(wellFormed('"plain"'), '"plain"');
	});

	test("a line of exactly 1 MiB goes as it is; one byte more is cut to fit", () => {
		const event = (n: number) => ({ type: "event" as const, turn_id: null, event: { type: "x", pad: "x".repeat(n) } });
		const overhead = Buffer.byteLength(`${JSON.stringify(event(0))}\n`);
		const exact = encodeLine(event(MAX_LINE_BYTES - overhead));
		assert.equal(Buffer.byteLength(exact), MAX_LINE_BYTES);
		assert.equal(exact, `${JSON.stringify(event(MAX_LINE_BYTES - overhead))}\n`);
		const over = encodeLine(event(MAX_LINE_BYTES - overhead + 1));
		const pad = (JSON.parse(over) as { event: { pad: string } }).event.pad;
		assert.equal(pad, `${"x".repeat(200_000)}…[${MAX_LINE_BYTES - overhead + 1 - 200_000} characters cut]`);
	});

	test("cuts many long strings further until the line fits", () => {
		const parts = Array.from({ length: 100 }, (_, i) => `${i}:${"y".repeat(60_000)}`);
		const line = encodeLine({ type: "event", turn_id: "t1", event: { type: "tool_execution_end", parts } });
		assert.ok(Buffer.byteLength(line) <= MAX_LINE_BYTES);
		const back = JSON.parse(line) as { turn_id: string; event: { parts: string[] } };
		assert.equal(back.turn_id, "t1");
		assert.equal(back.event.parts.length, 100);
		assert.ok(back.event.parts.every((p, i) => p.startsWith(`${i}:y`) && p.endsWith(" characters cut]")));
		assert.ok(back.event.parts[0].length <= 10_000 + 40, "cut to 10 000 characters");
	});

	test("what no cutting makes fit becomes the fallback, or the type alone", () => {
		const many = { type: "event" as const, turn_id: null, event: { type: "x", list: Array.from({ length: 20_000 }, () => "z".repeat(100)) } };
		assert.equal(encodeLine(many), '{"type":"event","truncated":true}\n');
		const fallback = (): ClientMessage => ({ type: "event", turn_id: null, event: { type: "x", cut: true } });
		assert.equal(encodeLine(many, fallback), '{"type":"event","turn_id":null,"event":{"type":"x","cut":true}}\n');
	});

	test("a message JSON cannot write becomes its type and unserializable", () => {
		const cyclic: Json = { type: "x" };
		cyclic.self = cyclic;
		assert.equal(encodeLine({ type: "event", turn_id: null, event: cyclic }), '{"type":"event","unserializable":true}\n');
		assert.equal(encodeLine({ type: "event", turn_id: null, event: { n: 1n } }), '{"type":"event","unserializable":true}\n');
	});
});
