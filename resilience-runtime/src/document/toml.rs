//! Reading a [`ConfigDocument`] from TOML, with the line, column and key path of every error:
//! errors of syntax and of type come from `toml` (a span) and `serde_path_to_error` (the key
//! path); errors found once the document is read (a value a builder refuses, an unknown base)
//! carry a key path, looked up in the document's spanned tree for its position.

use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::{ConfigDocument, DocumentError};

/// A document read from `text`, and its spanned tree for [`locate`].
pub(crate) struct Parsed<'a> {
    pub(crate) document: ConfigDocument,
    root: Spanned<DeTable<'a>>,
    text: &'a str,
}

/// Reads `text`.
pub(crate) fn parse(text: &str) -> Result<Parsed<'_>, DocumentError> {
    let root = DeTable::parse(text).map_err(|e| {
        let error = DocumentError::at(Vec::new(), e.message());
        at_span(text, error, e.span())
    })?;
    let deserializer = toml::Deserializer::from(root.clone());
    let document = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e
            .path()
            .iter()
            .map(|segment| match segment {
                serde_path_to_error::Segment::Map { key } => key.clone(),
                serde_path_to_error::Segment::Seq { index } => index.to_string(),
                serde_path_to_error::Segment::Enum { variant } => variant.clone(),
                serde_path_to_error::Segment::Unknown => "?".to_owned(),
            })
            .collect();
        let inner = e.inner();
        at_span(text, DocumentError::at(path, inner.message()), inner.span())
    })?;
    Ok(Parsed {
        document,
        root,
        text,
    })
}

impl Parsed<'_> {
    /// `error` with the position of its key path in the document: the value's if the path
    /// leads to one, else the deepest key of it the document has (a value that came from a
    /// base or a default has no position of its own).
    pub(crate) fn locate(&self, error: DocumentError) -> DocumentError {
        let mut table: &DeTable<'_> = self.root.get_ref();
        let mut span = None;
        for segment in error.path_segments() {
            let found = table
                .iter()
                .find(|(key, _)| key.get_ref().replace('-', "_") == *segment);
            let Some((key, value)) = found else { break };
            match value.get_ref() {
                DeValue::Table(inner) => {
                    span = Some(key.span());
                    table = inner;
                }
                _ => {
                    span = Some(value.span());
                    break;
                }
            }
        }
        at_span(self.text, error, span)
    }
}

fn at_span(text: &str, error: DocumentError, span: Option<Range<usize>>) -> DocumentError {
    match span {
        Some(span) => {
            let (line, column) = line_and_column(text, span.start);
            error.with_location(line, column)
        }
        None => error,
    }
}

/// The line and column (from 1; the column in characters) of byte `offset` of `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_count_from_one_and_in_characters() {
        let text = "a = 1\nµb = 2\n";
        assert_eq!(line_and_column(text, 0), (1, 1));
        assert_eq!(line_and_column(text, 4), (1, 5));
        assert_eq!(line_and_column(text, 6), (2, 1));
        // `µ` is two bytes, one character.
        assert_eq!(line_and_column(text, 8), (2, 2));
        assert_eq!(line_and_column(text, 1_000), (3, 1));
    }
}
