//! Versioned migrations. `PRAGMA user_version` is the schema version; each migration runs once,
//! in order, in the same transaction that bumps the version.

use std::path::Path;

use rusqlite::Connection;

use crate::Cached;
use crate::{Result, StoreError};

/// Migrations, version `i + 1` at index `i`. Never edit a released one: append.
const MIGRATIONS: &[&str] = &[
    // 1: journal, offset and other small values, owner pairing, outbox, flood waits, held owner
    // messages, incidents, the lease. Later issues add threads, queues and instances.
    r"
    CREATE TABLE kv (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) STRICT;

    CREATE TABLE journal (
        update_id   INTEGER PRIMARY KEY,
        kind        TEXT NOT NULL,
        raw         TEXT NOT NULL,
        received_ms INTEGER NOT NULL,
        handled_ms  INTEGER,
        outcome     TEXT
    ) STRICT;
    CREATE INDEX journal_pending ON journal(update_id) WHERE handled_ms IS NULL;

    CREATE TABLE pairing (
        id            INTEGER PRIMARY KEY CHECK (id = 1),
        code_hash     TEXT NOT NULL,
        created_ms    INTEGER NOT NULL,
        expires_ms    INTEGER NOT NULL,
        attempts_left INTEGER NOT NULL,
        state         TEXT NOT NULL CHECK (state IN ('open', 'used', 'dead'))
    ) STRICT;

    CREATE TABLE outbox (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,
        created_ms       INTEGER NOT NULL,
        updated_ms       INTEGER NOT NULL,
        chat_id          INTEGER NOT NULL,
        thread_id        INTEGER,
        method           TEXT NOT NULL,
        params           TEXT NOT NULL,
        purpose          TEXT NOT NULL,
        source_update_id INTEGER,
        resend_if_unknown INTEGER NOT NULL DEFAULT 0,
        state            TEXT NOT NULL CHECK (state IN ('pending', 'sending', 'sent', 'ambiguous', 'failed')),
        attempts         INTEGER NOT NULL DEFAULT 0,
        not_before_ms    INTEGER NOT NULL DEFAULT 0,
        sent_message_id  INTEGER,
        last_error       TEXT,
        handling         TEXT
    ) STRICT;
    CREATE INDEX outbox_open ON outbox(state, id) WHERE state IN ('pending', 'sending');
    CREATE UNIQUE INDEX outbox_one_per_cause ON outbox(source_update_id, purpose)
        WHERE source_update_id IS NOT NULL;

    CREATE TABLE flood_waits (
        scope         TEXT PRIMARY KEY,
        until_ms      INTEGER NOT NULL,
        retry_after_s INTEGER NOT NULL,
        recorded_ms   INTEGER NOT NULL
    ) STRICT;

    CREATE TABLE held (
        update_id   INTEGER PRIMARY KEY REFERENCES journal(update_id),
        chat_id     INTEGER NOT NULL,
        thread_id   INTEGER,
        message_id  INTEGER NOT NULL,
        received_ms INTEGER NOT NULL
    ) STRICT;

    CREATE TABLE incidents (
        id      INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms   INTEGER NOT NULL,
        context TEXT NOT NULL,
        message TEXT NOT NULL
    ) STRICT;

    CREATE TABLE lease (
        id          INTEGER PRIMARY KEY CHECK (id = 1),
        epoch       INTEGER NOT NULL,
        holder_pid  INTEGER NOT NULL,
        acquired_ms INTEGER NOT NULL
    ) STRICT;
    ",
    // 2: pi instances, turns (owner messages become turns; kept messages move over), which bot
    // message belongs to which instance, opaque callback tokens.
    r"
    CREATE TABLE instances (
        id           TEXT PRIMARY KEY,
        identity     TEXT NOT NULL,
        transport    TEXT NOT NULL CHECK (transport IN ('shim', 'rpc', 'echo')),
        pid          INTEGER,
        cwd          TEXT NOT NULL,
        label        TEXT NOT NULL,
        session_id   TEXT,
        state        TEXT NOT NULL CHECK (state IN ('idle', 'busy', 'gone')),
        connected_ms INTEGER NOT NULL,
        gone_ms      INTEGER,
        gone_reason  TEXT
    ) STRICT;
    CREATE INDEX instances_live ON instances(identity) WHERE state != 'gone';

    CREATE TABLE turns (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,
        source_update_id INTEGER UNIQUE,
        chat_id          INTEGER NOT NULL,
        thread_id        INTEGER,
        message_id       INTEGER,
        identity         TEXT,
        text             TEXT NOT NULL,
        state            TEXT NOT NULL CHECK (state IN ('queued', 'dispatched', 'acked', 'done', 'interrupted', 'cancelled')),
        instance_id      TEXT,
        instance_pid     INTEGER,
        transport        TEXT,
        created_ms       INTEGER NOT NULL,
        dispatched_ms    INTEGER,
        acked_ms         INTEGER,
        done_ms          INTEGER,
        result_text      TEXT,
        aborted          INTEGER,
        error            TEXT
    ) STRICT;
    CREATE INDEX turns_open ON turns(identity, id) WHERE state IN ('queued', 'dispatched', 'acked');

    CREATE TABLE message_routes (
        chat_id    INTEGER NOT NULL,
        message_id INTEGER NOT NULL,
        identity   TEXT NOT NULL,
        turn_id    INTEGER,
        PRIMARY KEY (chat_id, message_id)
    ) STRICT;

    CREATE TABLE callbacks (
        token      TEXT PRIMARY KEY,
        owner      INTEGER NOT NULL,
        action     TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL
    ) STRICT;

    ALTER TABLE outbox ADD COLUMN identity TEXT;
    ALTER TABLE outbox ADD COLUMN turn_id INTEGER;

    INSERT INTO turns(source_update_id, chat_id, thread_id, message_id, identity, text, state, created_ms)
        SELECT h.update_id, h.chat_id, h.thread_id, h.message_id, NULL,
               coalesce(json_extract(j.raw, '$.message.text'), json_extract(j.raw, '$.message.caption'), ''),
               'queued', h.received_ms
        FROM held h JOIN journal j ON j.update_id = h.update_id ORDER BY h.update_id;
    DROP TABLE held;
    ",
    // 3: Threaded Mode: bindings (identity -> topic), durable intents written before
    // createForumTopic, recovery evidence (not epoch-fenced), topic cleanups with their proof.
    r"
    CREATE TABLE bindings (
        identity          TEXT PRIMARY KEY,
        chat_id           INTEGER NOT NULL,
        thread_id         INTEGER NOT NULL,
        slot              TEXT NOT NULL,
        title             TEXT NOT NULL,
        state             TEXT NOT NULL CHECK (state IN ('active', 'offline', 'lost')),
        instance_id       TEXT,
        cwd               TEXT NOT NULL,
        epoch             INTEGER NOT NULL,
        created_ms        INTEGER NOT NULL,
        updated_ms        INTEGER NOT NULL,
        offline_since_ms  INTEGER
    ) STRICT;
    CREATE UNIQUE INDEX bindings_thread ON bindings(chat_id, thread_id);
    CREATE UNIQUE INDEX bindings_slot ON bindings(slot);

    CREATE TABLE intents (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        identity    TEXT NOT NULL UNIQUE,
        instance_id TEXT,
        chat_id     INTEGER NOT NULL,
        cwd         TEXT NOT NULL,
        slot        TEXT NOT NULL UNIQUE,
        title       TEXT NOT NULL,
        epoch       INTEGER NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('in-flight', 'ambiguous')),
        thread_id   INTEGER,
        created_ms  INTEGER NOT NULL,
        detail      TEXT
    ) STRICT;

    CREATE TABLE evidence (
        intent_id   INTEGER PRIMARY KEY,
        identity    TEXT NOT NULL,
        epoch       INTEGER NOT NULL,
        chat_id     INTEGER NOT NULL,
        thread_id   INTEGER NOT NULL,
        recorded_ms INTEGER NOT NULL
    ) STRICT;

    CREATE TABLE cleanups (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id     INTEGER NOT NULL,
        thread_id   INTEGER NOT NULL,
        proof       TEXT NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('pending', 'done')),
        attempts    INTEGER NOT NULL DEFAULT 0,
        next_ms     INTEGER NOT NULL DEFAULT 0,
        last_error  TEXT,
        created_ms  INTEGER NOT NULL,
        done_ms     INTEGER
    ) STRICT;
    CREATE UNIQUE INDEX cleanups_open ON cleanups(chat_id, thread_id) WHERE state = 'pending';
    ",
    // 4: a turn without an identity says what it waits for: 'any' (it arrived while no pi was
    // live: the first that connects takes it) or 'choice' (the person was asked: only a tap
    // assigns it). Turns from before are 'choice' when a chooser was sent for them. Outbox rows
    // count the copies sent again after an unknown outcome.
    r"
    ALTER TABLE turns ADD COLUMN waits TEXT CHECK (waits IN ('any', 'choice'));
    UPDATE turns SET waits = CASE
        WHEN EXISTS (SELECT 1 FROM outbox o WHERE o.source_update_id = turns.source_update_id
                     AND o.purpose = 'reply:chooser') THEN 'choice'
        ELSE 'any' END
    WHERE identity IS NULL;
    ALTER TABLE outbox ADD COLUMN resent INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX instances_by_identity ON instances(identity, connected_ms);
    ",
    // 5: a row may carry a delivery plan (JSON): the messages it is sent as, in alternatives
    // tried in order when Telegram refuses one (rich -> HTML -> plain), and where it is.
    r"
    ALTER TABLE outbox ADD COLUMN plan TEXT;
    ",
    // 6: the queue: each waiting turn has a lane (priority first, FIFO within a lane, a move
    // goes to the tail of the other lane) and a skip flag (dropped without a model turn when
    // dispatch reaches it); turns are found by the message they came from (reactions, edits).
    r"
    ALTER TABLE turns ADD COLUMN lane TEXT NOT NULL DEFAULT 'normal'
        CHECK (lane IN ('normal', 'priority'));
    ALTER TABLE turns ADD COLUMN lane_seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE turns ADD COLUMN skip INTEGER NOT NULL DEFAULT 0;
    UPDATE turns SET lane_seq = id;
    CREATE INDEX turns_by_message ON turns(chat_id, message_id);

    -- What the person asked of a pi beyond prompts (abort, compact, a menu, a model...), kept
    -- until the conductor carried it out: a crash between the tap and the effect loses nothing.
    CREATE TABLE controls (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,
        source_update_id INTEGER,
        kind             TEXT NOT NULL,
        identity         TEXT,
        turn_id          INTEGER,
        chat_id          INTEGER NOT NULL,
        thread_id        INTEGER,
        message_id       INTEGER,
        params           TEXT NOT NULL DEFAULT '{}',
        state            TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'done')),
        created_ms       INTEGER NOT NULL,
        done_ms          INTEGER
    ) STRICT;
    CREATE UNIQUE INDEX controls_once ON controls(source_update_id, kind)
        WHERE source_update_id IS NOT NULL;
    CREATE INDEX controls_open ON controls(id) WHERE state != 'done';
    ",
    // 7: what is not plain text. A turn may wait for its files (downloads, speech-to-text) or
    // for the rest of its group (an album, a forward and its comment, a long text Telegram
    // split): `ready = 0` until then; `context` is what pi gets after the person's words
    // (attachments, the replied-to text, forwards), composed when the turn becomes ready.
    r"
    ALTER TABLE turns ADD COLUMN ready INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE turns ADD COLUMN context TEXT;
    ALTER TABLE turns ADD COLUMN group_key TEXT;
    ALTER TABLE turns ADD COLUMN gather_until_ms INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX turns_preparing ON turns(id) WHERE ready = 0 AND state = 'queued';
    CREATE INDEX turns_by_group ON turns(group_key) WHERE group_key IS NOT NULL;

    -- Files that came with a turn: downloaded from the journal's updates like everything else
    -- (a crash mid-download downloads again; the turn waits until each file is settled).
    CREATE TABLE files (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,
        turn_id          INTEGER NOT NULL,
        source_update_id INTEGER,
        seq              INTEGER NOT NULL,
        origin           TEXT NOT NULL CHECK (origin IN ('message', 'forward')),
        kind             TEXT NOT NULL,
        file_id          TEXT NOT NULL,
        file_unique_id   TEXT,
        name             TEXT,
        mime             TEXT,
        size             INTEGER,
        state            TEXT NOT NULL CHECK (state IN ('pending', 'saved', 'refused', 'failed')),
        path             TEXT,
        error            TEXT,
        output           TEXT,
        attempts         INTEGER NOT NULL DEFAULT 0,
        not_before_ms    INTEGER NOT NULL DEFAULT 0,
        created_ms       INTEGER NOT NULL,
        done_ms          INTEGER
    ) STRICT;
    CREATE UNIQUE INDEX files_once ON files(source_update_id, seq)
        WHERE source_update_id IS NOT NULL;
    CREATE INDEX files_of_turn ON files(turn_id, id);
    ",
    // 8: files pi sends (`telegram_attach`) during a Telegram turn wait here for the turn's
    // answer, then go out right after it.
    r"
    CREATE TABLE attachments (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        turn_id    INTEGER NOT NULL,
        path       TEXT NOT NULL,
        name       TEXT NOT NULL,
        mime       TEXT,
        size       INTEGER NOT NULL,
        caption    TEXT,
        state      TEXT NOT NULL CHECK (state IN ('waiting', 'queued')),
        created_ms INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX attachments_waiting ON attachments(turn_id) WHERE state = 'waiting';
    ",
    // 9: headless pi instances the hub started, so that a restarted hub starts them again on
    // their pi sessions.
    r"
    CREATE TABLE spawned (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        cwd          TEXT NOT NULL,
        env          TEXT NOT NULL DEFAULT '[]',
        session_file TEXT,
        instance_id  TEXT,
        state        TEXT NOT NULL CHECK (state IN ('running', 'exited', 'closed', 'lost')),
        detail       TEXT,
        created_ms   INTEGER NOT NULL,
        updated_ms   INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX spawned_running ON spawned(id) WHERE state = 'running';
    ",
    // 10: retention (`retention.rs`). A reply route remembers when it was last recorded or
    // replied to, so pruning keeps the routes in use (routes from before stay NULL until the
    // first retention pass stamps them: they get a full period). Each batch finds its old rows
    // through an index on their age (partial: only rows that may go), so a batch costs what it
    // removes, not a scan of the table, and a pass that finds nothing costs nothing. A new
    // turn's place in its lane is max(lane_seq) + 1: one lookup with an index, not a scan of
    // every kept turn.
    r"
    ALTER TABLE message_routes ADD COLUMN used_ms INTEGER;
    CREATE INDEX message_routes_used ON message_routes(used_ms);
    CREATE INDEX callbacks_expiry ON callbacks(expires_ms);
    CREATE INDEX journal_handled ON journal(handled_ms) WHERE handled_ms IS NOT NULL;
    CREATE INDEX outbox_finished ON outbox(updated_ms) WHERE state IN ('sent', 'failed');
    CREATE INDEX turns_finished ON turns(done_ms)
        WHERE state IN ('done', 'cancelled', 'interrupted');
    CREATE INDEX controls_finished ON controls(done_ms) WHERE state = 'done';
    CREATE INDEX attachments_of_turn ON attachments(turn_id);
    CREATE INDEX turns_lane_seq ON turns(lane_seq);
    ",
    // 11: wrong pairing codes are counted per sender, so a stranger's guesses never spend the
    // owner's attempts: a sender who used up theirs is refused (told once, then ignored), and
    // the code stays open for everyone else until it expires. `pairing.attempts_left` is from
    // now on what each sender may try (codes opened before keep the number they had left).
    // Cleared whenever a code is opened or used.
    r"
    CREATE TABLE pairing_attempts (
        user_id  INTEGER PRIMARY KEY,
        wrong    INTEGER NOT NULL,
        first_ms INTEGER NOT NULL,
        last_ms  INTEGER NOT NULL
    ) STRICT;
    ",
    // 12: a row keeps what it sends once: `delivery`, the plan whose messages each name their
    // method (`method` beside the parameters), where `method`, `params` and `plan` held the
    // message to send now twice (as parameters and inside the plan). A plan this build reads
    // (every alternative with a name, a method and messages; `alt` and `part` pointing at a
    // message) keeps its alternatives, its messages taking their alternative's method and the
    // current one being the row's `params` (where the row is now: a topic closed or replaced
    // changed only those). Any other row (no plan, or one of an older shape the sender ignored)
    // becomes a plan of its one message, marked a repeat when it was sent again, which is how
    // the sender treated it.
    r"
    ALTER TABLE outbox ADD COLUMN delivery TEXT NOT NULL DEFAULT '{}';
    UPDATE outbox SET delivery = json_set(
        json_object(
            'alternatives', json((
                SELECT json_group_array(json(json_object(
                    'name', json_extract(a.value, '$.name'),
                    'messages', json((
                        SELECT json_group_array(
                            json(json_set(m.value, '$.method', json_extract(a.value, '$.method'))))
                        FROM (SELECT value FROM json_each(a.value, '$.messages') ORDER BY key) m)))))
                FROM (SELECT value FROM json_each(outbox.plan, '$.alternatives') ORDER BY key) a)),
            'alt', json_extract(plan, '$.alt'),
            'part', json_extract(plan, '$.part'),
            'repeat', json_extract(plan, '$.repeat')),
        printf('$.alternatives[%d].messages[%d]', json_extract(plan, '$.alt'),
               json_extract(plan, '$.part')),
        json(json_set(params, '$.method', method)))
    WHERE plan IS NOT NULL AND json_valid(plan)
      AND json_type(plan, '$.alt') = 'integer' AND json_type(plan, '$.part') = 'integer'
      AND json_type(plan, '$.alternatives') = 'array'
      AND json_type(plan, printf('$.alternatives[%d].messages[%d]', json_extract(plan, '$.alt'),
                                 json_extract(plan, '$.part'))) = 'object'
      AND NOT EXISTS (SELECT 1 FROM json_each(outbox.plan, '$.alternatives') a
                      WHERE json_type(a.value, '$.name') IS NOT 'text'
                         OR json_type(a.value, '$.method') IS NOT 'text'
                         OR json_type(a.value, '$.messages') IS NOT 'array'
                         OR EXISTS (SELECT 1 FROM json_each(a.value, '$.messages') m
                                    WHERE m.type IS NOT 'object'));
    UPDATE outbox SET delivery = json_object(
        'alternatives', json_array(json_object(
            'name', 'message', 'messages', json_array(json(json_set(params, '$.method', method))))),
        'alt', 0, 'part', 0, 'repeat', CASE WHEN resent > 0 THEN 0 END)
    WHERE delivery = '{}';
    UPDATE outbox SET delivery = json_remove(delivery, '$.repeat')
    WHERE json_type(delivery, '$.repeat') = 'null';
    ALTER TABLE outbox DROP COLUMN method;
    ALTER TABLE outbox DROP COLUMN params;
    ALTER TABLE outbox DROP COLUMN plan;
    ",
    // 13: stale prompts. When the person sent a message (Telegram's date; a button's tap), and
    // whether it is held for the person's answer: a prompt that waited too long while the hub or
    // its pi was away is asked about before it runs (`stale_questions`: one per place and pi,
    // naming every prompt it holds).
    "
    ALTER TABLE turns ADD COLUMN sent_ms INTEGER;
    ALTER TABLE turns ADD COLUMN held TEXT CHECK (held IN ('asked', 'cleared'));
    ALTER TABLE turns ADD COLUMN stale_question INTEGER;
    CREATE TABLE stale_questions (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        identity    TEXT NOT NULL,
        chat_id     INTEGER NOT NULL,
        thread_id   INTEGER,
        state       TEXT NOT NULL CHECK (state IN ('open', 'run', 'skipped')),
        outbox_id   INTEGER,
        created_ms  INTEGER NOT NULL,
        settled_ms  INTEGER
    ) STRICT;
    CREATE INDEX stale_questions_open ON stale_questions(identity, chat_id) WHERE state = 'open';
    CREATE INDEX turns_stale_question ON turns(stale_question) WHERE stale_question IS NOT NULL;
    ",
    // 14: pi's dialogs as the person's questions (`dialogs`): a headless pi's select, confirm,
    // input and editor, and a pi with the extension waiting at its terminal; one per request of
    // one pi process.
    "
    CREATE TABLE dialogs (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        identity    TEXT NOT NULL,
        instance_id TEXT NOT NULL,
        request_id  TEXT NOT NULL,
        kind        TEXT NOT NULL
                    CHECK (kind IN ('select', 'confirm', 'input', 'editor', 'terminal')),
        title       TEXT NOT NULL,
        body        TEXT NOT NULL,
        asked_ms    INTEGER NOT NULL,
        expires_ms  INTEGER,
        state       TEXT NOT NULL CHECK (state IN
                    ('open', 'answered', 'delivered', 'timed_out', 'ended', 'gone')),
        answer      TEXT,
        chat_id     INTEGER NOT NULL,
        thread_id   INTEGER,
        outbox_id   INTEGER,
        settled_ms  INTEGER
    ) STRICT;
    CREATE UNIQUE INDEX dialogs_request ON dialogs(instance_id, request_id);
    CREATE INDEX dialogs_unsettled ON dialogs(state) WHERE state IN ('open', 'answered');
    ",
    // 15: people besides the owner (`people`, added by an invite; those `telegram.json` lists
    // are read from the file), invites (a code's hash, its role, single use), wrong invite
    // codes counted per sender, and who wrote a turn (`from_user`, `from_name`; NULL: the
    // owner, as every turn before).
    "
    CREATE TABLE people (
        user_id  INTEGER PRIMARY KEY,
        role     TEXT NOT NULL CHECK (role IN ('member', 'viewer')),
        name     TEXT NOT NULL,
        added_ms INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE invites (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        code_hash  TEXT NOT NULL UNIQUE,
        role       TEXT NOT NULL CHECK (role IN ('member', 'viewer')),
        created_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL,
        state      TEXT NOT NULL CHECK (state IN ('open', 'used', 'revoked')),
        used_by    INTEGER,
        settled_ms INTEGER
    ) STRICT;
    CREATE TABLE invite_attempts (
        user_id  INTEGER PRIMARY KEY,
        wrong    INTEGER NOT NULL,
        first_ms INTEGER NOT NULL,
        last_ms  INTEGER NOT NULL
    ) STRICT;
    ALTER TABLE turns ADD COLUMN from_user INTEGER;
    ALTER TABLE turns ADD COLUMN from_name TEXT;
    ",
];

/// The schema version this build writes.
pub const CURRENT: i64 = MIGRATIONS.len() as i64;

/// The database's schema version.
pub fn version(conn: &Connection) -> Result<i64> {
    conn.row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(StoreError::sqlite("reading the schema version"))
}

/// Brings the database to [`CURRENT`], refusing one written by a newer build.
pub fn migrate(conn: &Connection, path: &Path) -> Result<()> {
    migrate_to(conn, path, CURRENT)
}

/// Brings the database to `target` (tests use it to build old schemas).
pub fn migrate_to(conn: &Connection, path: &Path, target: i64) -> Result<()> {
    let found = version(conn)?;
    if found > CURRENT {
        return Err(StoreError::TooNew {
            path: path.to_owned(),
            found,
            supported: CURRENT,
        });
    }
    if found >= target {
        return Ok(());
    }
    // All steps in one transaction: a reader (`status`) sees the old version or the new one,
    // never a step in between, and a crash mid-way leaves the old schema intact.
    let steps: Vec<&str> = MIGRATIONS
        .iter()
        .take(target as usize)
        .skip(found as usize)
        .copied()
        .collect();
    conn.execute_batch(&format!(
        "BEGIN IMMEDIATE; {}; PRAGMA user_version = {target}; COMMIT;",
        steps.join(";\n")
    ))
    .map_err(|e| {
        let _ = conn.execute_batch("ROLLBACK");
        StoreError::sqlite(format!(
            "migrating {} to schema version {target}",
            path.display()
        ))(e)
    })?;
    Ok(())
}
