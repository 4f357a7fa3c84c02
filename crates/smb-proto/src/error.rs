//! Decode errors. Every failure names what was being read, so a bad frame
//! from the network can be logged precisely and never turns into a panic.

/// Why a buffer could not be decoded as an SMB2 structure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs)] // variant docs name the fields
pub enum DecodeError {
    /// Fewer bytes remained than the named field needs.
    #[error("truncated while reading {0}")]
    Truncated(&'static str),
    /// A fixed field (ProtocolId, StructureSize, ...) had the wrong value.
    #[error("bad {field}: got {got:#x}")]
    BadValue { field: &'static str, got: u64 },
    /// An offset/length pair points outside the message it belongs to.
    #[error("{0} offset/length outside the message")]
    OutOfBounds(&'static str),
    /// A UTF-16 name was not valid UTF-16 or had an odd byte length.
    #[error("invalid UTF-16 in {0}")]
    BadUtf16(&'static str),
    /// The frame is larger than the codec accepts.
    #[error("frame of {0} bytes exceeds the limit")]
    TooLarge(usize),
}

/// Result alias for decoders.
pub type DecodeResult<T> = Result<T, DecodeError>;
