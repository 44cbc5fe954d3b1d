//! Positions and the error list every entry point returns.

use std::fmt;
use std::path::PathBuf;

/// A position in the YAML text: 1-based line and column (in characters).
///
/// `Loc { line: 0, column: 0 }` (the `Default`) means "not in the file": an implicit
/// value such as the `default` mempool, or an error about the file as a whole (it cannot be read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Loc {
    /// 1-based line number; 0 when the item is not in the file.
    pub line: u32,
    /// 1-based column number, counted in characters; 0 when the item is not in the file.
    pub column: u32,
}

impl Loc {
    /// The position `line:column`.
    pub const fn new(line: u32, column: u32) -> Self {
        Self { line, column }
    }

    /// Whether this position is in the file (line 0 means it is not).
    pub const fn is_known(self) -> bool {
        self.line != 0
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One problem in a pipeline file: where, and what (the message says what is accepted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{loc}: error: {message}")]
pub struct ConfigError {
    /// Where the problem is (the offending value, or the map that lacks a required key).
    pub loc: Loc,
    /// One line, without the position.
    pub message: String,
}

impl ConfigError {
    /// An error at `loc`. Control characters in `message` (which may quote the file) are
    /// escaped, so that it is one line.
    pub fn new(loc: Loc, message: impl Into<String>) -> Self {
        let message = message.into();
        let message = if message.chars().any(char::is_control) {
            message
                .chars()
                .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
                .collect()
        } else {
            message
        };
        Self { loc, message }
    }
}

/// Every problem found in one pipeline file, sorted by position.
///
/// `Display` prints one line per error, `{file}:{line}:{column}: error: {message}`, or
/// `{file}: error: {message}` for an error without a position (the file cannot be read),
/// in the manner of compilers, so editors can jump to each one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    /// The file as the caller named it.
    pub file: PathBuf,
    /// The errors, sorted by position (at least one).
    pub errors: Vec<ConfigError>,
}

impl ConfigErrors {
    /// The list for `file`, sorted by position (stable: errors at one position keep their order).
    pub fn new(file: impl Into<PathBuf>, mut errors: Vec<ConfigError>) -> Self {
        errors.sort_by_key(|e| e.loc);
        Self { file: file.into(), errors }
    }

    /// A list of one error.
    pub fn single(file: impl Into<PathBuf>, loc: Loc, message: impl Into<String>) -> Self {
        Self::new(file, vec![ConfigError::new(loc, message)])
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `errors` is public, so it may have been pushed to after `new`: sort again for printing.
        let mut sorted: Vec<&ConfigError> = self.errors.iter().collect();
        sorted.sort_by_key(|e| e.loc);
        let file = self.file.display();
        for (i, e) in sorted.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            if e.loc.is_known() {
                write!(f, "{file}:{}: error: {}", e.loc, e.message)?;
            } else {
                write!(f, "{file}: error: {}", e.message)?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_sorts_and_prefixes_the_file() {
        let errs = ConfigErrors::new(
            "p.yaml",
            vec![
                ConfigError::new(Loc::new(3, 1), "b"),
                ConfigError::new(Loc::new(1, 7), "a"),
                ConfigError::new(Loc::default(), "whole file"),
            ],
        );
        assert_eq!(errs.to_string(), "p.yaml: error: whole file\np.yaml:1:7: error: a\np.yaml:3:1: error: b");
    }
}
