//! A chunk of COPY rows converted into one buffer, then grouped by partition and
//! encoded as the log's lines, with no Python object per row: what
//! `convert_chunk` + `cdc.log.Record` + the producer's grouping + `encode_batch` make of
//! the same rows, byte for byte.

use std::ops::Range;

use super::{convert_line_into, Plan, Scratch, Source};
use crate::murmur2::positive_hash;
use crate::record::{encode_line, Number, RecordFields};

/// The rows of a chunk: each one's key and event in `buf`, or still to be given (a row
/// Python converts, `fill`).
#[derive(Debug, Default)]
pub struct Batch {
    buf: Vec<u8>,
    rows: Vec<Option<(Range<usize>, Range<usize>)>>,
    missing: usize,
    first_seq: u64,
    lsn: u64,
}

/// One partition's share of a batch: its rows' indexes, in order.
#[derive(Debug, PartialEq, Eq)]
pub struct Group {
    pub partition: u32,
    pub rows: Vec<usize>,
}

/// Where `encode` leaves a partition's lines.
#[derive(Debug, Default)]
pub struct Encoded {
    /// The lines, each with its newline.
    pub data: Vec<u8>,
    /// Sparse-index entries `(offset, byte position in the segment)`.
    pub entries: Vec<(u64, i64)>,
    pub last_indexed: i64,
}

impl Batch {
    /// Convert `chunk` (whole COPY text lines) for commit position `lsn`, the rows
    /// numbered from `source.first_seq`. Returns the batch and the raw line (its range in
    /// `chunk`) of each row Python must convert, by row index.
    pub fn convert(
        chunk: &[u8],
        plan: &Plan,
        source: &Source<'_>,
        lsn: u64,
    ) -> (Batch, Vec<(usize, Range<usize>)>) {
        let mut batch = Batch {
            buf: Vec::with_capacity(chunk.len() * 4),
            first_seq: source.first_seq,
            lsn,
            ..Batch::default()
        };
        let fallbacks = batch.convert_rows(chunk, plan, source);
        (batch, fallbacks)
    }

    /// Convert the rows of one more chunk (of the same table), numbered on from the
    /// batch's last: `source.first_seq` must be the next number. Returns what `convert`
    /// does, the row indexes counting every row of the batch.
    pub fn extend(
        &mut self,
        chunk: &[u8],
        plan: &Plan,
        source: &Source<'_>,
    ) -> Result<Vec<(usize, Range<usize>)>, String> {
        let next = self.seq(self.len());
        if source.first_seq != next {
            return Err(format!(
                "the rows are numbered from {}, not the batch's next {next}",
                source.first_seq
            ));
        }
        self.buf.reserve(chunk.len() * 4);
        Ok(self.convert_rows(chunk, plan, source))
    }

    fn convert_rows(
        &mut self,
        chunk: &[u8],
        plan: &Plan,
        source: &Source<'_>,
    ) -> Vec<(usize, Range<usize>)> {
        let mut fallbacks = Vec::new();
        let mut scratch = Scratch::default();
        let mut start = 0;
        while start < chunk.len() {
            let end = memchr::memchr(b'\n', &chunk[start..]).map_or(chunk.len(), |i| start + i);
            let index = self.rows.len();
            let seq = self.seq(index);
            let row = convert_line_into(
                &chunk[start..end],
                plan,
                Some((source, seq)),
                &mut scratch,
                &mut self.buf,
            );
            if row.is_none() {
                fallbacks.push((index, start..end));
                self.missing += 1;
            }
            self.rows.push(row);
            start = end + 1;
        }
        fallbacks
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The sequence number of row `index`.
    pub fn seq(&self, index: usize) -> u64 {
        self.first_seq.saturating_add(index as u64)
    }

    /// The key and event of row `index`, None while Python has not converted it.
    pub fn row(&self, index: usize) -> Option<(&[u8], &[u8])> {
        let (key, value) = self.rows.get(index)?.as_ref()?;
        Some((&self.buf[key.clone()], &self.buf[value.clone()]))
    }

    /// Give the key and event of a row Python converted.
    pub fn fill(&mut self, index: usize, key: &[u8], value: &[u8]) -> Result<(), String> {
        match self.rows.get(index) {
            None => return Err(format!("row {index} is out of range")),
            Some(Some(_)) => return Err(format!("row {index} is already converted")),
            Some(None) => {}
        }
        let start = self.buf.len();
        self.buf.extend_from_slice(key);
        self.buf.extend_from_slice(value);
        let split = start + key.len();
        self.rows[index] = Some((start..split, split..self.buf.len()));
        self.missing -= 1;
        Ok(())
    }

    /// The rows per partition of a topic of `count` partitions (`partition_for` of the
    /// key), the partitions in order of first appearance, as the producer groups records.
    pub fn group(&self, count: u32) -> Result<Vec<Group>, String> {
        if count == 0 {
            return Err("a topic has at least one partition".into());
        }
        if self.missing > 0 {
            return Err(format!("{} rows are still to be converted", self.missing));
        }
        let mut groups: Vec<Group> = Vec::new();
        let mut slots: Vec<Option<usize>> = vec![None; count.min(1 << 20) as usize];
        for (index, row) in self.rows.iter().enumerate() {
            let Some((key, _)) = row else {
                return Err(format!("row {index} is still to be converted"));
            };
            let partition = if count > 1 {
                positive_hash(&self.buf[key.clone()]) % count
            } else {
                0
            };
            let slot = slots
                .get_mut(partition as usize)
                .ok_or("too many partitions")?;
            let group = *slot.get_or_insert_with(|| {
                groups.push(Group {
                    partition,
                    rows: Vec::new(),
                });
                groups.len() - 1
            });
            groups[group].rows.push(index);
        }
        Ok(groups)
    }

    /// Encode `rows` (indexes) as consecutive lines from `first_offset`, the first at byte
    /// `size` of the segment, into `out` (cleared first): as `encode_batch` does for their
    /// records (`Record(topic, key, value, Position(lsn, seq))`, no timestamp of their own,
    /// not tombstones). A sparse-index entry is due for a line that starts
    /// `index_interval` or more bytes after `last_indexed`.
    #[allow(clippy::too_many_arguments)]
    pub fn encode(
        &self,
        rows: &[usize],
        first_offset: u64,
        now_ms: &Number,
        size: i64,
        last_indexed: i64,
        index_interval: i64,
        out: &mut Encoded,
    ) -> Result<(), String> {
        out.data.clear();
        out.entries.clear();
        let mut last_indexed = last_indexed;
        let mut position = i128::from(size);
        let mut offset = first_offset;
        for &index in rows {
            let Some(Some((key, value))) = self.rows.get(index) else {
                return Err(format!("row {index} is missing"));
            };
            if position - i128::from(last_indexed) >= i128::from(index_interval) {
                last_indexed = i64::try_from(position)
                    .map_err(|_| format!("byte position {position} overflows"))?;
                out.entries.push((offset, last_indexed));
            }
            let before = out.data.len();
            encode_line(
                &mut out.data,
                &RecordFields {
                    offset,
                    timestamp_ms: now_ms.clone(),
                    commit_lsn: Number::Unsigned(self.lsn),
                    seq: Number::Unsigned(self.seq(index)),
                    tombstone: false,
                    key: &self.buf[key.clone()],
                    value: &self.buf[value.clone()],
                },
            );
            position += (out.data.len() - before) as i128;
            offset = offset
                .checked_add(1)
                .ok_or_else(|| format!("offset {offset} + 1 overflows"))?;
        }
        out.last_indexed = last_indexed;
        Ok(())
    }
}
