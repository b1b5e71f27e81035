export const RECEIVED_CAP = 200;
const KEY = "__piTelegram";
export function globalState() {
    const g = globalThis;
    let s = g[KEY];
    if (!s || s.version !== 1) {
        s = {
            version: 1,
            received: [],
            completed: [],
            queue: [],
            starting: undefined,
            active: undefined,
            lastAutoStart: 0,
        };
        g[KEY] = s;
    }
    return s;
}
export function markReceived(s, turnId) {
    s.received.push(turnId);
    if (s.received.length > RECEIVED_CAP)
        s.received.splice(0, s.received.length - RECEIVED_CAP);
}
export function addCompleted(s, done) {
    const i = s.completed.findIndex((d) => d.turn_id === done.turn_id);
    if (i >= 0)
        s.completed.splice(i, 1);
    s.completed.push(done);
}
export function ackCompleted(s, turnId) {
    s.completed = s.completed.filter((d) => d.turn_id !== turnId);
}
export function claimProcess(isStale) {
    const s = globalState();
    if (s.owner && !s.owner.isStale())
        return undefined;
    const owner = { isStale };
    s.owner = owner;
    return () => {
        if (s.owner === owner)
            s.owner = undefined;
    };
}
