/**
 * The whole extension (index.ts) in each of its modes, with a fake pi (event handlers, tools,
 * commands, the session's entries) and, where a hub is needed, a mock hub on a Unix socket in a
 * temporary agent dir: which runs get the Telegram note, that the telegram-bridge skill is
 * offered once per process, and that the tools follow the link.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, test } from "node:test";
import piTelegram from "../index.ts";
import { NOTE_SECTION, TELEGRAM_NOTE } from "../lib/note.ts";
import { SKILL_NAME } from "../lib/skill.ts";

const OURS = ["telegram_attach", "telegram_message"];
type Handler = (event: unknown, ctx: unknown) => unknown;

/** The part of pi's extension API the extension uses, recording what it is asked. */
class FakePi {
	handlers = new Map<string, Handler[]>();
	active = ["read", "bash", "edit", "write"];
	commands: { name: string; source: string }[] = [];
	entries: { customType: string; data: unknown }[] = [];
	sent: unknown[] = [];

	on(event: string, handler: Handler): () => void {
		const list = this.handlers.get(event) ?? [];
		list.push(handler);
		this.handlers.set(event, list);
		return () => {
			const i = list.indexOf(handler);
			if (i >= 0) list.splice(i, 1);
		};
	}
	registerTool(def: { name: string }): void {
		if (!this.active.includes(def.name)) this.active.push(def.name);
	}
	registerCommand(): void {}
	getCommands(): { name: string; source: string }[] {
		return this.commands;
	}
	getActiveTools(): string[] {
		return [...this.active];
	}
	setActiveTools(names: string[]): void {
		this.active = [...names];
	}
	appendEntry(customType: string, data?: unknown): void {
		this.entries.push({ customType, data });
	}
	sendUserMessage(content: unknown): void {
		this.sent.push(content);
	}
	getSessionName(): string | undefined {
		return undefined;
	}
	getThinkingLevel(): string {
		return "off";
	}

	/** Runs the handlers of `event` as pi does (in order), returning their results. */
	async emit(event: string, payload: Record<string, unknown> = {}, ctx: unknown = this.ctx()): Promise<unknown[]> {
		const out: unknown[] = [];
		for (const h of [...(this.handlers.get(event) ?? [])]) out.push(await h({ type: event, ...payload }, ctx));
		return out;
	}

	ctx(mode = "rpc"): unknown {
		return {
			mode,
			cwd: process.cwd(),
			hasUI: false,
			ui: { setStatus() {}, notify() {} },
			isIdle: () => true,
			hasPendingMessages: () => false,
			sessionManager: { getBranch: () => [], getSessionId: () => "s1", getSessionFile: () => undefined },
			model: undefined,
		};
	}

	/** A run about to start: its prompt sections after every handler. */
	async startRun(prompt = "hello"): Promise<Record<string, string>> {
		const sections: Record<string, string> = {};
		await this.emit("before_agent_start", { systemPrompt: "SYSTEM", systemPromptOptions: { sections }, messageType: "user", prompt });
		return sections;
	}

	ours(): string[] {
		return this.active.filter((n) => OURS.includes(n));
	}
}

/** A mock hub: welcomes every hello, keeps the sockets to send them lines. */
class MockHub {
	server: net.Server;
	socks: net.Socket[] = [];
	hellos: Record<string, unknown>[] = [];
	constructor(socket: string) {
		this.server = net.createServer((s) => {
			this.socks.push(s);
			let buf = "";
			s.on("data", (d) => {
				buf += d.toString();
				for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
					const m = JSON.parse(buf.slice(0, i)) as Record<string, unknown>;
					buf = buf.slice(i + 1);
					if (m.type !== "hello") continue;
					this.hellos.push(m);
					s.write(`${JSON.stringify({ type: "welcome", protocol: 1, hub_pid: process.pid, instance_id: "i1", hub_version: m.version })}\n`);
				}
			});
			s.on("error", () => undefined);
		});
		this.server.listen(socket);
	}
	send(line: unknown): void {
		for (const s of this.socks) s.write(`${JSON.stringify(line)}\n`);
	}
	close(): Promise<void> {
		for (const s of this.socks) s.destroy();
		return new Promise((resolve) => this.server.close(() => resolve()));
	}
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, ok: () => boolean, ms = 5000): Promise<void> {
	const end = Date.now() + ms;
	while (!ok()) {
		if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
		await sleep(20);
	}
}

const ENV = ["PI_CODING_AGENT_DIR", "PI_TELEGRAM_CHILD", "PI_TELEGRAM_CHILD_TOKEN", "PI_TELEGRAM_PROFILE", "PI_TELEGRAM_BIN"];

describe("the extension", () => {
	let dir: string;
	let saved: Record<string, string | undefined>;
	let pis: FakePi[];

	beforeEach(() => {
		saved = Object.fromEntries(ENV.map((k) => [k, process.env[k]]));
		for (const k of ENV) delete process.env[k];
		dir = fs.mkdtempSync(path.join(os.tmpdir(), "pi-telegram-ext-"));
		process.env.PI_CODING_AGENT_DIR = dir;
		process.env.PI_TELEGRAM_BIN = path.join(dir, "no-such-hub"); // never start a real one
		(globalThis as Record<string, unknown>).__piTelegram = undefined;
		pis = [];
	});

	afterEach(async () => {
		for (const pi of pis) await pi.emit("session_shutdown", { reason: "quit" });
		for (const k of ENV) {
			if (saved[k] === undefined) delete process.env[k];
			else process.env[k] = saved[k];
		}
		fs.rmSync(dir, { recursive: true, force: true });
	});

	const load = (): FakePi => {
		const pi = new FakePi();
		pis.push(pi);
		piTelegram(pi as never);
		return pi;
	};

	const offered = async (pi: FakePi): Promise<unknown[]> =>
		(await pi.emit("resources_discover", { cwd: process.cwd(), reason: "startup" })).filter((r) => r !== undefined);

	test("offers the skill once per process, and not when pi has it already (the package's listing)", async () => {
		const pi = load();
		const second = load(); // the same extension from another path (installed and -e)
		const [first] = await offered(pi);
		const paths = (first as { skillPaths: string[] }).skillPaths;
		assert.equal(paths.length, 1);
		assert.equal(path.basename(paths[0] ?? ""), SKILL_NAME);
		const skill = fs.readFileSync(path.join(paths[0] ?? "", "SKILL.md"), "utf8");
		assert.match(skill, new RegExp(`^---\\nname: ${SKILL_NAME}\\ndescription: .*\\[telegram\\]`, "s"));
		assert.deepStrictEqual(await offered(second), [], "the second copy stays out of the way");
		assert.equal(second.handlers.size, 0);

		pi.commands = [{ name: `skill:${SKILL_NAME}`, source: "skill" }];
		assert.deepStrictEqual(await offered(pi), [], "pi lists it from the package already");
	});

	test("a pi that is not connected: runs get no note, and the tools are hidden", async () => {
		const pi = load();
		await pi.emit("session_start", { reason: "startup" }, pi.ctx("print"));
		assert.deepStrictEqual(pi.ours(), OURS, "registered and active until a run starts");
		assert.deepStrictEqual(await pi.startRun(), {}, "typed in pi: nothing added");
		assert.deepStrictEqual(pi.ours(), [], "no hub to reach: hidden");
		assert.deepStrictEqual(pi.active, ["read", "bash", "edit", "write"], "the other tools untouched");
	});

	test("connected: a hub turn's run gets the note, a run typed in pi does not; the tools follow the link", async () => {
		const profileDir = path.join(dir, "telegram", "default");
		fs.mkdirSync(profileDir, { recursive: true });
		fs.writeFileSync(path.join(profileDir, "hub.secret"), "s3cret\n", { mode: 0o600 });
		fs.writeFileSync(path.join(dir, "telegram", "connections.json"), JSON.stringify({ version: 1, projects: { [process.cwd()]: { profile: "default" } } }));
		const pi = load();
		pi.active = pi.active.filter((n) => !OURS.includes(n));
		pi.entries.push({ customType: "pi-telegram-tools", data: { hidden: OURS } });
		const ctx = { ...(pi.ctx() as object), sessionManager: { getBranch: () => pi.entries.map((e) => ({ type: "custom", ...e })), getSessionId: () => "s1", getSessionFile: () => undefined } };
		const hub = new MockHub(path.join(profileDir, "hub.sock"));
		try {
			await pi.emit("session_start", { reason: "startup" }, ctx);
			await until("the welcome", () => hub.hellos.length === 1);
			await until("the tools shown on the welcome", () => pi.ours().length === 2);
			assert.deepStrictEqual(pi.ours(), OURS, "hidden by an earlier pi in this session: back with the hub");

			assert.deepStrictEqual(await pi.startRun("typed"), {}, "typed in pi: no note");
			hub.send({ type: "prompt", turn_id: "t1", text: "hi from telegram", context: "[telegram]\n\n" });
			await until("the hub turn handed to pi", () => pi.sent.length === 1);
			assert.deepStrictEqual(pi.sent[0], "[telegram]\n\nhi from telegram", "the hub's lines before the words");
			assert.deepStrictEqual(await pi.startRun("[telegram]\n\nhi from telegram"), { [NOTE_SECTION]: TELEGRAM_NOTE });
			await pi.emit("agent_start");
			assert.deepStrictEqual(await pi.startRun("typed again"), {}, "the next run is not the hub turn's");
			assert.deepStrictEqual(pi.ours(), OURS);

			await hub.close();
			await sleep(100);
			await pi.startRun("typed while the hub is away");
			assert.deepStrictEqual(pi.ours(), [], "the hub gone: hidden at the next run");
		} finally {
			await hub.close().catch(() => undefined);
		}
	});

	test("the footer shows what the hub says of Telegram: out of reach, then connected again", async () => {
		const profileDir = path.join(dir, "telegram", "default");
		fs.mkdirSync(profileDir, { recursive: true });
		fs.writeFileSync(path.join(profileDir, "hub.secret"), "s3cret\n", { mode: 0o600 });
		fs.writeFileSync(path.join(dir, "telegram", "connections.json"), JSON.stringify({ version: 1, projects: { [process.cwd()]: { profile: "default" } } }));
		const pi = load();
		const footers: (string | undefined)[] = [];
		const ctx = { ...(pi.ctx() as object), ui: { setStatus: (_key: string, text: string | undefined) => footers.push(text), notify() {} } };
		const hub = new MockHub(path.join(profileDir, "hub.sock"));
		const last = () => footers[footers.length - 1];
		try {
			await pi.emit("session_start", { reason: "startup" }, ctx);
			await until("the welcome", () => hub.hellos.length === 1);
			// The hub's own words (crates/hub/src/outgoing/texts.rs `footer`), sent as set_status.
			hub.send({ type: "set_status", text: "telegram: connected" });
			await until("connected", () => last() === "telegram: connected");
			hub.send({ type: "set_status", text: "telegram: hub cannot reach Telegram since 14:05 · 2 queued" });
			await until("out of reach", () => last() === "telegram: hub cannot reach Telegram since 14:05 · 2 queued");
			hub.send({ type: "set_status", text: "telegram: connected" });
			await until("back", () => last() === "telegram: connected");
		} finally {
			await hub.close();
		}
	});

	test("PI_TELEGRAM_CHILD=1 (inert): every run gets the note, the skill is offered, no tools", async () => {
		process.env.PI_TELEGRAM_CHILD = "1";
		const pi = load();
		await pi.emit("session_start", { reason: "startup" });
		assert.equal((await offered(pi)).length, 1);
		assert.deepStrictEqual(await pi.startRun(), { [NOTE_SECTION]: TELEGRAM_NOTE });
		assert.deepStrictEqual(await pi.startRun("again"), { [NOTE_SECTION]: TELEGRAM_NOTE });
		assert.deepStrictEqual(pi.ours(), []);
	});

	test("PI_TELEGRAM_CHILD_TOKEN (tools child): every run gets the note; the tools are hidden while its hub is unreachable", async () => {
		process.env.PI_TELEGRAM_CHILD = "1";
		process.env.PI_TELEGRAM_CHILD_TOKEN = "tok";
		const pi = load();
		await pi.emit("session_start", { reason: "startup" });
		assert.equal((await offered(pi)).length, 1);
		const first = await pi.startRun();
		assert.deepStrictEqual(first, { [NOTE_SECTION]: TELEGRAM_NOTE });
		assert.deepStrictEqual(pi.ours(), OURS, "the first attempt is still under way: it may well work");
		await sleep(100); // the attempt finds no hub
		assert.deepStrictEqual(await pi.startRun("again"), { [NOTE_SECTION]: TELEGRAM_NOTE });
		assert.deepStrictEqual(pi.ours(), [], "no hub: hidden");

		const profileDir = path.join(dir, "telegram", "default");
		fs.mkdirSync(profileDir, { recursive: true });
		fs.writeFileSync(path.join(profileDir, "hub.secret"), "s3cret\n", { mode: 0o600 });
		const hub = new MockHub(path.join(profileDir, "hub.sock"));
		try {
			await until("the tools hello", () => hub.hellos.length === 1);
			assert.equal(hub.hellos[0]?.role, "tools");
			await until("the tools shown on the welcome", () => pi.ours().length === 2);
		} finally {
			await hub.close();
		}
	});
});
