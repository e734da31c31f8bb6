//! The collector: Cheney's copying algorithm between two halves of the reservation, and the
//! heap checks `--verify` runs before and after it.
//!
//! Runs only inside a Hab [`Collection`](hab::Collection): every mutator is parked and every
//! LAB retired (its tail a filler), so the allocation space is a sequence of objects and
//! fillers, and no thread touches a root.

use std::ops::Range;

use crate::object::{header_word, ref_fields, write_header_word, Header, Kind, WORD_BYTES};

/// Copies everything reachable from `roots` out of `from` into `to`, in breadth-first order,
/// fixing every reference. Returns the end of the copies. `to` must be at least as large as
/// the used part of `from`, so that the copies always fit.
///
/// # Safety
/// Every non-null root and every reference field reachable from them is the address of an
/// object in `from`; `to` is memory the caller owns, and nobody else reads or writes either
/// range meanwhile.
pub(crate) unsafe fn copy_reachable<'r>(
    roots: impl IntoIterator<Item = &'r mut usize>,
    from: Range<usize>,
    to: Range<usize>,
) -> usize {
    let mut copier = Copier {
        from,
        free: to.start,
        end: to.end,
    };
    for root in roots {
        // SAFETY: forwarded from the caller.
        *root = unsafe { copier.forward(*root) };
    }
    let mut scan = to.start;
    while scan < copier.free {
        // SAFETY: `scan` walks the copies, each starting with the header copied from `from`.
        let header = Header::decode(unsafe { header_word(scan) });
        let Header::Object {
            kind,
            size_words,
            aux,
        } = header
        else {
            unreachable!("copies have object headers");
        };
        let (first, count) = ref_fields(kind, size_words, aux);
        for field in first..first + count {
            let slot = (scan + field * WORD_BYTES) as *mut usize;
            // SAFETY: `slot` is a reference field of a copy in `to`; its value is an address
            // in `from` (or null), per the caller.
            unsafe { slot.write(copier.forward(slot.read())) };
        }
        scan += size_words * WORD_BYTES;
    }
    copier.free
}

struct Copier {
    from: Range<usize>,
    free: usize,
    end: usize,
}

impl Copier {
    /// The new address of the object at `address`, copying it first if no earlier reference
    /// did.
    ///
    /// # Safety
    /// As for `copy_reachable`.
    unsafe fn forward(&mut self, address: usize) -> usize {
        if address == 0 {
            return 0;
        }
        debug_assert!(
            self.from.contains(&address),
            "{address:#x} outside from-space"
        );
        // SAFETY: `address` is an object in `from`.
        match Header::decode(unsafe { header_word(address) }) {
            Header::Forwarded(copy) => copy,
            Header::Object { size_words, .. } => {
                let copy = self.free;
                let bytes = size_words * WORD_BYTES;
                assert!(
                    copy + bytes <= self.end,
                    "to-space smaller than the survivors"
                );
                // SAFETY: the object's `bytes` lie in `from`, the copy's in `to` (owned by the
                // caller); the ranges do not overlap.
                unsafe {
                    std::ptr::copy_nonoverlapping(address as *const u8, copy as *mut u8, bytes);
                    write_header_word(address, copy as u64);
                }
                self.free += bytes;
                copy
            }
            Header::Corrupt(word) => panic!("corrupt header {word:#x} at {address:#x}"),
        }
    }
}

/// What a heap check found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckSummary {
    /// Objects (not fillers).
    pub objects: u64,
    /// Their bytes.
    pub object_bytes: usize,
    /// Fillers.
    pub fillers: u64,
    /// Their bytes.
    pub filler_bytes: usize,
}

/// Walks `range` as a sequence of objects and fillers, and checks that every reference field
/// and every root points to the start of an object of `targets` (which may be `range`
/// itself), or is null.
///
/// # Safety
/// `range` and `targets` hold objects and fillers back to back (no thread writes them
/// meanwhile).
pub(crate) unsafe fn check<'r>(
    range: Range<usize>,
    targets: Option<&[usize]>,
    roots: impl IntoIterator<Item = &'r usize>,
) -> Result<(CheckSummary, Vec<usize>), String> {
    let mut summary = CheckSummary::default();
    let mut starts = Vec::new();
    let mut references = Vec::new();
    let mut address = range.start;
    while address < range.end {
        // SAFETY: `address` is inside `range`, at an object start (the walk steps by sizes).
        let header = Header::decode(unsafe { header_word(address) });
        let Header::Object {
            kind,
            size_words,
            aux,
        } = header
        else {
            return Err(format!("bad header {header:?} at {address:#x}"));
        };
        let bytes = size_words * WORD_BYTES;
        if bytes > range.end - address {
            return Err(format!(
                "object at {address:#x} of {bytes} bytes runs past {:#x}",
                range.end
            ));
        }
        if kind == Kind::Filler {
            summary.fillers += 1;
            summary.filler_bytes += bytes;
        } else {
            summary.objects += 1;
            summary.object_bytes += bytes;
            starts.push(address);
            let (first, count) = ref_fields(kind, size_words, aux);
            if first + count > size_words {
                return Err(format!("object at {address:#x} has more fields than words"));
            }
            for field in first..first + count {
                // SAFETY: a field inside the object, inside `range`.
                let value = unsafe { ((address + field * WORD_BYTES) as *const usize).read() };
                if value != 0 {
                    references.push((address, value));
                }
            }
        }
        address += bytes;
    }
    let targets = targets.unwrap_or(&starts);
    for (holder, value) in references {
        if targets.binary_search(&value).is_err() {
            return Err(format!(
                "the object at {holder:#x} refers to {value:#x}, not an object"
            ));
        }
    }
    for &root in roots {
        if root != 0 && targets.binary_search(&root).is_err() {
            return Err(format!("a root refers to {root:#x}, not an object"));
        }
    }
    Ok((summary, starts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Shape;

    /// Builds objects in a word buffer: returns their addresses.
    fn record(memory: &mut Vec<u64>, shape: Shape, refs: &[usize]) -> usize {
        let address = memory.as_ptr() as usize + memory.len() * WORD_BYTES;
        memory.push(Header::encode(Kind::Record, shape.size_words(), shape.refs));
        for i in 0..shape.refs {
            memory.push(refs.get(i).copied().unwrap_or(0) as u64);
        }
        for _ in 0..shape.bytes.div_ceil(WORD_BYTES) {
            memory.push(0xabcd);
        }
        address
    }

    /// A cycle, a shared child and garbage: the copies keep the graph, the garbage stays.
    #[test]
    fn copies_what_is_reachable_and_fixes_references() {
        let mut from: Vec<u64> = Vec::with_capacity(64);
        let shape = Shape::new(2, 8);
        let a = record(&mut from, shape, &[]);
        let garbage = record(&mut from, Shape::new(0, 16), &[]);
        let b = record(&mut from, shape, &[a, 0]);
        let c = record(&mut from, shape, &[b, b]);
        // a -> c (a cycle a -> c -> b -> a).
        from[1] = c as u64;
        let used = from.len() * WORD_BYTES;
        let base = from.as_ptr() as usize;
        let mut to = vec![0u64; 64];
        let to_base = to.as_mut_ptr() as usize;
        let mut roots = [c, 0];
        // SAFETY: the roots and fields point to objects of `from`; `to` is ours.
        let end =
            unsafe { copy_reachable(roots.iter_mut(), base..base + used, to_base..to_base + 512) };
        assert_eq!(
            end - to_base,
            3 * shape.size_words() * WORD_BYTES,
            "garbage left behind"
        );
        assert_eq!(roots[1], 0);
        let (c2, read) = (roots[0], |address: usize, field: usize| {
            // SAFETY: a field of a copy in `to`.
            unsafe { ((address + field * WORD_BYTES) as *const usize).read() }
        });
        assert_eq!(c2, to_base, "the root's object is copied first");
        let b2 = read(c2, 1);
        assert_eq!(read(c2, 2), b2, "a shared child is copied once");
        let a2 = read(b2, 1);
        assert_eq!(read(a2, 1), c2, "the cycle is kept");
        assert_eq!(read(a2, 3), 0xabcd, "raw bytes are copied");
        // SAFETY: `to` now holds the copies back to back.
        let (summary, _) =
            unsafe { check(to_base..end, None, roots.iter()) }.expect("the copies check");
        assert_eq!(summary.objects, 3);
        let _ = garbage;
    }

    #[test]
    fn the_check_finds_a_dangling_reference() {
        let mut memory: Vec<u64> = Vec::with_capacity(16);
        let a = record(&mut memory, Shape::new(1, 0), &[]);
        memory[1] = (a + 8) as u64;
        let base = memory.as_ptr() as usize;
        let end = base + memory.len() * WORD_BYTES;
        // SAFETY: one record in the buffer.
        let error = unsafe { check(base..end, None, [].iter()) }.unwrap_err();
        assert!(error.contains("not an object"), "{error}");
    }
}
