//! Updates kept exactly as Telegram sent them.

use serde::Deserialize;
use serde_json::value::RawValue;

/// One update: its id and its JSON text, untouched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawUpdate {
    /// `update_id`.
    pub update_id: i64,
    /// The whole Update object as received.
    pub json: String,
}

#[derive(Deserialize)]
struct IdOnly {
    update_id: i64,
}

/// Splits a JSON array of updates into [`RawUpdate`]s. An element without an integer
/// `update_id` cannot be journaled or confirmed and is skipped (logged); nothing else in an
/// update can make this fail.
pub fn parse_updates(array: &str) -> Result<Vec<RawUpdate>, serde_json::Error> {
    let items: Vec<&RawValue> = serde_json::from_str(array)?;
    let mut out = Vec::with_capacity(items.len());
    for raw in items {
        match serde_json::from_str::<IdOnly>(raw.get()) {
            Ok(id) => out.push(RawUpdate {
                update_id: id.update_id,
                json: raw.get().to_owned(),
            }),
            Err(e) => tracing::warn!(error = %e, "skipping an update without update_id"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kinds_and_fields_never_break_a_batch() {
        let batch = r#"[
            {"update_id": 5, "message": {"message_id": 1, "text": "hi", "brand_new_field": {"x": 1}}},
            {"update_id": 6, "some_future_update": {"anything": [1, 2, 3]}},
            {"no_id": true},
            {"update_id": 7, "callback_query": {"id": "q", "data": "d"}}
        ]"#;
        let ups = parse_updates(batch).map_err(|e| e.to_string());
        let ids: Vec<i64> = ups
            .unwrap_or_default()
            .iter()
            .map(|u| u.update_id)
            .collect();
        assert_eq!(ids, vec![5, 6, 7]);
        let one =
            parse_updates(r#"[{"update_id":9,"message":{"text":"a\u00e9"}}]"#).unwrap_or_default();
        // kept byte for byte, escapes included
        assert_eq!(
            one[0].json,
            r#"{"update_id":9,"message":{"text":"a\u00e9"}}"#
        );
    }
}
