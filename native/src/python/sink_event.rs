//! A `SinkEvent` seen from native code: its message's topic and raw value, and its
//! version, read by position (only positions 0 and 2 of the event: position 1 may hold an
//! `Undecoded` marker). `tests/unit/connectors/test_redis_native_rows.py` and
//! `test_opensearch_native_actions.py` check the positions against the named tuples.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

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
