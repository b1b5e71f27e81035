//! Retention on real SQLite files: old finished rows go, in small batches, and nothing recovery
//! needs ever does (unhandled updates, unsent or ambiguous messages, open turns and what they
//! reference, routes in use, open controls, pending cleanups).
#![allow(clippy::unwrap_used)]

use std::path::Path;

use store::retention::{self, Horizon, MIN_AGE_MS, Table};
use store::{Connection, Store, StoreError, journal, outbox, routes, turns};

const DAY: i64 = 24 * 3_600_000;
/// "Now" in these tests.
const NOW: i64 = 100 * DAY;
const AGE: i64 = 14 * DAY;
/// Long before the age.
const OLD: i64 = NOW - 30 * DAY;
/// Within the age.
const RECENT: i64 = NOW - DAY;

fn open(path: &Path) -> Store {
    Store::open(path).unwrap()
}

fn exec(s: &Store, sql: &str) {
    s.write(|tx| tx.execute_batch(sql).map_err(StoreError::from))
        .unwrap();
}

fn count(s: &Store, sql: &str) -> i64 {
    s.read(|c| c.query_row(sql, [], |r| r.get(0)).map_err(StoreError::from))
        .unwrap()
}

fn exists(s: &Store, table: &str, filter: &str) -> bool {
    count(s, &format!("SELECT count(*) FROM {table} WHERE {filter}")) > 0
}

/// Prunes every table, batch after batch (each its own transaction), until nothing is left.
fn prune_all(s: &Store, at: Horizon, limit: usize) -> usize {
    let mut total = 0;
    for table in Table::ALL {
        loop {
            let n = s
                .write(|tx| retention::prune(tx, table, at, limit))
                .unwrap();
            assert!(
                n <= 2 * limit,
                "{}: a batch stays small ({n})",
                table.name()
            );
            total += n;
            if n < limit {
                break;
            }
        }
    }
    total
}

/// A store with one row of every kind, old and recent, kept and prunable.
fn populate(s: &Store) {
    let (old, recent) = (OLD, RECENT);
    exec(
        s,
        &format!(
            r#"
        -- journal: 1 handled long ago (goes), 2 unhandled long ago (stays), 3 handled recently.
        INSERT INTO journal(update_id, kind, raw, received_ms, handled_ms, outcome) VALUES
            (1, 'message', '{{}}', {old}, {old}, 'turn'),
            (2, 'message', '{{}}', {old}, NULL, NULL),
            (3, 'message', '{{}}', {recent}, {recent}, 'turn');

        -- turns: 10-12 finished long ago (go), 13-15 open long ago (stay), 16 finished
        -- recently, 17 finished long ago with a copy on disk, 18 with an answer still to send,
        -- 19 with an open control.
        INSERT INTO turns(id, source_update_id, chat_id, identity, text, state, created_ms, done_ms) VALUES
            (10, 101, 1, '/a', 'done', 'done', {old}, {old}),
            (11, 102, 1, '/a', 'cancelled', 'cancelled', {old}, {old}),
            (12, 103, 1, '/a', 'interrupted', 'interrupted', {old}, {old}),
            (13, 104, 1, '/a', 'queued', 'queued', {old}, NULL),
            (14, 105, 1, '/a', 'dispatched', 'dispatched', {old}, NULL),
            (15, 106, 1, '/a', 'acked', 'acked', {old}, NULL),
            (16, 107, 1, '/a', 'recent', 'done', {recent}, {recent}),
            (17, 108, 1, '/a', 'copy on disk', 'done', {old}, {old}),
            (18, 109, 1, '/a', 'answer unsent', 'done', {old}, {old}),
            (19, 110, 1, '/a', 'open control', 'done', {old}, {old});
        INSERT INTO files(turn_id, source_update_id, seq, origin, kind, file_id, state, path, created_ms, done_ms) VALUES
            (10, 101, 0, 'message', 'photo', 'f10', 'saved', NULL, {old}, {old}),
            (13, 104, 0, 'message', 'photo', 'f13', 'pending', NULL, {old}, NULL),
            (17, 108, 0, 'message', 'photo', 'f17', 'saved', '/tmp/in/f17.jpg', {old}, {old});
        INSERT INTO attachments(turn_id, path, name, size, state, created_ms) VALUES
            (10, '/tmp/out/a10', 'a10', 1, 'queued', {old}),
            (14, '/tmp/out/a14', 'a14', 1, 'waiting', {old});

        -- outbox: sent and failed long ago go; pending, sending, ambiguous and parked stay.
        INSERT INTO outbox(id, created_ms, updated_ms, chat_id, delivery, purpose, state, resent, turn_id) VALUES
            (20, {old}, {old}, 1, '{{}}', 'answer', 'sent', 1, 10),
            (21, {old}, {old}, 1, '{{}}', 'answer', 'failed', 0, 11),
            (22, {old}, {old}, 1, '{{}}', 'answer', 'pending', 0, 18),
            (23, {old}, {old}, 1, '{{}}', 'answer', 'sending', 0, NULL),
            (24, {old}, {old}, 1, '{{}}', 'answer', 'ambiguous', 0, NULL),
            (25, {recent}, {recent}, 1, '{{}}', 'answer', 'sent', 0, 16);
        INSERT INTO outbox(id, created_ms, updated_ms, chat_id, delivery, purpose, state, not_before_ms, handling) VALUES
            (26, {old}, {old}, 1, '{{}}', 'voice', 'pending', 9223372036854775807, 'parked');

        -- controls: done long ago goes; pending and sent stay.
        INSERT INTO controls(id, kind, turn_id, chat_id, state, created_ms, done_ms) VALUES
            (30, 'abort', 10, 1, 'done', {old}, {old}),
            (31, 'abort', 19, 1, 'pending', {old}, NULL),
            (32, 'compact', NULL, 1, 'sent', {old}, NULL);

        -- routes: 40 of a finished turn, old (goes); 41 of an open turn, old; 42 recent;
        -- 43 old but replied to recently (see the test); 44 from before schema 9 (no time).
        INSERT INTO message_routes(chat_id, message_id, identity, turn_id, used_ms) VALUES
            (1, 40, '/a', 10, {old}),
            (1, 41, '/a', 14, {old}),
            (1, 42, '/a', 16, {recent}),
            (1, 43, '/a', 10, {old}),
            (1, 44, '/a', 10, NULL);

        -- buttons: expired (goes), valid (stays).
        INSERT INTO callbacks(token, owner, action, created_ms, expires_ms) VALUES
            ('expired', 7, 'x', {old}, {old}),
            ('valid', 7, 'x', {old}, {NOW} + 100 * {DAY});

        -- instances of /a: i1 (old, gone, superseded) goes; i2 had the open turns 14/15;
        -- i4 is the newest of /a. /b has only i3, gone long ago: its name stays. i5 is
        -- superseded but its binding names it.
        INSERT INTO instances(id, identity, transport, cwd, label, state, connected_ms, gone_ms) VALUES
            ('i1', '/a', 'shim', '/a', 'a', 'gone', {old}, {old}),
            ('i2', '/a', 'shim', '/a', 'a', 'gone', {old} + 1, {old} + 1),
            ('i3', '/b', 'shim', '/b', 'b', 'gone', {old}, {old}),
            ('i4', '/a', 'shim', '/a', 'a', 'gone', {old} + 2, {old} + 2),
            ('i5', '/c', 'shim', '/c', 'c', 'gone', {old}, {old}),
            ('i6', '/c', 'shim', '/c', 'c', 'gone', {old} + 1, {old} + 1);
        UPDATE turns SET instance_id = 'i2' WHERE id IN (14, 15);
        INSERT INTO bindings(identity, chat_id, thread_id, slot, title, state, instance_id, cwd, epoch, created_ms, updated_ms)
            VALUES ('/c', 1, 5, 'A', 'A', 'offline', 'i5', '/c', 1, {old}, {old});

        -- topic cleanups: done long ago goes, pending stays; flood waits: ended long ago goes.
        INSERT INTO cleanups(id, chat_id, thread_id, proof, state, created_ms, done_ms) VALUES
            (50, 1, 8, 'disconnected:/x', 'done', {old}, {old}),
            (51, 1, 9, 'disconnected:/y', 'pending', {old}, NULL);
        INSERT INTO flood_waits(scope, until_ms, retry_after_s, recorded_ms) VALUES
            ('chat:1', {old}, 5, {old}),
            ('global', {NOW} + 100 * {DAY}, 5, {NOW});
        "#
        ),
    );
}

/// What recovery needs, checked after any prune (and after a reopen).
fn assert_recovery_intact(s: &Store) {
    // The worker's work.
    assert!(exists(s, "journal", "update_id = 2"), "unhandled update");
    // The sender's work and what the person must decide about.
    for id in [22, 23, 24, 26] {
        assert!(
            exists(s, "outbox", &format!("id = {id}")),
            "outbox row {id}"
        );
    }
    // Open turns, with their files and attachments.
    for id in [13, 14, 15] {
        assert!(exists(s, "turns", &format!("id = {id}")), "open turn {id}");
    }
    assert!(exists(s, "files", "turn_id = 13"), "a pending download");
    assert!(
        exists(s, "attachments", "turn_id = 14"),
        "a waiting attachment"
    );
    // A finished turn whose copy is still on disk, whose answer is still to send, or whose
    // control is open.
    for id in [17, 18, 19] {
        assert!(exists(s, "turns", &format!("id = {id}")), "turn {id}");
    }
    assert!(exists(s, "files", "turn_id = 17 AND path IS NOT NULL"));
    assert!(exists(s, "controls", "id = 31"), "pending control");
    assert!(exists(s, "controls", "id = 32"), "sent control");
    assert!(
        exists(s, "message_routes", "message_id = 41"),
        "route of an open turn"
    );
    assert!(exists(s, "callbacks", "token = 'valid'"));
    assert!(
        exists(s, "instances", "id = 'i2'"),
        "instance of open turns"
    );
    assert!(exists(s, "instances", "id = 'i4'"), "newest of /a");
    assert!(exists(s, "instances", "id = 'i3'"), "only one of /b");
    assert!(exists(s, "instances", "id = 'i5'"), "named by a binding");
    assert!(exists(s, "cleanups", "id = 51"), "pending cleanup");
    assert!(
        exists(s, "flood_waits", "scope = 'global'"),
        "running flood wait"
    );
    // No row points at a turn that is gone.
    for table in ["files", "attachments"] {
        assert_eq!(
            count(
                s,
                &format!(
                    "SELECT count(*) FROM {table} x WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = x.turn_id)"
                )
            ),
            0,
            "{table} without their turn"
        );
    }
    for (table, states) in [
        ("outbox", "'pending', 'sending'"),
        ("controls", "'pending', 'sent'"),
    ] {
        assert_eq!(
            count(
                s,
                &format!(
                    "SELECT count(*) FROM {table} x WHERE x.turn_id IS NOT NULL AND x.state IN ({states})
                     AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = x.turn_id)"
                )
            ),
            0,
            "open {table} rows without their turn"
        );
    }
    // Typed reads still decode everything that is left.
    s.read(|c| {
        journal::pending(c, 100)?;
        outbox::all(c)?;
        turns::outstanding(c)?;
        turns::counts(c)?;
        Ok::<_, StoreError>(())
    })
    .unwrap();
}

#[test]
fn old_finished_rows_go_and_what_recovery_needs_stays() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir.path().join("state.db"));
    populate(&s);
    // The person replied to message 43 a day ago: its route is in use.
    s.write(|tx| routes::used(tx, 1, 43, RECENT)).unwrap();
    let before = (
        s.read(journal::counts).unwrap(),
        s.read(turns::counts).unwrap(),
        s.read(outbox::counts).unwrap(),
        s.read(outbox::resent_total).unwrap(),
    );

    // Batches of two: every table needs several.
    let at = Horizon::new(NOW, AGE);
    prune_all(&s, at, 2);
    assert_recovery_intact(&s);

    // The old finished rows went, with what referenced them.
    assert!(!exists(&s, "journal", "update_id = 1"));
    assert!(exists(&s, "journal", "update_id = 3"), "handled recently");
    for id in [10, 11, 12] {
        assert!(!exists(&s, "turns", &format!("id = {id}")), "turn {id}");
    }
    assert!(exists(&s, "turns", "id = 16"), "finished recently");
    assert!(!exists(&s, "files", "turn_id = 10"));
    assert!(!exists(&s, "attachments", "turn_id = 10"));
    assert!(!exists(&s, "outbox", "id IN (20, 21)"));
    assert!(exists(&s, "outbox", "id = 25"), "sent recently");
    assert!(!exists(&s, "controls", "id = 30"));
    assert!(!exists(&s, "message_routes", "message_id = 40"));
    assert!(exists(&s, "message_routes", "message_id = 42"), "recent");
    assert!(
        exists(&s, "message_routes", "message_id = 43"),
        "replied to"
    );
    assert!(
        exists(
            &s,
            "message_routes",
            &format!("message_id = 44 AND used_ms = {NOW}")
        ),
        "a route without a time gets a full period from now"
    );
    assert!(!exists(&s, "callbacks", "token = 'expired'"));
    assert!(!exists(&s, "instances", "id = 'i1'"));
    assert!(!exists(&s, "cleanups", "id = 50"));
    assert!(!exists(&s, "flood_waits", "scope = 'chat:1'"));

    // What status counts did not change: pruned rows are still counted.
    let after = (
        s.read(journal::counts).unwrap(),
        s.read(turns::counts).unwrap(),
        s.read(outbox::counts).unwrap(),
        s.read(outbox::resent_total).unwrap(),
    );
    assert_eq!(before, after);

    // A second pass finds nothing; a period later, the stamped route goes too.
    assert_eq!(prune_all(&s, at, 2), 0);
    prune_all(&s, Horizon::new(NOW + AGE + 1, AGE), 2);
    assert!(!exists(&s, "message_routes", "message_id = 44"));
    assert_recovery_intact(&s);
}

#[test]
fn an_age_under_the_minimum_counts_as_the_minimum() {
    let at = Horizon::new(NOW, 0);
    assert_eq!(at.before_ms, NOW - MIN_AGE_MS);
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir.path().join("state.db"));
    // A turn that finished a moment ago is the reconciler's evidence of a topic in use.
    exec(
        &s,
        &format!(
            "INSERT INTO turns(id, chat_id, thread_id, identity, text, state, created_ms, done_ms)
             VALUES (1, 1, 5, '/a', 'x', 'done', {n}, {n})",
            n = NOW - 1000
        ),
    );
    prune_all(&s, at, 10);
    assert!(exists(&s, "turns", "id = 1"));
}

#[test]
fn a_crash_between_batches_loses_nothing_recovery_needs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let at = Horizon::new(NOW, AGE);
    {
        let s = open(&path);
        populate(&s);
        // A batch that does not commit (the process dies before the commit) changes nothing.
        let turns_before = count(&s, "SELECT count(*) FROM turns");
        let files_before = count(&s, "SELECT count(*) FROM files");
        let r: Result<(), StoreError> = s.write(|tx| {
            retention::prune(tx, Table::Turns, at, 2)?;
            Err(StoreError::Corrupt("crash before the commit".into()))
        });
        assert!(r.is_err());
        assert_eq!(count(&s, "SELECT count(*) FROM turns"), turns_before);
        assert_eq!(count(&s, "SELECT count(*) FROM files"), files_before);
        // One committed batch of each table, then the process goes.
        for table in Table::ALL {
            s.write(|tx| retention::prune(tx, table, at, 1)).unwrap();
        }
        assert_recovery_intact(&s);
    }
    // After the restart: consistent, and the next pass finishes the work.
    let s = open(&path);
    assert_recovery_intact(&s);
    prune_all(&s, at, 3);
    assert_recovery_intact(&s);
    assert!(!exists(&s, "turns", "id IN (10, 11, 12)"));
}

#[test]
fn an_open_turn_keeps_its_routes_however_old() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir.path().join("state.db"));
    exec(
        &s,
        &format!(
            "INSERT INTO turns(id, chat_id, identity, text, state, created_ms) VALUES (1, 1, '/a', 'x', 'acked', {OLD});"
        ),
    );
    s.write(|tx| routes::record(tx, 1, 7, "/a", Some(1), OLD))
        .unwrap();
    s.write(|tx| routes::record(tx, 1, 8, "/a", None, OLD))
        .unwrap();
    prune_all(&s, Horizon::new(NOW, AGE), 10);
    assert_eq!(
        s.read(|c| routes::lookup(c, 1, 7)).unwrap().as_deref(),
        Some("/a")
    );
    assert_eq!(s.read(|c| routes::lookup(c, 1, 8)).unwrap(), None);
}

/// Sizes of tables after pruning follow the recent traffic: a long run of finished turns with
/// their updates, answers and routes leaves only the last period's rows.
#[test]
fn rows_level_off_under_steady_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir.path().join("state.db"));
    let per_day = 200;
    let days = 40;
    let mut peak = 0;
    for day in 0..days {
        let t0 = day * DAY;
        s.write(|tx| {
            for i in 0..per_day {
                let n = day * per_day + i + 1;
                let at = t0 + i * 1000;
                write_turn(tx, n, at)?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
        prune_all(&s, Horizon::new(t0 + DAY, AGE), retention::BATCH);
        let rows = count(&s, "SELECT count(*) FROM turns")
            + count(&s, "SELECT count(*) FROM journal")
            + count(&s, "SELECT count(*) FROM outbox")
            + count(&s, "SELECT count(*) FROM message_routes");
        if day >= 20 {
            assert!(rows <= peak, "day {day}: {rows} rows after {peak}");
        }
        peak = peak.max(rows);
    }
    // Only the last 14 days (and the day being written) stay.
    assert!(count(&s, "SELECT count(*) FROM turns") <= 15 * per_day);
}

/// What the hub writes for one owner message answered by pi.
fn write_turn(tx: &Connection, n: i64, at: i64) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO journal(update_id, kind, raw, received_ms, handled_ms, outcome)
         VALUES (?1, 'message', '{\"message\":{\"text\":\"hello\"}}', ?2, ?2, 'turn')",
        [n, at],
    )?;
    tx.execute(
        "INSERT INTO turns(id, source_update_id, chat_id, identity, text, state, created_ms, done_ms, result_text)
         VALUES (?1, ?1, 1, '/a', 'hello', 'done', ?2, ?2, 'an answer')",
        [n, at],
    )?;
    tx.execute(
        "INSERT INTO outbox(created_ms, updated_ms, chat_id, delivery, purpose, source_update_id, state, turn_id, sent_message_id)
         VALUES (?2, ?2, 1, '{\"alternatives\":[{\"name\":\"message\",\"messages\":[{\"method\":\"sendMessage\",\"text\":\"an answer\"}]}],\"alt\":0,\"part\":0}', 'answer', ?1, 'sent', ?1, ?1)",
        [n, at],
    )?;
    routes::record(tx, 1, n, "/a", Some(n), at)
}
