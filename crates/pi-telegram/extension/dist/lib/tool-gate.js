import { globalState } from "./state.js";
export const TOOL_NAMES = ["telegram_attach", "telegram_message"];
const OURS = new Set(TOOL_NAMES);
export const HIDDEN_ENTRY = "pi-telegram-tools";
export class ToolGate {
    pi;
    G = globalState();
    constructor(pi) {
        this.pi = pi;
    }
    resume(branch) {
        for (let i = branch.length - 1; i >= 0; i--) {
            const e = branch[i];
            if (e?.type !== "custom" || e.customType !== HIDDEN_ENTRY)
                continue;
            const data = e.data;
            const names = Array.isArray(data?.hidden) ? data.hidden.filter((n) => typeof n === "string" && OURS.has(n)) : [];
            this.G.hiddenTools = union(this.G.hiddenTools ?? [], names);
            return;
        }
    }
    get hidden() {
        return this.G.hiddenTools ?? [];
    }
    set(usable) {
        if (usable)
            this.show();
        else
            this.hide();
    }
    hide() {
        const active = this.pi.getActiveTools();
        const ours = active.filter((n) => OURS.has(n));
        if (ours.length === 0)
            return;
        this.G.hiddenTools = union(this.hidden, ours);
        this.pi.setActiveTools(active.filter((n) => !OURS.has(n)));
        this.pi.appendEntry(HIDDEN_ENTRY, { hidden: this.G.hiddenTools });
    }
    show() {
        const back = this.hidden;
        if (back.length === 0)
            return;
        this.G.hiddenTools = [];
        const active = this.pi.getActiveTools();
        this.pi.setActiveTools(union(active, back));
        this.pi.appendEntry(HIDDEN_ENTRY, { hidden: [] });
    }
}
function union(a, b) {
    return [...new Set([...a, ...b])];
}
