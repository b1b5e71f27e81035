/**
 * extension/lib/tool-gate.ts: our tools leave pi's active ones while the hub cannot be reached
 * and come back with it, with a fake of pi's tool API (the active names, the session entries).
 */
import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import type { SessionEntry } from "@earendil-works/pi-coding-agent";
import { globalState } from "../lib/state.ts";
import { HIDDEN_ENTRY, ToolGate, type ToolsApi } from "../lib/tool-gate.ts";

/** pi's active tools and what the gate asked of it. */
class FakeTools implements ToolsApi {
	active: string[];
	sets = 0;
	entries: { customType: string; data: unknown }[] = [];
	constructor(active: string[]) {
		this.active = [...active];
	}
	getActiveTools(): string[] {
		return [...this.active];
	}
	setActiveTools(names: string[]): void {
		this.sets++;
		this.active = [...names];
	}
	appendEntry<T = unknown>(customType: string, data?: T): void {
		this.entries.push({ customType, data });
	}
	/** The entries as a session branch (what a later pi reads back). */
	branch(): SessionEntry[] {
		return this.entries.map((e, i) => ({ type: "custom", id: `e${i}`, parentId: null, timestamp: "", ...e }) as SessionEntry);
	}
}

const ALL = ["read", "bash", "telegram_attach", "edit", "telegram_message", "other_ext_tool"];

describe("ToolGate", () => {
	beforeEach(() => {
		globalState().hiddenTools = undefined;
	});

	test("hides only ours while unusable, and puts back exactly those", () => {
		const pi = new FakeTools(ALL);
		const gate = new ToolGate(pi);
		gate.set(true);
		assert.equal(pi.sets, 0, "usable and nothing hidden: pi's tools are left alone");
		gate.set(false);
		assert.deepStrictEqual(pi.active, ["read", "bash", "edit", "other_ext_tool"]);
		assert.deepStrictEqual(gate.hidden, ["telegram_attach", "telegram_message"]);
		gate.set(false);
		assert.equal(pi.sets, 1, "hidden already: no second change of the model's tools");
		pi.active.push("late_tool"); // another extension changes the loadout meanwhile
		gate.set(true);
		assert.deepStrictEqual(pi.active, ["read", "bash", "edit", "other_ext_tool", "late_tool", "telegram_attach", "telegram_message"]);
		assert.deepStrictEqual(gate.hidden, []);
		gate.set(true);
		assert.equal(pi.sets, 2);
	});

	test("a tool of ours the person turned off stays off", () => {
		const pi = new FakeTools(["read", "telegram_message"]); // telegram_attach turned off (or not allowed)
		const gate = new ToolGate(pi);
		gate.set(false);
		assert.deepStrictEqual(pi.active, ["read"]);
		gate.set(true);
		assert.deepStrictEqual(pi.active, ["read", "telegram_message"]);

		const none = new FakeTools(["read", "bash"]);
		const g2 = new ToolGate(none);
		g2.set(false);
		g2.set(true);
		assert.equal(none.sets, 0, "none of ours active: nothing to hide or show");
		assert.deepStrictEqual(none.entries, []);
	});

	test("what was hidden survives the extension instance (/new, /reload) and a later pi (the session's entry)", () => {
		const pi = new FakeTools(ALL);
		new ToolGate(pi).set(false);
		assert.deepStrictEqual(pi.entries, [{ customType: HIDDEN_ENTRY, data: { hidden: ["telegram_attach", "telegram_message"] } }]);

		// another instance in the same process, the loadout carried over by pi
		const after = new ToolGate(pi);
		after.set(true);
		assert.ok(pi.active.includes("telegram_attach") && pi.active.includes("telegram_message"));

		// a later pi resumes a session saved while they were hidden: pi restores them as removed
		const saved: SessionEntry[] = [
			...new FakeTools(ALL).branch(),
			{ type: "custom", id: "x", parentId: null, timestamp: "", customType: "someone-else", data: { hidden: ["read"] } } as SessionEntry,
			{ type: "custom", id: "y", parentId: null, timestamp: "", customType: HIDDEN_ENTRY, data: { hidden: ["telegram_message", "read", 7] } } as SessionEntry,
		];
		globalState().hiddenTools = undefined;
		const resumed = new FakeTools(["read", "bash"]);
		const g = new ToolGate(resumed);
		g.resume(saved);
		assert.deepStrictEqual(g.hidden, ["telegram_message"], "only our names, from our latest entry");
		g.set(true);
		assert.deepStrictEqual(resumed.active, ["read", "bash", "telegram_message"]);
		assert.deepStrictEqual(resumed.entries.at(-1), { customType: HIDDEN_ENTRY, data: { hidden: [] } });

		// a session whose last entry says nothing is hidden adds nothing
		const g3 = new ToolGate(new FakeTools(["read"]));
		g3.resume(resumed.branch());
		assert.deepStrictEqual(g3.hidden, []);
	});
});
