//! `opensearch_actions`: a batch of sink events → the OpenSearch sink's bulk actions, in
//! one call, from the events' raw JSON (the Python side is
//! `connectors/opensearch/native_actions.py`; the sink's Python path stays the reference).

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::convert::json::push_string;
use crate::opensearch::{deep_kinds, field_kinds, push_action, Kind};
use crate::redis_args::push_encoded_key;

use super::sink_event::{plain, Lookup, Tables};

/// One table of the batch: where its documents go and the kinds of their fields, and of
/// every value by its path (None once a document was not read so: `deep_kinds`).
struct TableSpec {
    alias_json: Vec<u8>,
    kinds: Vec<(String, Kind)>,
    positions: HashMap<String, usize>,
    deep: Option<PathKinds>,
}

/// The kinds of values by path of a table's documents (`deep_kinds`), in order of first
/// sight: documents of one shape report their paths in the same order, so the next
/// path is mostly the one after the last (no hashing).
#[derive(Default)]
struct PathKinds {
    kinds: Vec<(String, Kind)>,
    positions: HashMap<String, usize>,
    next: usize,
}

impl PathKinds {
    fn add(&mut self, path: &str, kind: Kind) {
        let position = match self.kinds.get(self.next) {
            Some((known, _)) if known == path => self.next,
            _ => match self.positions.get(path) {
                Some(&position) => position,
                None => {
                    self.positions.insert(path.to_owned(), self.kinds.len());
                    self.kinds.push((path.to_owned(), 0));
                    self.kinds.len() - 1
                }
            },
        };
        self.kinds[position].1 |= kind;
        self.next = position + 1;
    }
}

impl TableSpec {
    /// The spec of a table whose entry in `tables` is `entry`: its alias, or None (a view
    /// reads the table).
    fn of(entry: &Bound<'_, PyAny>) -> PyResult<Option<TableSpec>> {
        let Ok(alias) = entry.cast::<PyString>() else {
            return Ok(None);
        };
        let mut alias_json = Vec::with_capacity(32);
        push_string(&mut alias_json, alias.to_str()?.as_bytes());
        Ok(Some(TableSpec {
            alias_json,
            kinds: Vec::new(),
            positions: HashMap::new(),
            deep: Some(PathKinds::default()),
        }))
    }

    /// Add the kinds of `document`'s values by path (`deep_kinds`); `path` is scratch.
    fn add_deep(&mut self, document: &[u8], path: &mut String) {
        let Some(deep) = self.deep.as_mut() else {
            return;
        };
        deep.next = 0;
        let read = deep_kinds(document, path, &mut |at, kind| deep.add(at, kind));
        if !read {
            self.deep = None;
        }
    }

    fn add_kind(&mut self, at: usize, name: &str, kind: Kind) {
        if let Some((known, kinds)) = self.kinds.get_mut(at) {
            if known == name {
                *kinds |= kind; // fields mostly come in the same order
                return;
            }
        }
        match self.positions.get(name) {
            Some(&position) => self.kinds[position].1 |= kind,
            None => {
                self.positions.insert(name.to_owned(), self.kinds.len());
                self.kinds.push((name.to_owned(), kind));
            }
        }
    }
}

/// What a call answers: `(actions, missing)`.
type Answer<'py> = (
    Option<Bound<'py, PyTuple>>,
    Option<(String, String, String)>,
);

/// The bulk actions of `events` (a list of `SinkEvent`):
/// `((payloads, kinds, table_of, tables, fields, deep), None)` where `payloads[i]` is the
/// action (and document) of event `i`, `kinds[i]` `"index"` or `"delete"`, `table_of[i]`
/// its table's number in `tables` (`(topic, schema, table)` in order of first sight), and
/// `fields[t]` a dict of the top-level fields of table `t`'s documents to the bits of the
/// kinds of their values (`opensearch::KIND_*`), and `deep[t]` a dict of every value's
/// path (`opensearch::deep_kinds`) to those bits, or None when a document was not read so.
///
/// `tables` maps `(topic, schema, table)` to the alias its documents are written through,
/// or to None (a view reads the table). A table not in it answers
/// `(None, (topic, schema, table))`: add it and call again. `(None, None)`: the batch is
/// not plain (or has an id longer than `max_id_bytes`, a field this does not read):
/// Python decides.
#[pyfunction]
#[pyo3(signature = (events, tables, max_id_bytes))]
pub fn opensearch_actions<'py>(
    py: Python<'py>,
    events: &Bound<'py, PyList>,
    tables: &Bound<'py, PyDict>,
    max_id_bytes: usize,
) -> PyResult<Answer<'py>> {
    let mut specs: Tables<TableSpec> = Tables::new();
    let mut payloads: Vec<Bound<'py, PyBytes>> = Vec::with_capacity(events.len());
    let mut kinds: Vec<Bound<'py, PyString>> = Vec::with_capacity(events.len());
    let mut table_of: Vec<usize> = Vec::with_capacity(events.len());
    let (index, delete) = (PyString::new(py, "index"), PyString::new(py, "delete"));
    let mut doc_id = String::with_capacity(32);
    let mut out: Vec<u8> = Vec::with_capacity(512);
    let mut path = String::with_capacity(64);
    for item in events.iter() {
        let Some((topic, event, version)) = plain(&item)? else {
            return Ok((None, None));
        };
        let number = match specs.number(tables, topic.to_str()?, &event, TableSpec::of)? {
            Lookup::Found(number) => number,
            Lookup::Missing(table) => return Ok((None, Some(table))),
            Lookup::Declined => return Ok((None, None)),
        };
        let spec = specs.spec(number);
        doc_id.clear();
        push_encoded_key(&mut doc_id, &event.key);
        if doc_id.len() > max_id_bytes {
            return Ok((None, None)); // refused by the Python path, with its reason
        }
        out.clear();
        if event.upsert {
            let Some(members) = field_kinds(&event.value) else {
                return Ok((None, None));
            };
            for (at, (name, kind)) in members.into_iter().enumerate() {
                spec.add_kind(at, name, kind);
            }
            spec.add_deep(&event.value, &mut path);
            push_action(
                &mut out,
                &spec.alias_json,
                &doc_id,
                version,
                Some(&event.value),
            );
        } else {
            push_action(&mut out, &spec.alias_json, &doc_id, version, None);
        }
        payloads.push(PyBytes::new(py, &out));
        kinds.push(if event.upsert { &index } else { &delete }.clone());
        table_of.push(number);
    }
    let fields = PyList::empty(py);
    let deep = PyList::empty(py);
    for spec in specs.specs() {
        let kinds = PyDict::new(py);
        for (name, kind) in &spec.kinds {
            kinds.set_item(name, kind)?;
        }
        fields.append(kinds)?;
        match &spec.deep {
            Some(paths) => {
                let kinds = PyDict::new(py);
                for (path, kind) in &paths.kinds {
                    kinds.set_item(path, kind)?;
                }
                deep.append(kinds)?;
            }
            None => deep.append(py.None())?,
        }
    }
    let actions = (
        PyList::new(py, payloads)?,
        PyList::new(py, kinds)?,
        PyList::new(py, table_of)?,
        PyList::new(py, specs.names())?,
        fields,
        deep,
    )
        .into_pyobject(py)?;
    Ok((Some(actions), None))
}
