//! The distinct keys of a replay, each interned once: a line's key is looked up by its bytes
//! (no allocation unless the key is new) and stands for a dense id afterwards, which every
//! policy's per-key state is indexed by. The table also keeps each key's latest time, so a
//! key's state never moves backwards when lines arrive slightly out of order.

use ahash::RandomState;
use hashbrown::HashTable;

/// Interned keys, ids `0..len()`. Their bytes sit end to end in one buffer: no allocation
/// per key, and a lookup's comparison reads memory next to its neighbours'.
#[derive(Debug)]
pub(crate) struct KeyTable {
    hasher: RandomState,
    ids: HashTable<u32>,
    bytes: Vec<u8>,
    /// Where key `id`'s bytes start in `bytes`; it ends where the next one starts.
    starts: Vec<usize>,
    latest_ms: Vec<u64>,
    max_keys: usize,
}

/// Key `id`'s bytes.
fn name<'a>(bytes: &'a [u8], starts: &[usize], id: u32) -> &'a [u8] {
    let id = id as usize;
    let end = starts.get(id + 1).copied().unwrap_or(bytes.len());
    &bytes[starts[id]..end]
}

impl KeyTable {
    /// A table of at most `max_keys` keys (and at most `u32::MAX`).
    pub(crate) fn new(max_keys: usize) -> Self {
        KeyTable {
            hasher: RandomState::new(),
            ids: HashTable::new(),
            bytes: Vec::new(),
            starts: Vec::new(),
            latest_ms: Vec::new(),
            max_keys: max_keys.min(u32::MAX as usize),
        }
    }

    /// The id of `key`, interning it when new; `None` when it is new and the table is full.
    pub(crate) fn intern(&mut self, key: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(key);
        let (bytes, starts) = (&self.bytes, &self.starts);
        if let Some(&id) = self.ids.find(hash, |&id| name(bytes, starts, id) == key) {
            return Some(id);
        }
        if self.starts.len() >= self.max_keys {
            return None;
        }
        let id = self.starts.len() as u32;
        self.starts.push(self.bytes.len());
        self.bytes.extend_from_slice(key);
        self.latest_ms.push(0);
        let (bytes, starts, hasher) = (&self.bytes, &self.starts, &self.hasher);
        self.ids
            .insert_unique(hash, id, |&id| hasher.hash_one(name(bytes, starts, id)));
        Some(id)
    }

    /// The time key `id` is replayed at for a line of time `at_ms`: the latest time seen for
    /// it (so its state never goes backwards), which it then becomes.
    pub(crate) fn advance(&mut self, id: u32, at_ms: u64) -> u64 {
        let latest = &mut self.latest_ms[id as usize];
        *latest = (*latest).max(at_ms);
        *latest
    }

    pub(crate) fn name(&self, id: u32) -> &[u8] {
        name(&self.bytes, &self.starts, id)
    }

    pub(crate) fn len(&self) -> usize {
        self.starts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_intern_once_and_the_table_is_bounded() {
        let mut keys = KeyTable::new(2);
        assert_eq!(keys.intern(b"a"), Some(0));
        assert_eq!(keys.intern(b"b"), Some(1));
        assert_eq!(keys.intern(b"a"), Some(0));
        assert_eq!(keys.intern(b"c"), None);
        assert_eq!(keys.len(), 2);
        assert_eq!(keys.name(1), b"b");
    }

    #[test]
    fn a_key_never_goes_back_in_time() {
        let mut keys = KeyTable::new(10);
        let id = keys.intern(b"a").unwrap();
        assert_eq!(keys.advance(id, 1000), 1000);
        assert_eq!(keys.advance(id, 900), 1000);
        assert_eq!(keys.advance(id, 1100), 1100);
    }
}
