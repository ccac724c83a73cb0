//! String columns as Arrow dictionary arrays, built from ids the rows already carry.
//!
//! Why: rows hold interned `u32` ids (kernel names, shapes) or `&'static str` labels (kind,
//! category). Building a plain string column copied every row's bytes into a fresh buffer
//! of tens of megabytes per flush (page faults included), only for the Parquet writer to
//! dictionary-encode it again. A dictionary array carries the distinct strings once plus
//! one small key per row; the Parquet file is the same (a `BYTE_ARRAY` string column,
//! dictionary-encoded: aorta writes no Arrow schema hint, so readers see plain strings).

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Int32Array, StringArray};
use arrow_buffer::{BooleanBuffer, NullBuffer};

use crate::rows::Interner;

/// Per-batch dictionaries over an interner's ids: a batch's dictionary holds only the
/// strings its rows use, in first-use order, so its cost follows the batch, not the
/// interner (which can hold millions of distinct shapes).
#[derive(Default)]
pub(crate) struct DictBuilder {
    /// Interner id → key in the batch being built (`u32::MAX`: not used yet).
    local: Vec<u32>,
    /// Interner ids in key order.
    used: Vec<u32>,
}

impl DictBuilder {
    /// The column of `ids` (an id into `strings` or null).
    pub(crate) fn build(
        &mut self,
        strings: &Interner,
        ids: impl Iterator<Item = Option<u32>>,
    ) -> ArrayRef {
        if self.local.len() < strings.len() {
            self.local.resize(strings.len(), u32::MAX);
        }
        let keys: Vec<i32> = ids.map(|id| id.map_or(-1, |id| self.key(id))).collect();
        let values = self.used.iter().map(|&i| strings.get(i));
        let values = Arc::new(StringArray::from_iter_values(values));
        for &i in &self.used {
            self.local[i as usize] = u32::MAX;
        }
        self.used.clear();
        dict(keys, values)
    }

    fn key(&mut self, id: u32) -> i32 {
        let slot = &mut self.local[id as usize];
        if *slot == u32::MAX {
            *slot = self.used.len() as u32;
            self.used.push(id);
        }
        *slot as i32
    }
}

/// The column of a few static labels (kinds, categories): looked up among the distinct
/// values seen so far, the previous row's first.
pub(crate) fn labels(v: impl Iterator<Item = Option<&'static str>>) -> ArrayRef {
    let mut seen: Vec<&'static str> = Vec::new();
    let mut last = (usize::MAX, "");
    let keys: Vec<i32> = v
        .map(|s| {
            let Some(s) = s else { return -1 };
            if last.0 != usize::MAX && std::ptr::eq(last.1, s) {
                return last.0 as i32;
            }
            let k = match seen.iter().position(|&t| t == s) {
                Some(k) => k,
                None => {
                    seen.push(s);
                    seen.len() - 1
                }
            };
            last = (k, s);
            k as i32
        })
        .collect();
    dict(keys, Arc::new(StringArray::from_iter_values(seen)))
}

/// A dictionary array from keys where -1 marks a null.
fn dict(mut keys: Vec<i32>, values: ArrayRef) -> ArrayRef {
    // Packed 64 rows at a time and fixed up without a branch, so that both loops vectorise:
    // a per-row `NullBuffer::from_iter` was ~1.5 % of an ingest's instructions.
    let nulls = keys.contains(&-1).then(|| {
        let n = NullBuffer::new(BooleanBuffer::collect_bool(keys.len(), |i| keys[i] >= 0));
        keys.iter_mut().for_each(|k| *k = (*k).max(0));
        n
    });
    let keys = Int32Array::new(keys.into(), nulls);
    Arc::new(DictionaryArray::<Int32Type>::try_new(keys, values).expect("keys index the values"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::Array;

    fn strings(a: &ArrayRef) -> Vec<Option<String>> {
        let d = a.as_dictionary::<Int32Type>();
        let v = d.values().as_string::<i32>();
        (0..d.len())
            .map(|i| {
                d.is_valid(i)
                    .then(|| v.value(d.keys().value(i) as usize).to_string())
            })
            .collect()
    }

    #[test]
    fn interned_ids_round_trip_with_nulls_and_reuse() {
        let mut s = Interner::default();
        for t in ["a", "bb", "ccc"] {
            s.id(t);
        }
        let mut b = DictBuilder::default();
        let a = b.build(&s, [Some(2), None, Some(0), Some(2)].into_iter());
        let want = [Some("ccc"), None, Some("a"), Some("ccc")];
        assert_eq!(strings(&a), want.map(|s| s.map(String::from)));
        assert_eq!(a.as_dictionary::<Int32Type>().values().len(), 2);
        // The next batch starts afresh.
        let a = b.build(&s, [Some(1)].into_iter());
        assert_eq!(strings(&a), vec![Some("bb".to_string())]);
        assert_eq!(strings(&b.build(&s, [None].into_iter())), vec![None]);
    }

    #[test]
    fn labels_keep_values_and_nulls() {
        let v = [Some("x"), Some("y"), Some("x"), None, Some("y")];
        let want: Vec<Option<String>> = v.iter().map(|s| s.map(String::from)).collect();
        assert_eq!(strings(&labels(v.into_iter())), want);
        assert_eq!(strings(&labels(std::iter::empty())), vec![]);
    }
}
