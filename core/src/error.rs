//! The one error enum of picograd-core. Every fallible call in the core, and every device (through
//! the device traits), reports one of these. Messages name what was wrong: the op, the shapes, the
//! axis, the file and byte.

use alloc::string::String;
use core::fmt;

/// Everything that can go wrong in picograd.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// A shape did not fit the op: `op` names the operation, `detail` the shapes involved.
    Shape {
        /// The operation that was asked for (`reshape`, `add`, `matmul`, ...).
        op: &'static str,
        /// What was wrong, naming the shapes.
        detail: String,
    },
    /// An axis was out of range or repeated.
    Axis {
        /// The operation that was asked for.
        op: &'static str,
        /// What was wrong, naming the axis and the rank.
        detail: String,
    },
    /// A dtype did not fit the op.
    DType {
        /// The operation that was asked for.
        op: &'static str,
        /// What was wrong, naming the dtypes.
        detail: String,
    },
    /// Integer arithmetic on sizes, strides or bounds overflowed i64.
    Overflow {
        /// Where it overflowed.
        what: String,
    },
    /// A symbolic expression could not be evaluated (unbound variable, value outside its bounds).
    Symbolic(String),
    /// Compiling generated code failed; carries the compiler's message.
    Compile(String),
    /// A device failed to allocate, copy or run.
    Device(String),
    /// Reading or writing a file failed.
    Io {
        /// The file's path.
        path: String,
        /// What the operating system said.
        detail: String,
    },
    /// A file's contents were malformed.
    Format {
        /// The file's path (or a description of the source).
        file: String,
        /// The byte offset where the problem was found.
        offset: u64,
        /// What was wrong.
        detail: String,
    },
    /// A feature picograd does not (yet) have.
    Unsupported(String),
    /// An invariant of picograd itself failed (a bug, not bad input): what broke and where.
    Internal(String),
}

/// picograd-core's result type.
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Shape { op, detail } => write!(f, "{op}: shape error: {detail}"),
            Error::Axis { op, detail } => write!(f, "{op}: axis error: {detail}"),
            Error::DType { op, detail } => write!(f, "{op}: dtype error: {detail}"),
            Error::Overflow { what } => write!(f, "integer overflow: {what}"),
            Error::Symbolic(m) => write!(f, "symbolic: {m}"),
            Error::Compile(m) => write!(f, "compile error: {m}"),
            Error::Device(m) => write!(f, "device error: {m}"),
            Error::Io { path, detail } => write!(f, "{path}: {detail}"),
            Error::Format {
                file,
                offset,
                detail,
            } => {
                write!(f, "{file}: malformed at byte {offset}: {detail}")
            }
            Error::Unsupported(m) => write!(f, "unsupported: {m}"),
            Error::Internal(m) => write!(
                f,
                "internal error (a bug in picograd, please report it with this message): {m}"
            ),
        }
    }
}

impl core::error::Error for Error {}

impl Error {
    /// An internal invariant failure: `what` names the invariant and where it broke.
    pub fn internal(what: impl Into<String>) -> Self {
        Error::Internal(what.into())
    }
    /// A shape error for `op`.
    pub fn shape(op: &'static str, detail: impl Into<String>) -> Self {
        Error::Shape {
            op,
            detail: detail.into(),
        }
    }
    /// An axis error for `op`.
    pub fn axis(op: &'static str, detail: impl Into<String>) -> Self {
        Error::Axis {
            op,
            detail: detail.into(),
        }
    }
    /// A dtype error for `op`.
    pub fn dtype(op: &'static str, detail: impl Into<String>) -> Self {
        Error::DType {
            op,
            detail: detail.into(),
        }
    }
    /// An overflow error.
    pub fn overflow(what: impl Into<String>) -> Self {
        Error::Overflow { what: what.into() }
    }
}
