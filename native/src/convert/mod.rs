//! Values into JSON exactly as the Python capture writes them: orjson's string and float
//! layout (`json`), json/jsonb documents re-written (`json_value`), the type codecs of
//! `cdc/capture/codecs/` for the common type families (`values`, `temporal`, `interval`, `arrays`, `ranges`), and a table's
//! conversion (`Plan`). The snapshot, pgoutput, spool and sink renderers build on it; it
//! uses none of them.

mod arrays;
mod interval;
pub mod json;
pub mod json_value;
mod plan;
mod ranges;
mod temporal;
pub mod values;

pub use plan::Plan;
