//! The log's record line, without Python: the same format as `cdc/log/file/codec.py`.
//!
//! ```text
//! {"crc":"1a2b3c4d","offset":7,"ts":1763719200123,"lsn":23803808,"seq":3,"del":false,"kl":8,"key":{"id":42},"value":{…}}
//! ```
//!
//! `crc` is the CRC-32 (8 lowercase hex digits) of everything between `",` after it and
//! the final `}`. Numbers are kept as their digits here; the bindings turn them into
//! Python ints (of any size, as the reference does).

/// Where the checksummed body starts: after `{"crc":"` (8 bytes), 8 hex digits and `",`.
pub const BODY_START: usize = 18;
pub const HEAD: &[u8] = b"{\"crc\":\"";
pub const VALUE_SEP: &[u8] = b",\"value\":";

mod decode;
mod encode;
#[cfg(test)]
mod tests;

pub use decode::{decode_line, parse_u64, FormatError, Line};
pub use encode::{encode_line, push_u64, Number, RecordFields};
