//! `group_records`: a batch of records → the records of each partition, in one call (the
//! loop at the top of `cdc.log.file.producer.FileProducer.append`).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use super::encode::as_tuple;
use crate::murmur2::positive_hash;

/// `Record`'s fields by position (`tests/unit/log/test_native_group.py` checks them).
const TOPIC: usize = 0;
const KEY: usize = 1;
const PARTITION: usize = 6;

/// `{(topic, partition): [record, …]}` for `records` (a list of `cdc.log.Record`), the
/// partitions in order of first appearance and each one's records in their order: a
/// record goes to `partition_for(key, count)` where `count` is `counts[topic]` (0 when
/// it is 1). None, and Python groups them, when a record is not a plain `Record` whose
/// `partition` is None, its topic is not in `counts` (or its count is not a positive
/// int), or its key is not `bytes`. When every record goes to one partition (the common
/// batch), that partition's list is `records` itself, not a copy.
#[pyfunction]
pub fn group_records<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyList>,
    counts: &Bound<'py, PyDict>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let groups = PyDict::new(py);
    let mut last: Option<Topic<'py>> = None;
    let mut tuple_type = None;
    // the partition of the leading run of records that all go to one partition (by the
    // same topic object), not put in a list of their own until another partition shows up
    let mut run: Option<(Bound<'py, PyAny>, u32)> = None;
    let mut run_length = 0;
    let mut grouping = false; // the run ended: every record goes to its partition's list
    for item in records.iter() {
        let Some(record) = as_tuple(&item, &mut tuple_type) else {
            return Ok(None);
        };
        if record.len() <= PARTITION || !record.get_borrowed_item(PARTITION)?.is_none() {
            return Ok(None);
        }
        let topic = record.get_borrowed_item(TOPIC)?;
        let same = last.as_ref().is_some_and(|t| t.name.is(&*topic));
        if !same {
            let Some(count) = counts.get_item(&*topic)? else {
                return Ok(None);
            };
            let Ok(count) = count.extract::<u32>() else {
                return Ok(None);
            };
            if count == 0 || count > 1 << 20 {
                return Ok(None);
            }
            last = Some(Topic {
                name: topic.to_owned(),
                count,
                lists: vec![None; count as usize],
            });
        }
        let Some(Topic { name, count, lists }) = last.as_mut() else {
            return Ok(None);
        };
        let partition = if *count > 1 {
            let key = record.get_borrowed_item(KEY)?;
            let Ok(key) = key.cast_exact::<PyBytes>() else {
                return Ok(None);
            };
            positive_hash(key.as_bytes()) % *count
        } else {
            0
        };
        if !grouping {
            match &run {
                None => {
                    run = Some((name.clone(), partition));
                    run_length = 1;
                    continue;
                }
                Some((run_topic, run_partition))
                    if run_topic.is(&*name) && *run_partition == partition =>
                {
                    run_length += 1;
                    continue;
                }
                Some((run_topic, run_partition)) => {
                    // another partition: the run becomes its partition's first list (found
                    // in `groups` by the lookup below when its partition comes up again)
                    let group_key = PyTuple::new(py, [run_topic.clone(), int(py, *run_partition)])?;
                    groups.set_item(group_key, records.get_slice(0, run_length))?;
                    grouping = true;
                }
            }
        }
        let slot = &mut lists[partition as usize];
        let list = match slot {
            Some(list) => list,
            None => {
                let group_key = PyTuple::new(py, [name.clone(), int(py, partition)])?;
                let list = match groups.get_item(&group_key)? {
                    Some(found) => found.cast_into::<PyList>()?,
                    None => {
                        let list = PyList::empty(py);
                        groups.set_item(group_key, &list)?;
                        list
                    }
                };
                slot.insert(list)
            }
        };
        list.append(record)?;
    }
    if let (false, Some((topic, partition))) = (grouping, run) {
        groups.set_item(PyTuple::new(py, [topic, int(py, partition)])?, records)?;
    }
    Ok(Some(groups))
}

/// The topic of the previous record (the object), its partition count and the lists of
/// its partitions met so far.
struct Topic<'py> {
    name: Bound<'py, PyAny>,
    count: u32,
    lists: Vec<Option<Bound<'py, PyList>>>,
}

fn int(py: Python<'_>, value: u32) -> Bound<'_, PyAny> {
    value
        .into_pyobject(py)
        .map_or_else(|e| match e {}, Bound::into_any)
}
