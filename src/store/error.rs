//! [`IndexError`]: everything opening, writing, reading or verifying an
//! index can report.

use std::fmt;
use std::ops::RangeInclusive;
use std::path::PathBuf;

use crate::error::{ConfigDecodeError, ConfigError};

/// An index operation that failed. Variants carry what a user needs to act:
/// the path, the key, or the file, section and offset of corrupt bytes.
#[derive(Debug)]
#[non_exhaustive]
pub enum IndexError {
    /// A file-system operation failed.
    Io {
        /// What was being done, and to which path.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The catalog database reported an error.
    Catalog {
        /// What was being done.
        context: &'static str,
        /// redb's message.
        message: String,
    },
    /// Another writer (in this or another process) holds the index.
    Locked {
        /// The index directory.
        path: PathBuf,
    },
    /// `create` found an index already there.
    AlreadyExists {
        /// The index directory.
        path: PathBuf,
    },
    /// `open` found no index there.
    NotAnIndex {
        /// The directory.
        path: PathBuf,
    },
    /// A stored file has a format version this build does not read.
    Incompatible {
        /// "catalog" or "segment".
        what: &'static str,
        /// The version found.
        found: u32,
        /// The versions this build reads.
        supported: RangeInclusive<u32>,
    },
    /// The index was created with a different signature configuration than
    /// the one the caller expects.
    ConfigMismatch,
    /// The stored configuration cannot be read.
    ConfigDecode(ConfigDecodeError),
    /// A configuration or threshold is invalid.
    Config(ConfigError),
    /// Stored bytes are damaged.
    Corrupted {
        /// The file.
        file: String,
        /// The section or table.
        section: &'static str,
        /// Byte offset (or record number) within the section.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// `insert` of a key that is already stored (use `replace`).
    DuplicateKey {
        /// The key.
        key: String,
    },
    /// The index was opened read-only.
    ReadOnly,
    /// The disk (or the storage's quota) is full. Nothing of the failed
    /// operation was acknowledged; everything committed before it stays.
    /// Once space returns, reopen the index and go on. (A commit that fails
    /// after redb's commit point, in the page freeing redb does after it,
    /// has landed although it was not acknowledged: look its keys up after
    /// reopening before inserting them again.)
    DiskFull {
        /// What was being done.
        context: String,
    },
    /// An earlier I/O error (a full disk, a failed fsync) left the catalog
    /// unusable in this process. Nothing acknowledged is lost: drop the
    /// index and open it again.
    ReopenRequired {
        /// What was being done.
        context: &'static str,
    },
    /// The operation is not available for this configuration.
    Unsupported {
        /// What is not available, and why.
        what: &'static str,
    },
}

impl IndexError {
    pub(crate) fn corrupted(file: &str, section: &'static str, offset: u64, reason: &str) -> Self {
        IndexError::Corrupted { file: file.to_owned(), section, offset, reason: reason.to_owned() }
    }

    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> IndexError {
        let context = context.into();
        move |source| {
            if is_disk_full(&source) {
                IndexError::DiskFull { context }
            } else {
                IndexError::Io { context, source }
            }
        }
    }

    /// A redb error, typed where it says the disk is full or the catalog is
    /// damaged.
    pub(crate) fn catalog(context: &'static str) -> impl FnOnce(redb::Error) -> IndexError {
        move |e| match e {
            redb::Error::Io(source) if is_disk_full(&source) => IndexError::DiskFull { context: context.to_owned() },
            redb::Error::PreviousIo => IndexError::ReopenRequired { context },
            redb::Error::Corrupted(reason) => IndexError::Corrupted {
                file: super::CATALOG_FILE.to_owned(),
                section: "redb",
                offset: 0,
                reason: format!("while {context}: {reason}"),
            },
            other => IndexError::Catalog { context, message: other.to_string() },
        }
    }
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IndexError::Io { context, source } => write!(f, "{context}: {source}"),
            IndexError::Catalog { context, message } => write!(f, "catalog error while {context}: {message}"),
            IndexError::Locked { path } => write!(
                f,
                "index {} is locked by another writer (open it read-only, or wait for the writer to finish)",
                path.display()
            ),
            IndexError::AlreadyExists { path } => {
                write!(f, "{} already holds an index (open it instead)", path.display())
            }
            IndexError::NotAnIndex { path } => {
                write!(f, "{} holds no neardex index (create one first)", path.display())
            }
            IndexError::Incompatible { what, found, supported } => write!(
                f,
                "{what} format version {found} is not supported (this build reads {}..={})",
                supported.start(),
                supported.end()
            ),
            IndexError::ConfigMismatch => {
                write!(f, "the index was created with a different signature configuration")
            }
            IndexError::ConfigDecode(e) => write!(f, "stored configuration: {e}"),
            IndexError::Config(e) => write!(f, "{e}"),
            IndexError::Corrupted { file, section, offset, reason } => {
                write!(f, "{file} is corrupted: {section} at {offset}: {reason}")
            }
            IndexError::DuplicateKey { key } => write!(f, "key {key:?} is already in the index (replace it instead)"),
            IndexError::ReadOnly => write!(f, "the index is open read-only"),
            IndexError::DiskFull { context } => {
                write!(f, "disk full while {context}: not acknowledged; free space and reopen")
            }
            IndexError::ReopenRequired { context } => write!(
                f,
                "while {context}: an earlier I/O error left the catalog unusable in this process; \
                 drop the index and open it again (nothing acknowledged is lost)"
            ),
            IndexError::Unsupported { what } => write!(f, "not supported: {what}"),
        }
    }
}

impl std::error::Error for IndexError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            IndexError::Io { source, .. } => Some(source),
            IndexError::ConfigDecode(e) => Some(e),
            IndexError::Config(e) => Some(e),
            _ => None,
        }
    }
}

fn is_disk_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded | std::io::ErrorKind::FileTooLarge
    )
}

impl From<ConfigError> for IndexError {
    fn from(e: ConfigError) -> Self {
        IndexError::Config(e)
    }
}
