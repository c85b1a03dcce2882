//! The operation records of larch's trace format (`docs/trace-format.md` §4): a tag byte holding the
//! kind and flags, then the fields, with paths, context ids, dates and commit hashes encoded against
//! a small state that starts afresh in every chunk.

use super::bytes::{Fail, Slice, put_bytes, put_varint};
use crate::op::{ContextId, MAX_PATH_BYTES, MAX_PATH_STEPS, Op, Path, Scoped};
use larch_core::Hash;
use std::collections::HashMap;

/// Tag bit: the first scoped field is `Keep`.
const A_KEEP: u8 = 1 << 3;
/// Tag bit: the second scoped field is `Keep`, or (for reads) the recorded result is `true`.
const B_SET: u8 = 1 << 4;
/// Tag bit: the first context id equals its prediction and is omitted.
const CTX1_PREDICTED: u8 = 1 << 5;
/// Tag bit: the second context id equals its prediction and is omitted.
const CTX2_PREDICTED: u8 = 1 << 6;
/// Tag bit (checkout only): the commit hash equals the last hash of the chunk and is omitted.
const HASH_PREDICTED: u8 = 1 << 7;

/// Step kinds, in the two low bits of a step header.
const STEP_RAW: u64 = 0;
const STEP_HEX: u64 = 1;
const STEP_REF: u64 = 2;

/// Steps of at least this many bytes enter the chunk's step table when first written.
const STEP_TABLE_MIN: usize = 4;

/// Parent byte bit: the parent is `Keep`.
const PARENT_KEEP: u8 = 1;
/// Parent byte bit: the parent equals the last hash of the chunk and is omitted.
const PARENT_PREDICTED: u8 = 2;

/// Kind numbers, the same as Irmin's row tags.
const CHECKOUT: u8 = 0;
const ADD: u8 = 1;
const REMOVE: u8 = 2;
const COPY: u8 = 3;
const FIND: u8 = 4;
const MEM: u8 = 5;
const MEM_TREE: u8 = 6;
const COMMIT: u8 = 7;

/// What records are encoded against; reset at the start of every chunk.
#[derive(Default)]
pub(crate) struct CodecState {
    /// The previous path (of any path field).
    prev_path: Path,
    /// The previous context id (of any context field).
    last_ctx: ContextId,
    /// The largest context id seen.
    max_ctx: ContextId,
    /// The last commit hash (of a checkout or a commit's own hash).
    last_hash: Hash,
    /// The last commit date.
    last_date: i64,
    /// Writer side of the step table: step → index.
    step_ids: HashMap<Box<[u8]>, u64>,
    /// Reader side of the step table: index → step.
    steps: Vec<Box<[u8]>>,
    /// Reader side: a hex step's digits, decoded.
    hex_step: Vec<u8>,
    /// Reader side: the steps of `prev_path`.
    prev_steps: usize,
    /// The bytes of the paths encoded or decoded in this chunk.
    path_bytes: u64,
    /// Reader side: the most bytes of paths the chunk may decode into ([`path_budget`]).
    path_budget: u64,
}

/// The most bytes of paths a chunk of `chunk_len` bytes may hold once decoded: 64 times its own
/// size, and 2 MiB (a copy's two paths of [`MAX_PATH_BYTES`] in a chunk of its own). A path
/// record may keep the whole previous path for a byte or two: bounded this way, a crafted chunk
/// decodes into at most 64 times its size (a Tezos-like trace: ~7 times), not 1 MiB per record.
/// A writer starts a new chunk rather than go over it.
pub(crate) fn path_budget(chunk_len: usize) -> u64 {
    (chunk_len as u64).saturating_mul(64).saturating_add(2 * MAX_PATH_BYTES as u64)
}

fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

fn is_hex_step(step: &[u8]) -> bool {
    !step.is_empty()
        && step.len().is_multiple_of(2)
        && step.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn nibble(value: u8) -> u8 {
    if value < 10 { b'0' + value } else { b'a' + value - 10 }
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        _ => digit.wrapping_sub(b'a').wrapping_add(10) & 0x0f,
    }
}

impl CodecState {
    /// The state a reader starts a chunk of `chunk_len` bytes with.
    pub(crate) fn reading_chunk(chunk_len: usize) -> CodecState {
        CodecState { path_budget: path_budget(chunk_len), ..CodecState::default() }
    }

    /// The bytes of the paths encoded in this chunk.
    pub(crate) fn path_bytes(&self) -> u64 {
        self.path_bytes
    }

    fn note_ctx(&mut self, id: ContextId) {
        self.last_ctx = id;
        self.max_ctx = self.max_ctx.max(id);
    }

    fn input_prediction(&self) -> ContextId {
        self.last_ctx
    }

    fn out_prediction(&self) -> ContextId {
        self.max_ctx.wrapping_add(1)
    }

    /// Writes `id` unless it equals `predicted`; returns `flag` if omitted.
    fn put_ctx(&mut self, out: &mut Vec<u8>, id: ContextId, predicted: ContextId, flag: u8) -> u8 {
        self.note_ctx(id);
        if id == predicted {
            return flag;
        }
        put_varint(out, zigzag(id.wrapping_sub(predicted) as i64));
        0
    }

    fn get_ctx(&mut self, s: &mut Slice<'_>, predicted: ContextId, omitted: bool) -> Result<ContextId, Fail> {
        let id = if omitted {
            predicted
        } else {
            predicted.wrapping_add(unzigzag(s.varint("context id delta")?) as u64)
        };
        self.note_ctx(id);
        Ok(id)
    }

    fn put_path(&mut self, out: &mut Vec<u8>, path: &Path) {
        self.path_bytes = self.path_bytes.saturating_add(path.byte_len() as u64);
        let keep = self.prev_path.iter().zip(path).take_while(|(a, b)| a == b).count();
        let fresh = path.iter().skip(keep);
        let count = fresh.clone().count() as u64;
        put_varint(out, ((keep as u64) << 3) | count.min(7));
        if count >= 7 {
            put_varint(out, count - 7);
        }
        self.prev_path.truncate(keep);
        for step in fresh {
            if let Some(index) = self.step_ids.get(step) {
                put_varint(out, (index << 2) | STEP_REF);
            } else {
                if is_hex_step(step) {
                    put_varint(out, ((step.len() as u64 / 2) << 2) | STEP_HEX);
                    out.extend(step.chunks_exact(2).map(|pair| match pair {
                        [high, low] => (hex_value(*high) << 4) | hex_value(*low),
                        _ => 0,
                    }));
                } else {
                    put_varint(out, ((step.len() as u64) << 2) | STEP_RAW);
                    out.extend_from_slice(step);
                }
                if step.len() >= STEP_TABLE_MIN {
                    let index = self.step_ids.len() as u64;
                    self.step_ids.insert(step.into(), index);
                }
            }
            self.prev_path.push(step);
        }
    }

    fn get_path(&mut self, s: &mut Slice<'_>) -> Result<Path, Fail> {
        const TOO_LONG: Fail = Fail::Expected("a path of at most 1 MiB");
        let head = s.varint("path header")?;
        let keep = usize::try_from(head >> 3)
            .ok()
            .filter(|keep| *keep <= self.prev_steps)
            .ok_or(Fail::Expected("a shared prefix within the previous path"))?;
        let mut count = head & 7;
        if count == 7 {
            count = s.varint("path step count")?.checked_add(7).ok_or(Fail::Expected("a path step count"))?;
        }
        if (keep as u64).checked_add(count).is_none_or(|steps| steps > MAX_PATH_STEPS as u64) {
            return Err(Fail::Expected("a path of at most 131,072 steps"));
        }
        self.prev_path.truncate(keep);
        self.prev_steps = keep;
        for _ in 0..count {
            let step_head = s.varint("path step header")?;
            // Each step's length is checked against the bound before it is copied anywhere.
            let fits = |len: u64| {
                usize::try_from(len)
                    .is_ok_and(|len| self.prev_path.byte_len_after_push(len) <= MAX_PATH_BYTES)
            };
            let step: &[u8] = match step_head & 3 {
                STEP_RAW => {
                    if !fits(step_head >> 2) {
                        return Err(TOO_LONG);
                    }
                    s.take(step_head >> 2, "path step")?
                }
                STEP_HEX => {
                    if !fits((step_head >> 2).saturating_mul(2)) {
                        return Err(TOO_LONG);
                    }
                    let bytes = s.take(step_head >> 2, "hex path step")?;
                    if bytes.is_empty() {
                        return Err(Fail::Expected("a non-empty hex step"));
                    }
                    self.hex_step.clear();
                    self.hex_step
                        .extend(bytes.iter().flat_map(|byte| [nibble(byte >> 4), nibble(byte & 0x0f)]));
                    &self.hex_step
                }
                STEP_REF => {
                    let index = usize::try_from(step_head >> 2).unwrap_or(usize::MAX);
                    let step =
                        self.steps.get(index).ok_or(Fail::Expected("a step reference within the table"))?;
                    if !fits(step.len() as u64) {
                        return Err(TOO_LONG);
                    }
                    self.prev_path.push(step);
                    self.prev_steps += 1;
                    continue;
                }
                _ => return Err(Fail::Expected("step kind 0 (raw), 1 (hex) or 2 (reference)")),
            };
            if step.len() >= STEP_TABLE_MIN {
                self.steps.push(step.into());
            }
            self.prev_path.push(step);
            self.prev_steps += 1;
        }
        self.path_bytes = self.path_bytes.saturating_add(self.prev_path.byte_len() as u64);
        if self.path_bytes > self.path_budget {
            return Err(Fail::Expected("paths of at most 64 times their chunk's size (and 2 MiB)"));
        }
        Ok(self.prev_path.clone())
    }
}

fn scope_flag<T: Copy>(scoped: &Scoped<T>, flag: u8) -> u8 {
    if scoped.is_forget() { 0 } else { flag }
}

fn scoped<T>(value: T, keep: bool) -> Scoped<T> {
    if keep { Scoped::Keep(value) } else { Scoped::Forget(value) }
}

/// Appends the record of `op`, advancing `state`.
pub(crate) fn encode_op(op: &Op, state: &mut CodecState, out: &mut Vec<u8>) {
    let tag_at = out.len();
    out.push(0);
    let tag = match op {
        Op::Checkout { commit, out: produced } => {
            let mut tag = CHECKOUT | scope_flag(commit, A_KEEP) | scope_flag(produced, B_SET);
            if commit.value() == state.last_hash {
                tag |= HASH_PREDICTED;
            } else {
                out.extend_from_slice(commit.value().as_bytes());
            }
            state.last_hash = commit.value();
            let predicted = state.out_prediction();
            tag | state.put_ctx(out, produced.value(), predicted, CTX1_PREDICTED)
        }
        Op::Add { path, value, input, out: produced } => {
            state.put_path(out, path);
            put_bytes(out, value);
            ADD | encode_in_out(state, out, input, produced)
        }
        Op::Remove { path, input, out: produced } => {
            state.put_path(out, path);
            REMOVE | encode_in_out(state, out, input, produced)
        }
        Op::Copy { from, to, input, out: produced } => {
            state.put_path(out, from);
            state.put_path(out, to);
            COPY | encode_in_out(state, out, input, produced)
        }
        Op::Find { path, found, input }
        | Op::Mem { path, found, input }
        | Op::MemTree { path, found, input } => {
            let kind = match op {
                Op::Find { .. } => FIND,
                Op::Mem { .. } => MEM,
                _ => MEM_TREE,
            };
            state.put_path(out, path);
            let predicted = state.input_prediction();
            let found = if *found { B_SET } else { 0 };
            kind | scope_flag(input, A_KEEP)
                | found
                | state.put_ctx(out, input.value(), predicted, CTX1_PREDICTED)
        }
        Op::Commit { hash, date, message, parents, input } => {
            out.extend_from_slice(hash.value().as_bytes());
            put_varint(out, zigzag(date.wrapping_sub(state.last_date)));
            put_bytes(out, message.as_bytes());
            put_varint(out, parents.len() as u64);
            for parent in parents {
                let keep = scope_flag(parent, PARENT_KEEP);
                if parent.value() == state.last_hash {
                    out.push(keep | PARENT_PREDICTED);
                } else {
                    out.push(keep);
                    out.extend_from_slice(parent.value().as_bytes());
                }
            }
            state.last_hash = hash.value();
            state.last_date = *date;
            let predicted = state.input_prediction();
            COMMIT
                | scope_flag(hash, A_KEEP)
                | scope_flag(input, B_SET)
                | state.put_ctx(out, input.value(), predicted, CTX1_PREDICTED)
        }
    };
    if let Some(slot) = out.get_mut(tag_at) {
        *slot = tag;
    }
}

fn encode_in_out(
    state: &mut CodecState,
    out: &mut Vec<u8>,
    input: &Scoped<ContextId>,
    produced: &Scoped<ContextId>,
) -> u8 {
    let predicted = state.input_prediction();
    let mut tag = scope_flag(input, A_KEEP) | scope_flag(produced, B_SET);
    tag |= state.put_ctx(out, input.value(), predicted, CTX1_PREDICTED);
    let predicted = state.out_prediction();
    tag | state.put_ctx(out, produced.value(), predicted, CTX2_PREDICTED)
}

fn get_hash(s: &mut Slice<'_>, what: &'static str) -> Result<Hash, Fail> {
    Ok(Hash(s.array(what)?))
}

fn decode_in_out(
    state: &mut CodecState,
    s: &mut Slice<'_>,
    tag: u8,
) -> Result<(Scoped<ContextId>, Scoped<ContextId>), Fail> {
    let predicted = state.input_prediction();
    let input = state.get_ctx(s, predicted, tag & CTX1_PREDICTED != 0)?;
    let predicted = state.out_prediction();
    let produced = state.get_ctx(s, predicted, tag & CTX2_PREDICTED != 0)?;
    Ok((scoped(input, tag & A_KEEP != 0), scoped(produced, tag & B_SET != 0)))
}

/// Decodes one record from `s`, advancing `state`.
pub(crate) fn decode_op(s: &mut Slice<'_>, state: &mut CodecState) -> Result<Op, Fail> {
    let tag = s.byte("record tag")?;
    let kind = tag & 7;
    let allowed = match kind {
        CHECKOUT => A_KEEP | B_SET | CTX1_PREDICTED | HASH_PREDICTED,
        ADD | REMOVE | COPY => A_KEEP | B_SET | CTX1_PREDICTED | CTX2_PREDICTED,
        _ => A_KEEP | B_SET | CTX1_PREDICTED,
    };
    if tag & !(allowed | 7) != 0 {
        return Err(Fail::UnknownTag(u64::from(tag)));
    }
    Ok(match kind {
        CHECKOUT => {
            let hash =
                if tag & HASH_PREDICTED != 0 { state.last_hash } else { get_hash(s, "checkout hash")? };
            state.last_hash = hash;
            let predicted = state.out_prediction();
            let out = state.get_ctx(s, predicted, tag & CTX1_PREDICTED != 0)?;
            Op::Checkout { commit: scoped(hash, tag & A_KEEP != 0), out: scoped(out, tag & B_SET != 0) }
        }
        ADD => {
            let path = state.get_path(s)?;
            let value = s.bytes("value")?.to_vec();
            let (input, out) = decode_in_out(state, s, tag)?;
            Op::Add { path, value, input, out }
        }
        REMOVE => {
            let path = state.get_path(s)?;
            let (input, out) = decode_in_out(state, s, tag)?;
            Op::Remove { path, input, out }
        }
        COPY => {
            let from = state.get_path(s)?;
            let to = state.get_path(s)?;
            let (input, out) = decode_in_out(state, s, tag)?;
            Op::Copy { from, to, input, out }
        }
        FIND | MEM | MEM_TREE => {
            let path = state.get_path(s)?;
            let predicted = state.input_prediction();
            let input = scoped(state.get_ctx(s, predicted, tag & CTX1_PREDICTED != 0)?, tag & A_KEEP != 0);
            let found = tag & B_SET != 0;
            match kind {
                FIND => Op::Find { path, found, input },
                MEM => Op::Mem { path, found, input },
                _ => Op::MemTree { path, found, input },
            }
        }
        _ => {
            let hash = get_hash(s, "commit hash")?;
            let date = state.last_date.wrapping_add(unzigzag(s.varint("commit date delta")?));
            let message = std::str::from_utf8(s.bytes("commit message")?)
                .map_err(|_| Fail::Expected("a UTF-8 commit message"))?
                .to_owned();
            let count = s.varint("parent count")?;
            let mut parents = Vec::with_capacity(count.min(16) as usize);
            for _ in 0..count {
                let flags = s.byte("parent flags")?;
                if flags & !(PARENT_KEEP | PARENT_PREDICTED) != 0 {
                    return Err(Fail::Expected("parent flags 0..=3"));
                }
                let parent =
                    if flags & PARENT_PREDICTED != 0 { state.last_hash } else { get_hash(s, "parent hash")? };
                parents.push(scoped(parent, flags & PARENT_KEEP != 0));
            }
            state.last_hash = hash;
            state.last_date = date;
            let predicted = state.input_prediction();
            let input = scoped(state.get_ctx(s, predicted, tag & CTX1_PREDICTED != 0)?, tag & B_SET != 0);
            Op::Commit { hash: scoped(hash, tag & A_KEEP != 0), date, message, parents, input }
        }
    })
}
