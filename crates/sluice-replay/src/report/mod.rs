//! The result of a replay ([`model`]) and its three renderings: the `--json` document (serde
//! on the model), the plain-text summary ([`text`]) and the HTML page ([`html`], with its
//! charts in [`charts`]).

mod charts;
pub(crate) mod format;
mod html;
pub(crate) mod model;
mod text;

pub use html::render_html;
pub use text::render_text;
