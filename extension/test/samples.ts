/**
 * The shared sample lines of the wire protocol (crates/wire/tests/samples/wire-lines.json: its
 * `about` says what a case holds), as the extension's tests read them. The Rust crate's test
 * (crates/wire/tests/samples.rs) and the smoke harness (extension/dev/smoke.py) read the same file.
 */
import { readFileSync } from "node:fs";

export interface SampleCase {
	name: string;
	from: "hub" | "extension";
	first?: boolean;
	line?: string;
	line_hex?: string;
	pad_to_bytes?: number;
	expect: Expectation;
	rust?: Expectation;
	ts?: Expectation;
	py?: Expectation;
	why?: string;
}

export type Expectation = "ignored" | "blank" | { rejected: string } | { message: unknown; notes?: string[]; left_out?: string[] };

const FILE = new URL("../../crates/wire/tests/samples/wire-lines.json", import.meta.url);
const PAD = "@PAD@";

export function sampleCases(): SampleCase[] {
	const file = JSON.parse(readFileSync(FILE, "utf8")) as { cases: SampleCase[] };
	return file.cases;
}

/** The case's line as bytes (without its newline), padded, and the x's that replace `@PAD@`. */
export function sampleBytes(c: SampleCase): { bytes: Buffer; pad: string | undefined } {
	const bytes = c.line_hex !== undefined ? Buffer.from(c.line_hex, "hex") : Buffer.from(c.line ?? "", "utf8");
	if (c.pad_to_bytes === undefined) return { bytes, pad: undefined };
	const at = bytes.indexOf(PAD);
	if (at < 0) throw new Error(`${c.name}: pad_to_bytes without ${PAD} in the line`);
	const pad = "x".repeat(c.pad_to_bytes - (bytes.length - PAD.length));
	return { bytes: Buffer.concat([bytes.subarray(0, at), Buffer.from(pad), bytes.subarray(at + PAD.length)]), pad };
}

/** `v` with `@PAD@` in its strings replaced by `pad`. */
export function padded(v: unknown, pad: string | undefined): unknown {
	if (pad === undefined) return v;
	if (typeof v === "string") return v.replaceAll(PAD, pad);
	if (Array.isArray(v)) return v.map((x) => padded(x, pad));
	if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, padded(x, pad)]));
	return v;
}

/**
 * `v` as JSON data (undefined fields left out), with every lone UTF-16 surrogate (in strings and
 * keys) as U+FFFD, and whether there was one.
 */
export function asJson(v: unknown): { value: unknown; lone: boolean } {
	let lone = false;
	const fix = (s: string): string => {
		const w = Buffer.from(s, "utf8").toString("utf8"); // UTF-8 has no lone halves: they become U+FFFD
		if (w !== s) lone = true;
		return w;
	};
	const walk = (x: unknown): unknown => {
		if (typeof x === "string") return fix(x);
		if (Array.isArray(x)) return x.map(walk);
		if (x && typeof x === "object") return Object.fromEntries(Object.entries(x).map(([k, y]) => [fix(k), walk(y)]));
		return x;
	};
	const value = walk(JSON.parse(JSON.stringify(v)));
	return { value, lone };
}

/** A value for a failure message: long strings (the padded lines) shortened. */
export function shown(v: unknown): string {
	const s = JSON.stringify(v) ?? String(v);
	return s.length <= 600 ? s : `${s.slice(0, 600)}… (${s.length} characters)`;
}
