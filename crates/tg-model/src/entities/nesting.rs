//! Telegram's nesting rules (TDLib's `fix_entities`, `split_entities` and `merge_entities`).
//!
//! Each entity type is one bit (see [`Kind::bit`]), so the rules can ask about a whole stack
//! of enclosing entities at once.

use super::model::{Entity, Kind, sort_entities};

/// The [`Kind::bit`]s of bold, italic, underline, strikethrough and spoiler.
const SPLITTABLE_MASK: u32 = (1 << 5) | (1 << 6) | (1 << 14) | (1 << 15) | (1 << 17);
/// The [`Kind::bit`]s of both blockquotes.
const BLOCKQUOTE_MASK: u32 = (1 << 16) | (1 << 19);
/// The [`Kind::bit`]s of the types [`Kind::is_continuous`] lists.
const CONTINUOUS_MASK: u32 = (1 << 0)
    | (1 << 1)
    | (1 << 2)
    | (1 << 3)
    | (1 << 4)
    | (1 << 10)
    | (1 << 11)
    | (1 << 12)
    | (1 << 13)
    | (1 << 18)
    | (1 << 20);

/// TDLib's `are_entities_valid`: true when `entities` (sorted) already obey every nesting rule,
/// in which case [`fix_entities`] leaves them alone.
fn are_entities_valid(entities: &[Entity]) -> bool {
    let mut end_pos: [Option<usize>; 5] = [None; 5];
    let mut stack: Vec<&Entity> = Vec::new();
    let mut mask = 0u32;
    for entity in entities {
        while let Some(top) = stack.last() {
            if entity.offset < top.end() {
                break;
            }
            mask &= !top.kind.bit();
            stack.pop();
        }
        if let Some(parent) = stack.last() {
            let kind = &entity.kind;
            if entity.end() > parent.end()
                || mask & kind.bit() != 0
                || parent.kind.is_pre()
                || (kind.is_pre() && mask & !BLOCKQUOTE_MASK != 0)
                || ((kind.is_continuous() || kind.is_blockquote()) && mask & CONTINUOUS_MASK != 0)
                || (kind.is_blockquote() && mask & BLOCKQUOTE_MASK != 0)
                // Anything inside a splittable entity may need that entity split.
                || mask & SPLITTABLE_MASK != 0
            {
                return false;
            }
        }
        if let Some(index) = entity.kind.splittable_index() {
            if end_pos[index].is_some_and(|end| end >= entity.offset) {
                // Touching or overlapping entities of one splittable type get merged.
                return false;
            }
            end_pos[index] = Some(entity.end());
        }
        stack.push(entity);
        mask |= entity.kind.bit();
    }
    true
}

/// Keeps, in sorted order, only entities that start at or after the end of the last kept one:
/// the outer one of two nested entities wins, and so does the earlier of two overlapping ones.
pub(super) fn remove_intersecting_entities(entities: Vec<Entity>) -> Vec<Entity> {
    let mut last_end = 0;
    entities
        .into_iter()
        .filter(|e| {
            let keep = e.offset >= last_end;
            if keep {
                last_end = e.end();
            }
            keep
        })
        .collect()
}

/// Drops entities that cross a blockquote boundary (being inside one is fine).
fn remove_entities_intersecting_blockquote(entities: &mut Vec<Entity>, blockquotes: &[Entity]) {
    let mut quote = 0;
    entities.retain(|e| {
        while quote < blockquotes.len() && blockquotes[quote].end() <= e.offset {
            quote += 1;
        }
        match blockquotes.get(quote) {
            Some(q) => !(q.end() < e.end() || (e.offset < q.offset && q.offset < e.end())),
            None => true,
        }
    });
}

/// TDLib's `split_entities`: cuts the splittable entities at every start and end of the other
/// entities, merges touching ones of one type, and drops the parts inside code and pre.
fn split_entities(splittable: Vec<Entity>, others: &[Entity]) -> Vec<Entity> {
    struct Splitter {
        entities: Vec<Entity>,
        next: usize,
        begin: [usize; 5],
        // 0 means "no pending entity of this type"; entities are never empty so a pending one
        // always ends after 0.
        end: [usize; 5],
        result: Vec<Entity>,
    }
    impl Splitter {
        fn flush(&mut self, offset: usize) {
            for index in 0..5 {
                if self.end[index] != 0 && self.begin[index] < offset {
                    if self.end[index] <= offset {
                        self.emit(index, self.begin[index], self.end[index]);
                        self.begin[index] = 0;
                        self.end[index] = 0;
                    } else {
                        self.emit(index, self.begin[index], offset);
                        self.begin[index] = offset;
                    }
                }
            }
        }
        fn emit(&mut self, index: usize, begin: usize, end: usize) {
            self.result.push(Entity {
                kind: Kind::splittable_from_index(index),
                offset: begin,
                length: end - begin,
            });
        }
        fn add_entities(&mut self, end_offset: usize) {
            while let Some(entity) = self.entities.get(self.next) {
                if entity.offset >= end_offset {
                    break;
                }
                let (offset, end) = (entity.offset, entity.end());
                let Some(index) = entity.kind.splittable_index() else {
                    self.next += 1;
                    continue;
                };
                if offset <= self.end[index] && self.end[index] != 0 {
                    self.end[index] = self.end[index].max(end);
                } else {
                    self.flush(offset);
                    self.begin[index] = offset;
                    self.end[index] = end;
                }
                self.next += 1;
            }
            self.flush(end_offset);
        }
    }

    let mut splitter = Splitter {
        entities: splittable,
        next: 0,
        begin: [0; 5],
        end: [0; 5],
        result: Vec::new(),
    };
    let mut stack: Vec<&Entity> = Vec::new();
    let add_offset = |splitter: &mut Splitter, stack: &mut Vec<&Entity>, offset: usize| {
        while let Some(top) = stack.last() {
            if offset < top.end() {
                break;
            }
            let old_len = splitter.result.len();
            splitter.add_entities(top.end());
            if top.kind.is_pre() {
                splitter.result.truncate(old_len);
            }
            stack.pop();
        }
        splitter.add_entities(offset);
    };
    for other in others {
        add_offset(&mut splitter, &mut stack, other.offset);
        stack.push(other);
    }
    add_offset(&mut splitter, &mut stack, usize::MAX);
    let mut result = splitter.result;
    sort_entities(&mut result);
    result
}

fn resplit_entities(splittable: Vec<Entity>, mut entities: Vec<Entity>) -> Vec<Entity> {
    if !splittable.is_empty() {
        let split = split_entities(splittable, &entities);
        if entities.is_empty() {
            return split;
        }
        entities.extend(split);
        sort_entities(&mut entities);
    }
    entities
}

type Partition = (Vec<Entity>, Vec<Entity>, Vec<Entity>);

/// Splits into (splittable, blockquote, all others) keeping the order.
fn partition(entities: Vec<Entity>) -> Partition {
    let (mut splittable, mut blockquotes, mut others) = (Vec::new(), Vec::new(), Vec::new());
    for entity in entities {
        if entity.kind.splittable_index().is_some() {
            splittable.push(entity);
        } else if entity.kind.is_blockquote() {
            blockquotes.push(entity);
        } else {
            others.push(entity);
        }
    }
    (splittable, blockquotes, others)
}

/// Enforces Telegram's nesting rules (TDLib's `fix_entities`) on non-empty entities:
/// - links, code, pre, custom emoji, mentions... can't overlap or contain each other: of two
///   such, the one sorting first (the earlier one, the outer one, or for the same range the
///   one of lower [`Kind::priority`]) is kept;
/// - blockquotes can't overlap or nest; other entities crossing a blockquote boundary are
///   dropped;
/// - nothing survives inside code or pre;
/// - bold, italic, underline, strikethrough and spoiler are merged when touching and split at
///   the boundaries of every other entity they contain or cross (whenever the list isn't already
///   valid, Telegram splits a bold run around a nested link into three bold entities).
pub(crate) fn fix_entities(mut entities: Vec<Entity>) -> Vec<Entity> {
    sort_entities(&mut entities);
    if are_entities_valid(&entities) {
        return entities;
    }
    let (splittable, blockquotes, others) = partition(entities);
    let mut others = remove_intersecting_entities(others);
    if !blockquotes.is_empty() {
        let blockquotes = remove_intersecting_entities(blockquotes);
        remove_entities_intersecting_blockquote(&mut others, &blockquotes);
        others.extend(blockquotes);
        sort_entities(&mut others);
    }
    resplit_entities(splittable, others)
}

/// TDLib's `merge_entities`: adds the new (detected) entities that don't overlap an old one.
fn merge_entities(old: Vec<Entity>, new: Vec<Entity>) -> Vec<Entity> {
    if new.is_empty() {
        return old;
    }
    if old.is_empty() {
        return new;
    }
    let mut result = Vec::with_capacity(old.len() + new.len());
    let mut new = new.into_iter().peekable();
    for old_entity in old {
        while let Some(n) = new.next_if(|n| n.end() <= old_entity.offset) {
            result.push(n);
        }
        let old_end = old_entity.end();
        result.push(old_entity);
        while new.next_if(|n| n.offset < old_end).is_some() {}
    }
    result.extend(new);
    result
}

/// TDLib's `merge_new_entities`: merges detected entities into valid, sorted ones.
pub(crate) fn merge_new_entities(entities: Vec<Entity>, mut new: Vec<Entity>) -> Vec<Entity> {
    if new.is_empty() {
        return entities;
    }
    let (splittable, blockquotes, others) = partition(entities);
    remove_entities_intersecting_blockquote(&mut new, &blockquotes);
    let mut others = merge_entities(others, new);
    if !blockquotes.is_empty() {
        others.extend(blockquotes);
        sort_entities(&mut others);
    }
    resplit_entities(splittable, others)
}
