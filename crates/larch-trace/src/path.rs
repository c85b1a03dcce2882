//! [`Path`]: the steps of an operation's path, held in one buffer.
//!
//! A path was a vector of shared steps (`Arc<[u8]>`), each the decoder's one copy of that step. A
//! replay decodes on one thread and drops the operations on another, and the reference counts of
//! the hot steps (`data`, `contracts`, `index`) cost a locked instruction on each side per step:
//! ~30% of the trace reader's CPU and ~1.7% of the replaying thread's. A path is now its steps'
//! bytes in one allocation, copied whole (a hundred bytes or so) instead of counted step by step.

use std::fmt;

/// A path of a context operation: a sequence of steps, each arbitrary bytes.
///
/// Built with [`Path::from_steps`], [`FromIterator`] or [`push`](Path::push); read with
/// [`iter`](Path::iter), or with [`steps`](Path::steps) where the tree's API wants a slice of
/// steps. Two paths are equal when their steps are.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Path {
    /// Each step as its length (LEB128) and then its bytes.
    encoded: Vec<u8>,
}

/// The largest [`Path::byte_len`] of a path in a trace (1 MiB): a larch trace's path record may
/// keep the previous path's steps and refer to the chunk's long steps for a byte or two each, so
/// without a bound a few bytes of a crafted trace would decode into paths of any size. Both trace
/// formats' readers refuse a longer path, and their writers do not write one.
pub const MAX_PATH_BYTES: usize = 1 << 20;

/// The most steps of a path in a trace (131,072): a step may be empty (a byte of the buffer), and
/// the tree's API takes a path as a slice of steps, 16 bytes each. Held to as
/// [`MAX_PATH_BYTES`] is.
pub const MAX_PATH_STEPS: usize = 1 << 17;

/// Steps a [`StepSlices`] holds without allocating.
const INLINE_STEPS: usize = 16;

impl Path {
    /// The empty path (the root).
    pub fn new() -> Path {
        Path::default()
    }

    /// The empty path, with room for `bytes` bytes of steps ([`byte_len`](Path::byte_len)) before
    /// it grows: a path built step by step then takes one allocation.
    pub fn with_capacity(bytes: usize) -> Path {
        Path { encoded: Vec::with_capacity(bytes) }
    }

    /// This path extended with `step`, in one allocation.
    pub fn child(&self, step: &[u8]) -> Path {
        let mut out = Path::with_capacity(self.byte_len_after_push(step.len()));
        out.encoded.extend_from_slice(&self.encoded);
        out.push(step);
        out
    }

    /// The path of `steps`, in order.
    pub fn from_steps<S: AsRef<[u8]>>(steps: impl IntoIterator<Item = S>) -> Path {
        let mut path = Path::new();
        for step in steps {
            path.push(step.as_ref());
        }
        path
    }

    /// [`byte_len`](Path::byte_len) once a step of `step_len` bytes is appended.
    pub(crate) fn byte_len_after_push(&self, step_len: usize) -> usize {
        let header = larch_varint::encoded_len(step_len as u64);
        self.encoded.len().saturating_add(header).saturating_add(step_len)
    }

    /// Appends `step`.
    pub fn push(&mut self, step: &[u8]) {
        larch_varint::encode(&mut self.encoded, step.len() as u64);
        self.encoded.extend_from_slice(step);
    }

    /// The steps, in order.
    pub fn iter(&self) -> StepIter<'_> {
        StepIter { rest: &self.encoded }
    }

    /// The steps as a slice (held on the stack up to 16 steps), for the tree's API:
    /// `tree.find(&path.steps())`.
    pub fn steps(&self) -> StepSlices<'_> {
        let mut slices = StepSlices { inline: [&[]; INLINE_STEPS], len: 0, spilled: Vec::new() };
        for step in self.iter() {
            if slices.len < INLINE_STEPS {
                if let Some(slot) = slices.inline.get_mut(slices.len) {
                    *slot = step;
                }
            } else {
                if slices.spilled.is_empty() {
                    slices.spilled.extend_from_slice(&slices.inline);
                }
                slices.spilled.push(step);
            }
            slices.len += 1;
        }
        slices
    }

    /// The number of steps (counted: a path does not store it).
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether this is the root (no step).
    pub fn is_empty(&self) -> bool {
        self.encoded.is_empty()
    }

    /// The bytes the path holds: its steps and each one's length (one byte for a step shorter
    /// than 128 bytes). A trace decoder refuses a path above [`MAX_PATH_BYTES`].
    pub fn byte_len(&self) -> usize {
        self.encoded.len()
    }

    /// The buffer of the steps (each step's length, then its bytes), for memory hints.
    pub(crate) fn encoded(&self) -> &[u8] {
        &self.encoded
    }

    /// The last step, if any.
    pub fn last(&self) -> Option<&[u8]> {
        self.iter().last()
    }

    /// Keeps the first `steps` steps (all of them if there are fewer).
    pub fn truncate(&mut self, steps: usize) {
        let mut iter = self.iter();
        for _ in 0..steps {
            if iter.next().is_none() {
                return;
            }
        }
        let end = self.encoded.len() - iter.rest.len();
        self.encoded.truncate(end);
    }
}

impl<S: AsRef<[u8]>> FromIterator<S> for Path {
    fn from_iter<I: IntoIterator<Item = S>>(steps: I) -> Path {
        Path::from_steps(steps)
    }
}

impl<'a> IntoIterator for &'a Path {
    type Item = &'a [u8];
    type IntoIter = StepIter<'a>;

    fn into_iter(self) -> StepIter<'a> {
        self.iter()
    }
}

impl fmt::Debug for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(|step| step.escape_ascii().to_string())).finish()
    }
}

/// The steps of a [`Path`], in order ([`Path::iter`]).
#[derive(Clone)]
pub struct StepIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for StepIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        // `None` at the end. The buffer is only ever written by `push`, so the length always
        // decodes and fits; were it not, no more steps rather than a wrong one.
        let (len, header) = larch_varint::decode(self.rest).ok()?;
        let end = usize::try_from(len).ok().and_then(|len| header.checked_add(len))?;
        let step = self.rest.get(header..end)?;
        self.rest = self.rest.get(end..).unwrap_or_default();
        Some(step)
    }
}

/// The steps of a [`Path`] as a slice ([`Path::steps`]): on the stack up to 16 steps, in a vector
/// beyond.
pub struct StepSlices<'a> {
    inline: [&'a [u8]; INLINE_STEPS],
    len: usize,
    spilled: Vec<&'a [u8]>,
}

impl<'a> std::ops::Deref for StepSlices<'a> {
    type Target = [&'a [u8]];

    fn deref(&self) -> &[&'a [u8]] {
        if self.len > INLINE_STEPS { &self.spilled } else { self.inline.get(..self.len).unwrap_or_default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_round_trip_whatever_their_length() {
        let long = vec![b'x'; 300];
        let steps: Vec<&[u8]> = vec![b"data", b"", &long, b"\x80\xff", b"index"];
        let path = Path::from_steps(&steps);
        assert_eq!(path.iter().collect::<Vec<_>>(), steps);
        assert_eq!(&*path.steps(), &steps[..]);
        assert_eq!(path.len(), 5);
        assert_eq!(path.last(), Some(&b"index"[..]));
        assert!(!path.is_empty());
        assert!(Path::new().is_empty());
        assert_eq!(Path::new().steps().len(), 0);
    }

    #[test]
    fn more_steps_than_the_inline_slots_spill_in_order() {
        for count in [15, 16, 17, 40] {
            let names: Vec<String> = (0..count).map(|i| format!("s{i}")).collect();
            let path: Path = names.iter().collect();
            let slices = path.steps();
            assert_eq!(slices.len(), count);
            for (slice, name) in slices.iter().zip(&names) {
                assert_eq!(*slice, name.as_bytes(), "{count} steps");
            }
        }
    }

    #[test]
    fn the_length_after_a_push_is_what_the_push_makes() {
        for len in [0, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let mut path = Path::from_steps(["ab"]);
            let expected = path.byte_len_after_push(len);
            path.push(&vec![7; len]);
            assert_eq!(path.byte_len(), expected, "a step of {len} bytes");
        }
    }

    #[test]
    fn a_child_is_its_parent_and_the_step_in_one_allocation_of_its_size() {
        for len in [0, 5, 127, 128, 300] {
            let parent = Path::from_steps(["data", "contracts"]);
            let step = vec![b'z'; len];
            let child = parent.child(&step);
            assert_eq!(child, Path::from_steps([&b"data"[..], b"contracts", &step]), "a step of {len} bytes");
            assert_eq!(child.encoded.capacity(), child.byte_len(), "a step of {len} bytes");
        }
        let mut built = Path::with_capacity(12);
        built.push(b"data");
        built.push(b"index");
        assert_eq!(built.encoded.capacity(), 12);
        assert_eq!(built, Path::from_steps(["data", "index"]));
    }

    #[test]
    fn truncate_keeps_a_prefix() {
        let mut path = Path::from_steps(["a", "bb", "ccc"]);
        path.truncate(2);
        assert_eq!(path, Path::from_steps(["a", "bb"]));
        path.truncate(5);
        assert_eq!(path.len(), 2);
        path.truncate(0);
        assert!(path.is_empty());
    }

    #[test]
    fn equal_steps_make_equal_paths() {
        assert_eq!(Path::from_steps(["ab", "c"]), Path::from_steps(["ab", "c"]));
        assert_ne!(Path::from_steps(["ab", "c"]), Path::from_steps(["a", "bc"]));
        assert_eq!(format!("{:?}", Path::from_steps(["ab", "c"])), r#"["ab", "c"]"#);
        // Steps that are not UTF-8 are printed apart.
        assert_ne!(format!("{:?}", Path::from_steps([[0xff]])), format!("{:?}", Path::from_steps([[0xfe]])));
    }
}
