//! A table's conversion: its columns' kinds and names (as JSON), its key columns, and the
//! fixed pieces of its events.

use super::json;
use super::values::Codec;

/// What converting a table's rows needs: its columns, their codecs, its key columns.
#[derive(Debug)]
pub struct Plan {
    pub(crate) kinds: Vec<Codec>,
    /// Each column's name as JSON followed by `:`.
    pub(crate) names: Vec<Vec<u8>>,
    pub(crate) key_indexes: Vec<usize>,
    /// `{"op":"r","key":`
    pub(crate) head: Vec<u8>,
    /// `,"unchanged":[],"schema_version":N`
    pub(crate) tail: Vec<u8>,
    /// `,"schema_version":N` (the streaming capture's events, `crate::pgoutput`)
    pub(crate) version: Vec<u8>,
}

impl Plan {
    /// A plan, or an error naming what does not fit (an unknown kind code, a key index
    /// out of range or repeated, no columns, more names than kinds).
    pub fn new(
        kinds: &[u8],
        names: &[&str],
        key_indexes: &[usize],
        schema_version: i64,
    ) -> Result<Plan, String> {
        if kinds.is_empty() || kinds.len() != names.len() {
            return Err(format!(
                "a plan needs one kind per column name ({} kinds, {} names)",
                kinds.len(),
                names.len()
            ));
        }
        let kinds = kinds
            .iter()
            .map(|&code| Codec::from_code(code).ok_or(format!("unknown codec kind {code}")))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, &index) in key_indexes.iter().enumerate() {
            if index >= kinds.len() || key_indexes[..i].contains(&index) {
                return Err(format!("key index {index} is out of range or repeated"));
            }
        }
        let names = names
            .iter()
            .map(|name| {
                let mut out = Vec::with_capacity(name.len() + 3);
                json::push_string(&mut out, name.as_bytes());
                out.push(b':');
                out
            })
            .collect();
        Ok(Plan {
            kinds,
            names,
            key_indexes: key_indexes.to_vec(),
            head: b"{\"op\":\"r\",\"key\":".to_vec(),
            tail: format!(",\"unchanged\":[],\"schema_version\":{schema_version}").into_bytes(),
            version: format!(",\"schema_version\":{schema_version}").into_bytes(),
        })
    }
}
