//! The VM's objects: one header word, then reference fields, then raw bytes.
//!
//! Header layout (64 bits): kind in bits 0–2, size in words in bits 3–34, and in bits 35–63 the
//! number of reference fields (records) or the payload length in bytes (byte arrays). A word
//! whose kind bits are 0 is a *forwarding* header: the address (8-aligned, never 0) of the
//! object's copy, written by the collector.
//!
//! | kind | fields after the header |
//! | --- | --- |
//! | record | `refs` references, then `ceil(bytes / 8)` words of raw data |
//! | reference array | `len` references |
//! | byte array | `ceil(len / 8)` words |
//! | filler | nothing the program can reach: unused LAB space |

use std::ptr::NonNull;

use hab::ObjectModel;

/// Bytes of a heap word; every object is a whole number of words.
pub const WORD_BYTES: usize = 8;

const KIND_BITS: u32 = 3;
const KIND_MASK: u64 = (1 << KIND_BITS) - 1;
const SIZE_BITS: u32 = 32;
const SIZE_MASK: u64 = (1 << SIZE_BITS) - 1;
const AUX_SHIFT: u32 = KIND_BITS + SIZE_BITS;
/// The largest number of reference fields of a record, or bytes of a byte array.
pub const MAX_AUX: usize = (1 << (64 - AUX_SHIFT)) - 1;
/// The largest object, in words.
pub const MAX_SIZE_WORDS: usize = SIZE_MASK as usize;

/// What an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Fixed reference fields and raw bytes.
    Record,
    /// References only.
    RefArray,
    /// Raw bytes only.
    ByteArray,
    /// Dead space over unused LAB memory.
    Filler,
}

impl Kind {
    fn bits(self) -> u64 {
        match self {
            Kind::Record => 1,
            Kind::RefArray => 2,
            Kind::ByteArray => 3,
            Kind::Filler => 4,
        }
    }
}

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    /// A live (or dead, not yet collected) object.
    Object {
        /// What it is.
        kind: Kind,
        /// Its size in words, header included.
        size_words: usize,
        /// Reference fields (records), 0 (reference arrays, fillers) or payload bytes (byte
        /// arrays).
        aux: usize,
    },
    /// The object was copied to this address.
    Forwarded(usize),
    /// Not a valid header.
    Corrupt(u64),
}

impl Header {
    /// Encodes an object header.
    pub fn encode(kind: Kind, size_words: usize, aux: usize) -> u64 {
        debug_assert!(size_words <= MAX_SIZE_WORDS && aux <= MAX_AUX);
        (aux as u64) << AUX_SHIFT | (size_words as u64) << KIND_BITS | kind.bits()
    }

    /// Decodes a header word.
    pub fn decode(word: u64) -> Header {
        let size_words = ((word >> KIND_BITS) & SIZE_MASK) as usize;
        let aux = (word >> AUX_SHIFT) as usize;
        let kind = match word & KIND_MASK {
            0 if word != 0 => return Header::Forwarded(word as usize),
            1 => Kind::Record,
            2 => Kind::RefArray,
            3 => Kind::ByteArray,
            4 => Kind::Filler,
            _ => return Header::Corrupt(word),
        };
        if size_words == 0 {
            return Header::Corrupt(word);
        }
        Header::Object {
            kind,
            size_words,
            aux,
        }
    }
}

/// The layout of a record: how many reference fields and how many bytes of raw data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Reference fields.
    pub refs: usize,
    /// Raw bytes after them (rounded up to words).
    pub bytes: usize,
}

impl Shape {
    /// A shape of `refs` references and `bytes` raw bytes.
    pub const fn new(refs: usize, bytes: usize) -> Shape {
        Shape { refs, bytes }
    }

    /// The object's size in words, header included.
    pub const fn size_words(self) -> usize {
        1 + self.refs + self.bytes.div_ceil(WORD_BYTES)
    }
}

/// Reads the header word at `address`.
///
/// # Safety
/// `address` is the start of an object in the VM's heap, readable.
#[inline]
pub unsafe fn header_word(address: usize) -> u64 {
    // SAFETY: the caller guarantees a readable, aligned header word.
    unsafe { (address as *const u64).read() }
}

/// Writes a header word at `address`.
///
/// # Safety
/// `address` is 8-aligned and the caller owns the word.
#[inline]
pub unsafe fn write_header_word(address: usize, word: u64) {
    // SAFETY: the caller guarantees an aligned word it owns.
    unsafe { (address as *mut u64).write(word) }
}

/// The word range of an object's reference fields, as `(first, count)`: records' leading
/// fields and all of a reference array.
pub fn ref_fields(kind: Kind, size_words: usize, aux: usize) -> (usize, usize) {
    match kind {
        Kind::Record => (1, aux),
        Kind::RefArray => (1, size_words - 1),
        Kind::ByteArray | Kind::Filler => (1, 0),
    }
}

/// The object model Hab uses to keep the VM's heap walkable.
#[derive(Clone, Copy, Debug, Default)]
pub struct VmObjectModel;

// SAFETY: a filler's header encodes kind `Filler` and its size in words; `object_size` and
// `is_filler` decode exactly that.
unsafe impl ObjectModel for VmObjectModel {
    unsafe fn write_filler(&self, address: NonNull<u8>, bytes: usize) {
        let word = Header::encode(Kind::Filler, bytes / WORD_BYTES, 0);
        // SAFETY: the caller owns at least one aligned word at `address`.
        unsafe { write_header_word(address.as_ptr() as usize, word) };
    }

    unsafe fn object_size(&self, address: NonNull<u8>) -> usize {
        // SAFETY: the caller guarantees a readable header.
        match Header::decode(unsafe { header_word(address.as_ptr() as usize) }) {
            Header::Object { size_words, .. } => size_words * WORD_BYTES,
            // Not a multiple of the alignment: the walk reports it as corruption.
            Header::Forwarded(_) | Header::Corrupt(_) => 1,
        }
    }

    unsafe fn is_filler(&self, address: NonNull<u8>) -> bool {
        // SAFETY: the caller guarantees a readable header.
        matches!(
            Header::decode(unsafe { header_word(address.as_ptr() as usize) }),
            Header::Object {
                kind: Kind::Filler,
                ..
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        for (kind, size, aux) in [
            (Kind::Record, 3, 2),
            (Kind::RefArray, 101, 0),
            (Kind::ByteArray, 2, 13),
            (Kind::Filler, MAX_SIZE_WORDS, 0),
            (Kind::Record, 1, MAX_AUX),
        ] {
            let word = Header::encode(kind, size, aux);
            assert_eq!(
                Header::decode(word),
                Header::Object {
                    kind,
                    size_words: size,
                    aux
                }
            );
        }
        assert_eq!(Header::decode(0x1000), Header::Forwarded(0x1000));
        assert!(matches!(Header::decode(0), Header::Corrupt(0)));
        assert!(matches!(Header::decode(7), Header::Corrupt(7)));
        assert!(matches!(
            Header::decode(Header::encode(Kind::Record, 0, 0)),
            Header::Corrupt(_)
        ));
    }

    #[test]
    fn shapes_count_words() {
        assert_eq!(Shape::new(2, 0).size_words(), 3);
        assert_eq!(Shape::new(0, 1).size_words(), 2);
        assert_eq!(Shape::new(1, 16).size_words(), 4);
    }
}
