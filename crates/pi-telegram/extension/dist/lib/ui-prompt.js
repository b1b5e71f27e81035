export class UiPromptWatch {
    s;
    out;
    waiting;
    constructor(s, out) {
        this.s = s;
        this.out = out;
    }
    register(pi) {
        pi.on("ui_prompt_start", this.s.problems.guard("telling the hub pi waits at the terminal", (event) => {
            this.waiting = { kind: String(event.kind), title: typeof event.title === "string" ? event.title : undefined };
            this.tell();
        }));
        pi.on("ui_prompt_end", this.s.problems.guard("telling the hub pi no longer waits", () => {
            if (!this.waiting)
                return;
            this.waiting = undefined;
            this.out.send({ type: "ui_prompt", waiting: false });
        }));
    }
    afterWelcome() {
        if (this.waiting)
            this.tell();
    }
    tell() {
        const w = this.waiting;
        if (!w)
            return;
        this.out.send({ type: "ui_prompt", waiting: true, kind: w.kind, ...(w.title ? { title: w.title } : {}) });
    }
}
