//! A `SinkEvent` seen from native code: its message's topic and raw value, and its
//! version, read by position (only positions 0 and 2 of the event: position 1 may hold an
//! `Undecoded` marker). `tests/unit/connectors/test_redis_native_rows.py` and
//! `test_opensearch_native_actions.py` check the positions against the named tuples.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use crate::redis_args::{plain_event, PlainEvent};

const EVENT_MESSAGE: usize = 0;
const EVENT_VERSION: usize = 2;
const MESSAGE_TOPIC: usize = 0;
/// `Message.value` and `Message.position`.
pub const MESSAGE_VALUE: usize = 5;
pub const MESSAGE_POSITION: usize = 6;

/// A `SinkEvent`'s topic, raw value and version.
pub type EventFields<'py> = (Bound<'py, PyString>, Bound<'py, PyBytes>, u64);

/// The topic, raw value and version of a `SinkEvent`; None if it is not shaped as one.
pub fn fields<'py>(item: &Bound<'py, PyAny>) -> PyResult<Option<EventFields<'py>>> {
    let Ok(event) = item.cast::<PyTuple>() else {
        return Ok(None);
    };
    if event.len() <= EVENT_VERSION {
        return Ok(None);
    }
    let Ok(version) = event.get_item(EVENT_VERSION)?.extract::<u64>() else {
        return Ok(None);
    };
    let message = event.get_item(EVENT_MESSAGE)?;
    let Ok(message) = message.cast::<PyTuple>() else {
        return Ok(None);
    };
    if message.len() <= MESSAGE_VALUE {
        return Ok(None);
    }
    let Ok(topic) = message.get_item(MESSAGE_TOPIC)?.cast_into::<PyString>() else {
        return Ok(None);
    };
    let Ok(value) = message.get_item(MESSAGE_VALUE)?.cast_into::<PyBytes>() else {
        return Ok(None);
    };
    Ok(Some((topic, value, version)))
}

/// A plain event of a batch (`redis_args::plain_event`): its topic, the event and its
/// version; None when the item is not a `SinkEvent` or its event is not plain.
pub fn plain<'py>(
    item: &Bound<'py, PyAny>,
) -> PyResult<Option<(Bound<'py, PyString>, PlainEvent, u64)>> {
    let Some((topic, raw, version)) = fields(item)? else {
        return Ok(None);
    };
    Ok(plain_event(raw.as_bytes()).map(|event| (topic, event, version)))
}

/// `(topic, schema, table)`: a table as the renderers' `tables` dicts key it.
pub type TableName = (String, String, String);

/// Where a batch event's table stands (`Tables::number`).
pub enum Lookup {
    /// Its number in the batch's tables.
    Found(usize),
    /// The caller's `tables` does not hold it: Python adds it and calls again.
    Missing(TableName),
    /// Its entry says the renderer does not take it (a view reads it, or a bad entry):
    /// Python decides the batch.
    Declined,
}

/// The tables a batch met, in order of first sight, each with what a renderer made of
/// its entry in the caller's `tables` dict (its spec).
pub struct Tables<S> {
    names: Vec<TableName>,
    specs: Vec<S>,
    last: usize, // the previous event's: a batch is mostly one table
}

impl<S> Tables<S> {
    pub fn new() -> Self {
        Tables {
            names: Vec::new(),
            specs: Vec::new(),
            last: 0,
        }
    }

    /// The number of `event`'s table; the first time, `make` makes its spec of the
    /// table's entry in `tables` (None: declined).
    pub fn number<'py>(
        &mut self,
        tables: &Bound<'py, PyDict>,
        topic: &str,
        event: &PlainEvent,
        make: impl FnOnce(&Bound<'py, PyAny>) -> PyResult<Option<S>>,
    ) -> PyResult<Lookup> {
        let same = |(t, schema, table): &TableName| {
            t == topic && *schema == event.schema && *table == event.table
        };
        let found = if self.names.get(self.last).is_some_and(same) {
            Some(self.last)
        } else {
            self.names.iter().position(same)
        };
        let number = match found {
            Some(number) => number,
            None => {
                let name = (topic.to_owned(), event.schema.clone(), event.table.clone());
                let Some(entry) = tables.get_item((topic, &event.schema, &event.table))? else {
                    return Ok(Lookup::Missing(name));
                };
                let Some(spec) = make(&entry)? else {
                    return Ok(Lookup::Declined);
                };
                self.names.push(name);
                self.specs.push(spec);
                self.specs.len() - 1
            }
        };
        self.last = number;
        Ok(Lookup::Found(number))
    }

    /// The spec of table `number` (from `number`).
    pub fn spec(&mut self, number: usize) -> &mut S {
        &mut self.specs[number]
    }

    /// The tables' names, in order of their numbers.
    pub fn names(&self) -> &[TableName] {
        &self.names
    }

    /// The tables' specs, in order of their numbers.
    pub fn specs(&self) -> &[S] {
        &self.specs
    }
}
