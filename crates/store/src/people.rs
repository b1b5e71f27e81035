//! The people besides the owner who may use the bot, and the invites that make them so.
//!
//! The owner stays `kv::OWNER` (paired, or `allowedUserId`). Everyone else is here with a
//! role, added by an invite the owner opened (`/start CODE`: a code shown once, stored as a
//! hash, short-lived, single use) or listed in `telegram.json` (`people`, which the hub reads
//! itself; those are not copied here). Wrong codes are counted per sender, as pairing counts
//! them: a guesser spends only their own attempts.

use rusqlite::{Connection, OptionalExtension, params};

use crate::Cached;
use crate::{Result, StoreError};

/// What a person other than the owner may do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Talks to pi; the queue on their own messages; status.
    Member,
    /// Reads only.
    Viewer,
}

impl Role {
    /// The stored and configured text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::Viewer => "viewer",
        }
    }

    /// `None` for text that names no role.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "member" => Some(Self::Member),
            "viewer" => Some(Self::Viewer),
            _ => None,
        }
    }
}

fn role_of(text: &str) -> Result<Role> {
    Role::parse(text).ok_or_else(|| StoreError::Corrupt(format!("role {text:?}")))
}

/// A person added by an invite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    pub user_id: i64,
    pub role: Role,
    /// Their Telegram name when they joined (first name, and the last when given).
    pub name: String,
    pub added_ms: i64,
}

/// The person with this user id, if an invite added them.
pub fn get(conn: &Connection, user_id: i64) -> Result<Option<Person>> {
    conn.row(
        "SELECT user_id, role, name, added_ms FROM people WHERE user_id = ?1",
        [user_id],
        |r| Ok((r.get(0)?, r.get::<_, String>(1)?, r.get(2)?, r.get(3)?)),
    )
    .optional()
    .map_err(StoreError::sqlite("reading a person"))?
    .map(|(user_id, role, name, added_ms)| {
        Ok(Person {
            user_id,
            role: role_of(&role)?,
            name,
            added_ms,
        })
    })
    .transpose()
}

/// Everyone invites added, oldest first.
pub fn list(conn: &Connection) -> Result<Vec<Person>> {
    let ctx = "listing people";
    let mut stmt = conn
        .prepare_cached(
            "SELECT user_id, role, name, added_ms FROM people ORDER BY added_ms, user_id",
        )
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get::<_, String>(1)?, r.get(2)?, r.get(3)?))
        })
        .map_err(StoreError::sqlite(ctx))?;
    rows.map(|r| {
        let (user_id, role, name, added_ms) = r.map_err(StoreError::sqlite(ctx))?;
        Ok(Person {
            user_id,
            role: role_of(&role)?,
            name,
            added_ms,
        })
    })
    .collect()
}

/// Adds `user_id` with `role`, or gives them `role` when they are here already.
pub fn add(conn: &Connection, user_id: i64, role: Role, name: &str, now_ms: i64) -> Result<()> {
    conn.exec(
        "INSERT INTO people(user_id, role, name, added_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(user_id) DO UPDATE SET role = excluded.role, name = excluded.name",
        params![user_id, role.as_str(), name, now_ms],
    )
    .map(drop)
    .map_err(StoreError::sqlite("adding a person"))
}

/// Removes `user_id`; `false` when they were not here.
pub fn remove(conn: &Connection, user_id: i64) -> Result<bool> {
    conn.exec("DELETE FROM people WHERE user_id = ?1", [user_id])
        .map(|n| n == 1)
        .map_err(StoreError::sqlite("removing a person"))
}

/// An invite's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InviteState {
    /// Waiting for `/start CODE` (until it expires).
    Open,
    /// Someone joined with it.
    Used,
    /// The owner withdrew it.
    Revoked,
}

impl InviteState {
    fn parse(text: &str) -> Result<Self> {
        match text {
            "open" => Ok(Self::Open),
            "used" => Ok(Self::Used),
            "revoked" => Ok(Self::Revoked),
            other => Err(StoreError::Corrupt(format!("invite state {other:?}"))),
        }
    }
}

/// An invite (only its code's hash is stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invite {
    pub id: i64,
    pub role: Role,
    pub created_ms: i64,
    /// Valid until.
    pub expires_ms: i64,
    pub state: InviteState,
    /// Who joined with it.
    pub used_by: Option<i64>,
}

impl Invite {
    /// Open and not expired at `now_ms`.
    pub fn usable(&self, now_ms: i64) -> bool {
        self.state == InviteState::Open && now_ms < self.expires_ms
    }
}

const INVITE_COLUMNS: &str = "id, role, created_ms, expires_ms, state, used_by";

fn invite_of(
    r: &rusqlite::Row<'_>,
) -> rusqlite::Result<(i64, String, i64, i64, String, Option<i64>)> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
    ))
}

fn invite_from(
    (id, role, created_ms, expires_ms, state, used_by): (
        i64,
        String,
        i64,
        i64,
        String,
        Option<i64>,
    ),
) -> Result<Invite> {
    Ok(Invite {
        id,
        role: role_of(&role)?,
        created_ms,
        expires_ms,
        state: InviteState::parse(&state)?,
        used_by,
    })
}

/// Opens an invite for `role` with this code hash, valid for `ttl_ms`. Every sender's wrong
/// attempts are forgotten: a new invite gives everyone their attempts again.
pub fn open_invite(
    conn: &Connection,
    code_hash: &str,
    role: Role,
    now_ms: i64,
    ttl_ms: i64,
) -> Result<i64> {
    conn.exec("DELETE FROM invite_attempts", [])
        .map_err(StoreError::sqlite("forgetting invite attempts"))?;
    conn.exec(
        "INSERT INTO invites(code_hash, role, created_ms, expires_ms, state)
         VALUES (?1, ?2, ?3, ?4, 'open')",
        params![code_hash, role.as_str(), now_ms, now_ms + ttl_ms],
    )
    .map_err(StoreError::sqlite("opening an invite"))?;
    Ok(conn.last_insert_rowid())
}

/// The invite whose code has this hash, whatever its state.
pub fn invite_by_hash(conn: &Connection, code_hash: &str) -> Result<Option<Invite>> {
    conn.row(
        &format!("SELECT {INVITE_COLUMNS} FROM invites WHERE code_hash = ?1"),
        [code_hash],
        invite_of,
    )
    .optional()
    .map_err(StoreError::sqlite("reading an invite"))?
    .map(invite_from)
    .transpose()
}

/// An invite by number.
pub fn invite(conn: &Connection, id: i64) -> Result<Option<Invite>> {
    conn.row(
        &format!("SELECT {INVITE_COLUMNS} FROM invites WHERE id = ?1"),
        [id],
        invite_of,
    )
    .optional()
    .map_err(StoreError::sqlite("reading an invite"))?
    .map(invite_from)
    .transpose()
}

/// The invites open and unexpired at `now_ms`, oldest first.
pub fn usable_invites(conn: &Connection, now_ms: i64) -> Result<Vec<Invite>> {
    let ctx = "listing invites";
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {INVITE_COLUMNS} FROM invites WHERE state = 'open' AND expires_ms > ?1 ORDER BY id"
        ))
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map([now_ms], invite_of)
        .map_err(StoreError::sqlite(ctx))?;
    rows.map(|r| invite_from(r.map_err(StoreError::sqlite(ctx))?))
        .collect()
}

/// Marks an open invite used by `user_id`; `false` when it was not open (used, revoked): the
/// caller read it in the same transaction, so that is a bug of the caller's, not a race.
pub fn use_invite(conn: &Connection, id: i64, user_id: i64, now_ms: i64) -> Result<bool> {
    conn.exec("DELETE FROM invite_attempts", [])
        .map_err(StoreError::sqlite("forgetting invite attempts"))?;
    conn.exec(
        "UPDATE invites SET state = 'used', used_by = ?2, settled_ms = ?3
         WHERE id = ?1 AND state = 'open'",
        params![id, user_id, now_ms],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("using an invite"))
}

/// Withdraws an open invite; `false` when it was not open.
pub fn revoke_invite(conn: &Connection, id: i64, now_ms: i64) -> Result<bool> {
    conn.exec(
        "UPDATE invites SET state = 'revoked', settled_ms = ?2 WHERE id = ?1 AND state = 'open'",
        params![id, now_ms],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("revoking an invite"))
}

/// Counts a wrong code of `user_id` while invites are open; returns the attempts they have
/// left of `allowed` (never below zero).
pub fn record_wrong(conn: &Connection, user_id: i64, allowed: i64, now_ms: i64) -> Result<i64> {
    conn.exec(
        "INSERT INTO invite_attempts(user_id, wrong, first_ms, last_ms) VALUES (?1, 1, ?2, ?2)
         ON CONFLICT(user_id) DO UPDATE SET wrong = wrong + 1, last_ms = excluded.last_ms",
        params![user_id, now_ms],
    )
    .map_err(StoreError::sqlite("counting a wrong invite code"))?;
    attempts_left(conn, user_id, allowed)
}

/// The wrong codes `user_id` may still send of `allowed` (0: refused until a new invite).
pub fn attempts_left(conn: &Connection, user_id: i64, allowed: i64) -> Result<i64> {
    let wrong: i64 = conn
        .row(
            "SELECT wrong FROM invite_attempts WHERE user_id = ?1",
            [user_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(StoreError::sqlite("reading invite attempts"))?
        .unwrap_or(0);
    Ok((allowed - wrong).max(0))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::Store;

    fn with(f: impl FnOnce(&Connection) -> Result<()>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        store.write(f).unwrap();
    }

    #[test]
    fn people_are_added_listed_given_a_new_role_and_removed() {
        with(|c| {
            add(c, 7, Role::Member, "Ann", 10)?;
            add(c, 8, Role::Viewer, "Bo", 20)?;
            assert_eq!(get(c, 7)?.unwrap().role, Role::Member);
            add(c, 7, Role::Viewer, "Ann B", 30)?;
            let ann = get(c, 7)?.unwrap();
            assert_eq!(
                (ann.role, ann.name.as_str(), ann.added_ms),
                (Role::Viewer, "Ann B", 10)
            );
            let ids: Vec<i64> = list(c)?.iter().map(|p| p.user_id).collect();
            assert_eq!(ids, [7, 8]);
            assert!(remove(c, 7)?);
            assert!(!remove(c, 7)?);
            assert_eq!(get(c, 7)?, None);
            Ok(())
        });
    }

    #[test]
    fn an_invite_is_usable_until_it_expires_and_only_once() {
        with(|c| {
            let id = open_invite(c, "h1", Role::Member, 1_000, 600)?;
            let inv = invite_by_hash(c, "h1")?.unwrap();
            assert!(inv.usable(1_599));
            assert!(!inv.usable(1_600), "expired at its end");
            assert_eq!(usable_invites(c, 1_599)?.len(), 1);
            assert_eq!(usable_invites(c, 1_600)?.len(), 0);
            assert!(use_invite(c, id, 42, 1_100)?);
            assert!(!use_invite(c, id, 43, 1_101)?, "a code used twice");
            let inv = invite(c, id)?.unwrap();
            assert_eq!((inv.state, inv.used_by), (InviteState::Used, Some(42)));
            assert!(!inv.usable(1_200));
            let other = open_invite(c, "h2", Role::Viewer, 2_000, 600)?;
            assert!(revoke_invite(c, other, 2_001)?);
            assert!(!revoke_invite(c, other, 2_002)?);
            assert!(!invite(c, other)?.unwrap().usable(2_003));
            assert!(
                open_invite(c, "h2", Role::Viewer, 3_000, 600).is_err(),
                "a hash is one invite"
            );
            Ok(())
        });
    }

    #[test]
    fn wrong_codes_are_counted_per_sender_and_forgotten_by_a_new_invite() {
        with(|c| {
            open_invite(c, "h1", Role::Member, 0, 600)?;
            assert_eq!(attempts_left(c, 5, 3)?, 3);
            assert_eq!(record_wrong(c, 5, 3, 1)?, 2);
            assert_eq!(record_wrong(c, 5, 3, 2)?, 1);
            assert_eq!(record_wrong(c, 5, 3, 3)?, 0);
            assert_eq!(record_wrong(c, 5, 3, 4)?, 0, "never below zero");
            assert_eq!(attempts_left(c, 6, 3)?, 3, "another sender's are their own");
            open_invite(c, "h2", Role::Member, 10, 600)?;
            assert_eq!(attempts_left(c, 5, 3)?, 3);
            Ok(())
        });
    }
}
