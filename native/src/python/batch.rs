//! `feed_batch`: the CopyData messages of the replication stream, as received, into
//! records (or stream spool frames) in one call, for as long as they are the plain
//! messages of normal and streamed transactions (the Python side is
//! `NativeChanges.feed_batch` in `cdc/capture/stream/native.py`).

use std::collections::HashMap;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use super::dml::record;
use super::snapshot::SnapshotPlan;
use crate::pgoutput::transaction::{commit_tail, push_lsn, read_begin, read_commit, Begin};
use crate::pgoutput::{convert_change, convert_streamed_change, streamed_xid, Source};
use crate::spool::{push_frame, Frame};

/// An XLogData message: `w`, start LSN, end LSN, send time, then the pgoutput message.
const XLOG_HEADER: usize = 25;

/// One relation's conversion, as `NativeChanges` hands it over.
struct Table {
    plan: Py<SnapshotPlan>,
    topic: Py<PyString>,
    head: Vec<u8>,
    topic_bytes: Vec<u8>,
    source_names: Vec<u8>,
}

/// The relations `feed_batch` has looked up, kept between calls (a spread workload
/// touches each of thousands of tables about once per call): OID → its conversion, or
/// None when Python converts its changes. `NativeChanges` empties it whenever a shape
/// may have changed (`clear`).
#[pyclass(module = "distributary_native")]
#[derive(Default)]
pub struct BatchTables {
    known: HashMap<u32, Option<Table>>,
}

#[pymethods]
impl BatchTables {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Forget every relation: each is looked up again (through `learn`) when next seen.
    fn clear(&mut self) {
        self.known.clear();
    }

    fn __len__(&self) -> usize {
        self.known.len()
    }
}

/// The transaction open while the batch is read.
struct Open {
    commit_lsn: u64,
    lsn_text: Vec<u8>,
    tail: Vec<u8>,
    seq: u64,
}

/// What `feed_batch` returns: `(index, frames, commit, begin, seq, lsn)`.
type Outcome<'py> = (
    usize,
    Option<Bound<'py, PyBytes>>,
    Option<(u8, u64, u64, i64)>,
    Option<(u64, i64, u32)>,
    u64,
    u64,
);

/// Take the messages of `raw` (CopyData payloads: bytes or memoryviews) from index
/// `start` for as long as each is an XLogData holding one of:
///
/// - an Insert, Update or Delete of a relation whose conversion `tables` holds (for an
///   OID not in it, `learn(oid)` gives `(plan, topic, head, topic UTF-8, source names)`,
///   or None: Python converts the relation's changes; either is kept in `tables`):
///   inside a stream block (`stream`) its spool frame
///   (what `StreamSpool.add` writes) goes to `frames`; in the open transaction its
///   record (what `complete` makes of the event) is appended to `ready`;
/// - with `begins`, the Begin of a normal transaction when none is open;
/// - the Commit of the open one.
///
/// `open` is the transaction open before (`(commit_lsn, commit_lsn_text, tail, seq)`).
/// Returns `(index, frames, commit, begin, seq, lsn)`:
/// the index of the first message not taken (Python's to decode), the spool frames
/// (None if none), the last Commit taken (`(flags, commit_lsn, end_lsn, commit_ts)`),
/// the Begin of the transaction open at the end if it began here (`(final_lsn,
/// commit_ts, xid)`), that transaction's next `seq`, and the end LSN of the last
/// message taken (0 if none).
#[pyfunction]
#[pyo3(signature = (raw, start, tables, learn, open, stream, begins, ready))]
#[allow(clippy::too_many_arguments)] // one call per batch of messages
pub fn feed_batch<'py>(
    py: Python<'py>,
    raw: &Bound<'py, PyList>,
    start: usize,
    tables: &Bound<'py, BatchTables>,
    learn: &Bound<'py, PyAny>,
    open: Option<(u64, Vec<u8>, Vec<u8>, u64)>,
    stream: bool,
    begins: bool,
    ready: &Bound<'py, PyList>,
) -> PyResult<Outcome<'py>> {
    let mut open = open.map(|(commit_lsn, lsn_text, tail, seq)| Open {
        commit_lsn,
        lsn_text,
        tail,
        seq,
    });
    let mut known = tables.try_borrow_mut()?;
    let mut tables = Tables {
        known: &mut known.known,
        learn,
    };
    let mut frames: Vec<u8> = Vec::new();
    let mut commit = None;
    let mut begin: Option<Begin> = None;
    let mut last_lsn = 0u64;
    let mut data: Vec<u8> = Vec::new();
    let mut index = start;
    while index < raw.len() {
        let item = raw.get_item(index)?;
        let Ok(buffer) = PyBuffer::<u8>::get(&item) else {
            break;
        };
        if !buffer.is_c_contiguous() {
            break;
        }
        data.clear();
        data.resize(buffer.len_bytes(), 0);
        buffer.copy_to_slice(py, &mut data)?;
        drop(buffer);
        if data.len() <= XLOG_HEADER || data[0] != b'w' {
            break;
        }
        let lsn = u64::from_be_bytes(data[1..9].try_into().unwrap_or_default());
        let end_lsn = u64::from_be_bytes(data[9..17].try_into().unwrap_or_default());
        let payload = &data[XLOG_HEADER..];
        let taken = match payload[0] {
            b'I' | b'U' | b'D' if stream => {
                let table = tables.of(payload, 5)?;
                match (table, streamed_xid(payload)) {
                    (Some(table), Some(subxid)) => {
                        convert_streamed_change(payload, &table.plan.get().plan)
                            .and_then(|change| {
                                push_frame(
                                    &mut frames,
                                    &Frame {
                                        subxid,
                                        topic: &table.topic_bytes,
                                        key: &change.key,
                                        body: &change.value,
                                        source_names: &table.source_names,
                                        lsn,
                                        tombstone: change.tombstone,
                                    },
                                )
                            })
                            .is_some()
                    }
                    _ => false,
                }
            }
            b'I' | b'U' | b'D' => match (open.as_mut(), tables.of(payload, 1)?) {
                (Some(transaction), Some(table)) => {
                    let source = Source {
                        head: &table.head,
                        lsn,
                        commit_lsn: &transaction.lsn_text,
                        seq: transaction.seq,
                        tail: &transaction.tail,
                    };
                    match convert_change(payload, &table.plan.get().plan, Some(&source)) {
                        Some(change) => {
                            let made = record(
                                py,
                                table.topic.bind(py),
                                &change,
                                transaction.commit_lsn,
                                transaction.seq,
                            )?;
                            ready.append(made)?;
                            transaction.seq += 1;
                            true
                        }
                        None => false,
                    }
                }
                _ => false,
            },
            b'B' if begins && !stream && open.is_none() => {
                match read_begin(payload).and_then(|b| commit_tail(&b).map(|tail| (b, tail))) {
                    Some((found, tail)) => {
                        let mut lsn_text = Vec::with_capacity(20);
                        push_lsn(&mut lsn_text, found.final_lsn);
                        open = Some(Open {
                            commit_lsn: found.final_lsn,
                            lsn_text,
                            tail,
                            seq: 0,
                        });
                        begin = Some(found);
                        true
                    }
                    None => false,
                }
            }
            b'C' if !stream && open.is_some() => match read_commit(payload) {
                Some(found) => {
                    open = None;
                    begin = None;
                    commit = Some((
                        found.flags,
                        found.commit_lsn,
                        found.end_lsn,
                        found.commit_ts,
                    ));
                    true
                }
                None => false,
            },
            _ => false,
        };
        if !taken {
            break;
        }
        last_lsn = end_lsn;
        index += 1;
    }
    let frames = (!frames.is_empty()).then(|| PyBytes::new(py, &frames));
    let seq = open.as_ref().map_or(0, |o| o.seq);
    let begin = begin.map(|b| (b.final_lsn, b.commit_ts, b.xid));
    Ok((index, frames, commit, begin, seq, last_lsn))
}

/// The tables of a batch: those known, and `learn(oid)` for one not known yet (its
/// conversion, or None: Python converts its changes; either is then known).
struct Tables<'a, 'py> {
    known: &'a mut HashMap<u32, Option<Table>>,
    learn: &'a Bound<'py, PyAny>,
}

impl Tables<'_, '_> {
    /// The conversion of the relation whose OID is at byte `at` of `payload`; None when
    /// Python must convert its changes.
    fn of(&mut self, payload: &[u8], at: usize) -> PyResult<Option<&Table>> {
        let Some(oid) = payload.get(at..at + 4) else {
            return Ok(None);
        };
        let oid = u32::from_be_bytes([oid[0], oid[1], oid[2], oid[3]]);
        let found = match self.known.entry(oid) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let learned = self.learn.call1((oid,))?;
                let table = if learned.is_none() {
                    None
                } else {
                    Some(unpack(&learned.cast_into::<PyTuple>()?)?)
                };
                entry.insert(table)
            }
        };
        Ok(found.as_ref())
    }
}

/// `(plan, topic, head, topic UTF-8, source names)`.
fn unpack(entry: &Bound<'_, PyTuple>) -> PyResult<Table> {
    Ok(Table {
        plan: entry.get_item(0)?.cast_into::<SnapshotPlan>()?.unbind(),
        topic: entry.get_item(1)?.cast_into::<PyString>()?.unbind(),
        head: entry.get_item(2)?.extract()?,
        topic_bytes: entry.get_item(3)?.extract()?,
        source_names: entry.get_item(4)?.extract()?,
    })
}
