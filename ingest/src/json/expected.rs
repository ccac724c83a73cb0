//! Reading a member whose key the reader expects.
//!
//! Why: a reader that knows which key usually comes next (the `args` of a Kineto kernel or
//! CPU op, which Kineto writes in one order) compares a few bytes instead of building
//! `member_fast`'s masks and searching them for the key's end. When the bytes differ nothing
//! is consumed and the reader goes on member by member, so what it reads is the same either
//! way (proptests in `trace_event`). Issue 33 measured it: for `args` picks it is faster; for
//! an event's own short keys it was slower, since there `member_fast` reads key and value
//! from one look and this path reads the value with a second one (docs/PERFORMANCE.md).

use super::{prefetch, short, Cursor, JResult, PREFETCH_AHEAD};

impl<'a> Cursor<'a> {
    /// The next member when its key is written as `key` says (`"key":`, the quotes and the
    /// colon included), after blanks and, unless `first`, a `,` and blanks: true with the
    /// cursor after the colon and one space (read the value with `value`, which reads it as
    /// `skip_value` does), or false with nothing consumed (another key, an escape, a blank
    /// before the colon, the end of the input…): the caller then reads the member with
    /// `next_member_raw`, errors and all. One 32-byte compare instead of `member_fast`'s
    /// masks and search for the key's end.
    #[inline(always)]
    pub(crate) fn member_key_at(&mut self, first: bool, key: &Key) -> bool {
        let b = self.b;
        prefetch(b, self.i + PREFETCH_AHEAD);
        let mut i = self.i;
        while b.get(i).is_some_and(|&c| c <= b' ') {
            i += 1;
        }
        if !first {
            if b.get(i) != Some(&b',') {
                return false;
            }
            i += 1;
            while b.get(i).is_some_and(|&c| c <= b' ') {
                i += 1;
            }
        }
        let len = key.len as usize;
        let same = match b.get(i..i + 32) {
            Some(w) => {
                let eq = short::equal_bytes(w.try_into().expect("32 bytes"), &key.bytes);
                eq | !key.mask == u32::MAX
            }
            None => b.get(i..i + len) == Some(&key.bytes[..len]),
        };
        if same {
            self.skip_one_space(i + len);
        }
        same
    }

    /// Puts the cursor at `i`, past one space there (after a key's colon, the usual;
    /// `value` reads any other blanks).
    #[inline(always)]
    fn skip_one_space(&mut self, i: usize) {
        self.i = i + (self.b.get(i) == Some(&b' ')) as usize;
    }

    /// `skip_value`, with the usual string and scalar cases inlined into the caller.
    #[inline(always)]
    pub(crate) fn value(&mut self) -> JResult<&'a [u8]> {
        let start = self.i;
        match self.b.get(start) {
            Some(b'"') => {
                self.string_raw()?;
                Ok(&self.b[start..self.i])
            }
            Some(&c) if c > b' ' && c != b'{' && c != b'[' => self.scalar_text(),
            _ => self.skip_value(),
        }
    }
}

/// A key as a writer usually writes it before its value, `"key":`, for `Cursor::member_key_at`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key {
    /// `"key":`, then zeros up to 32 bytes.
    bytes: [u8; 32],
    /// Bit `k` set for each of the `len` bytes that must match.
    mask: u32,
    len: u8,
}

impl Key {
    /// `key` (at most 29 bytes, no escapes) as `"key":`.
    pub(crate) const fn new(key: &[u8]) -> Key {
        assert!(key.len() <= 29, "a key of at most 29 bytes");
        let mut bytes = [0u8; 32];
        bytes[0] = b'"';
        let mut k = 0;
        while k < key.len() {
            assert!(key[k] != b'"' && key[k] != b'\\', "a key without escapes");
            bytes[k + 1] = key[k];
            k += 1;
        }
        bytes[key.len() + 1] = b'"';
        bytes[key.len() + 2] = b':';
        let len = key.len() + 3;
        Key {
            bytes,
            mask: if len == 32 {
                u32::MAX
            } else {
                (1u32 << len) - 1
            },
            len: len as u8,
        }
    }

    /// The key's own bytes (without the quotes and the colon).
    pub(crate) fn name(&self) -> &[u8] {
        &self.bytes[1..self.len as usize - 2]
    }
}
