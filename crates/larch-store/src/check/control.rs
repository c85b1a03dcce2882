//! The check of the control file itself (`docs/store.md`, *A damaged slot*): a damaged slot or
//! confirmation record beside a valid published state loses nothing but the protection against the
//! next torn write, and is reported as such; a confirmation covering a generation no valid slot
//! holds says a durable published state was lost.

use crate::check::fsck::Problem;
use crate::error::FileKind;
use crate::format::control::{self, CONFIRM_AT, CONFIRM_LEN, ControlFileState, PAGE, Slot};
use crate::io::storage::Storage;
use crate::switch::control_file;

/// Reads of the control file before damage is reported, when a writer may be publishing beside
/// the check (a read racing a slot's `pwrite` can see a torn page that is not on the disk).
const READS: u32 = 3;

/// The problems of the control file `control`. With `live` (a writer may be publishing), damage
/// is reported only when it is there at each of a few reads, a few milliseconds apart.
pub(crate) fn control_problems(control: &dyn Storage, live: bool) -> Vec<Problem> {
    let mut problems = read_problems(control);
    let mut reads = 1;
    while live && !problems.is_empty() && reads < READS {
        std::thread::sleep(std::time::Duration::from_millis(5));
        problems = read_problems(control);
        reads += 1;
    }
    problems
}

fn problem(offset: u64, what: String) -> Problem {
    Problem { file: FileKind::Control, offset, hash: None, parent: None, what }
}

fn read_problems(control: &dyn Storage) -> Vec<Problem> {
    let state: ControlFileState = match control_file::read_control(control) {
        Ok(state) => state,
        Err(e) => return vec![problem(0, format!("the control file cannot be read: {e}"))],
    };
    let mut problems = Vec::new();
    if let Some(lost) = state.lost_generation() {
        problems.push(problem(
            CONFIRM_AT,
            format!(
                "the confirmation record says generation {lost} was made durable, but no valid slot holds \
                 it: a published state was lost; `larch recover` finds its commits in the pack"
            ),
        ));
    }
    let valid = state.newest().is_some();
    for (i, slot) in state.slots.iter().enumerate() {
        if let Slot::Damaged(why) = slot {
            let what = if valid {
                format!(
                    "control slot {i} is damaged ({why}): the spare slot, nothing published was lost (the \
                     state stands in the other slot); the writer's next publish (or open) rewrites it"
                )
            } else {
                format!("control slot {i} is damaged ({why})")
            };
            problems.push(problem(i as u64 * PAGE, what));
        }
    }
    let mut confirm = [0u8; CONFIRM_LEN];
    let confirm_present = control.len().is_ok_and(|len| len >= CONFIRM_AT + CONFIRM_LEN as u64)
        && control.read_at(CONFIRM_AT, &mut confirm).is_ok();
    if confirm_present && control::confirm_damaged(&confirm) {
        problems.push(problem(
            CONFIRM_AT,
            "the confirmation record is damaged: nothing published was lost; the writer's next publish \
             (or open) rewrites it"
                .into(),
        ));
    }
    problems
}
