//! The sections under the kernel: bumps, installs and claims on every CPU, aborts injected
//! at every instruction boundary, migrations and signal storms.

use super::cpu_slots::*;
use super::take::TAKEN;
use super::*;
use crate::memory::packed::MAX_OFFSET_WORDS;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

fn area() -> Option<*mut u8> {
    let area = current_area();
    if area.is_none() {
        eprintln!("rseq unavailable here: {}", mechanism());
    }
    area
}

/// The offset of every thread's area from its thread pointer, where glibc registered the
/// areas (the sections addressed through `fs` need a registration: an unregistered area is
/// never aborted); else `None`, saying why.
fn glibc_registered_offset() -> Option<isize> {
    match (fixed_area_offset(), mechanism()) {
        (Some(offset), RseqMechanism::Glibc { .. }) => Some(offset),
        (_, mechanism) => {
            eprintln!("no glibc registration at a fixed offset here: {mechanism}");
            None
        }
    }
}

fn pin(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn packed_words_split_top_and_left() {
    let word = PackedWord::new(12345, 678);
    assert_eq!((word.offset_words(), word.upper()), (12345, 678));
    let max = PackedWord::new(MAX_OFFSET_WORDS, (MAX_BUFFER_BYTES / 8) as u64);
    assert_eq!(max.upper() * 8, MAX_BUFFER_BYTES as u64);
}

/// On one pinned CPU: bumps take words in order, refuse when too few are left, and an
/// install replaces the slot only if it still holds what the thread saw.
#[test]
fn bump_and_install_on_one_cpu() {
    std::thread::spawn(|| {
        let Some(area) = area() else { return };
        assert!(pin(0));
        let slots = CpuSlots::new(online_cpus(), SlotIndex::Cpu);
        // SAFETY (both): `area` is this thread's registered area.
        let bump = |words| unsafe { slots.bump(area, words) }.0;
        let install = |cpu, old, new| unsafe { slots.install(area, cpu, old, new) }.0;
        let done = |top, left| Outcome::Done {
            cpu: 0,
            before: PackedWord::new(top, left),
        };
        let refused = |top, left| Outcome::Refused {
            cpu: 0,
            seen: PackedWord::new(top, left),
        };

        assert_eq!(bump(2), refused(0, 0), "an empty slot refuses");
        assert!(matches!(
            install(0, PackedWord::from_raw(0), PackedWord::new(100, 5)),
            Outcome::Done { cpu: 0, .. }
        ));
        assert_eq!(bump(2), done(100, 5));
        assert_eq!(bump(3), done(102, 3));
        assert_eq!(bump(1), refused(105, 0), "too few words left");
        // A stale expectation does not install.
        assert_eq!(
            install(0, PackedWord::new(100, 5), PackedWord::new(200, 9)),
            refused(105, 0)
        );
        // Nor does the wrong CPU.
        if online_cpus() > 1 {
            assert_eq!(
                install(1, PackedWord::from_raw(0), PackedWord::new(200, 9)),
                Outcome::Moved
            );
        }
        assert_eq!(slots.load(0), PackedWord::new(105, 0));
    })
    .join()
    .unwrap();
}

extern "C" fn ignore(_: libc::c_int) {}

/// A thread that sends SIGUSR1 (caught by [`ignore`], with `SA_RESTART`) to every thread that
/// joined it, over and over, until [`SignalStorm::stop`]: each signal aborts the restartable
/// section its target is in. A thread that joined stays alive until `stop` returned
/// (signalling an exited thread is undefined behaviour).
struct SignalStorm {
    targets: Arc<Mutex<Vec<libc::pthread_t>>>,
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl SignalStorm {
    fn start() -> Self {
        // SAFETY: installs a handler that does nothing, with SA_RESTART.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut());
        }
        let targets = Arc::new(Mutex::new(Vec::new()));
        let done = Arc::new(AtomicBool::new(false));
        let thread = {
            let (targets, done) = (targets.clone(), done.clone());
            std::thread::spawn(move || {
                let mut signals = 0u64;
                while !done.load(Ordering::Relaxed) {
                    for &target in targets.lock().unwrap().iter() {
                        // SAFETY: the target is alive: it joined and stays alive until
                        // `stop` has joined this thread.
                        unsafe { libc::pthread_kill(target, libc::SIGUSR1) };
                        signals += 1;
                    }
                    std::thread::yield_now();
                }
                signals
            })
        };
        Self {
            targets,
            done,
            thread,
        }
    }

    /// What a thread joins the storm with ([`join`]), to move into it.
    fn targets(&self) -> Arc<Mutex<Vec<libc::pthread_t>>> {
        self.targets.clone()
    }

    /// Stops the storm: the signals it sent.
    fn stop(self) -> u64 {
        self.done.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// The calling thread joins the storm whose [`SignalStorm::targets`] these are.
fn join(targets: &Mutex<Vec<libc::pthread_t>>) {
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    targets.lock().unwrap().push(me);
}

/// Many more threads than CPUs bump and refill per-CPU slots while they keep moving
/// between CPUs and a storm of signals hits them: every word handed out is handed out
/// once, and the sections did abort.
#[test]
fn migrations_and_signal_storms_never_hand_out_a_word_twice() {
    if area().is_none() {
        return;
    }
    for index in indexes() {
        storm_of_bumps_and_installs(index);
    }
}

/// The slot indexes to test: the CPU number, and concurrency ids where the kernel has them.
fn indexes() -> Vec<SlotIndex> {
    let mut indexes = vec![SlotIndex::Cpu];
    if kernel_fills_mm_cid() {
        indexes.push(SlotIndex::ConcurrencyId);
    }
    indexes
}

/// [`migrations_and_signal_storms_never_hand_out_a_word_twice`] over slots indexed by `index`.
fn storm_of_bumps_and_installs(index: SlotIndex) {
    const THREADS: usize = 128;
    const BUMPS: usize = 4000;
    const CHUNK_WORDS: u64 = 64;
    let storm = SignalStorm::start();
    let cpus = online_cpus();
    let slots = Arc::new(CpuSlots::new(cpus, index));
    let next_chunk = Arc::new(AtomicU64::new(0));
    let aborts = Arc::new(AtomicU64::new(0));
    // Workers stay alive until the storm has stopped.
    let finished = Arc::new(AtomicU64::new(0));
    let released = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..THREADS)
        .map(|index| {
            let (slots, next_chunk, aborts, targets) = (
                slots.clone(),
                next_chunk.clone(),
                aborts.clone(),
                storm.targets(),
            );
            let (finished, released) = (finished.clone(), released.clone());
            std::thread::spawn(move || {
                join(&targets);
                let area = current_area().expect("registered");
                let mut words = Vec::with_capacity(BUMPS);
                let mut sidelined = Vec::new();
                let mut bumps = 0;
                while bumps < BUMPS {
                    if bumps % 64 == 0 {
                        pin((index + bumps / 64) % cpus);
                    }
                    // SAFETY: `area` is this thread's registered area.
                    let widened = |words| unsafe { slots.bump_widened(area, words) };
                    // SAFETY: as above.
                    let plain = |words| unsafe { slots.bump(area, words) };
                    let (outcome, aborted) = if bumps % 8 == 0 { widened(2) } else { plain(2) };
                    aborts.fetch_add(aborted, Ordering::Relaxed);
                    match outcome {
                        Outcome::Done { before, .. } => {
                            words.push(before.offset_words());
                            bumps += 1;
                        }
                        Outcome::Refused { cpu, seen } => {
                            let start = next_chunk.fetch_add(CHUNK_WORDS, Ordering::Relaxed);
                            let new = PackedWord::new(start, CHUNK_WORDS);
                            // SAFETY: as above.
                            let (installed, aborted) =
                                unsafe { slots.install(area, cpu, seen, new) };
                            aborts.fetch_add(aborted, Ordering::Relaxed);
                            if !matches!(installed, Outcome::Done { .. }) {
                                sidelined.push(start);
                            }
                        }
                        Outcome::Moved | Outcome::OutOfRange | Outcome::GaveUp => {}
                    }
                }
                finished.fetch_add(1, Ordering::Release);
                while !released.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                (words, sidelined)
            })
        })
        .collect();
    while finished.load(Ordering::Acquire) < THREADS as u64 {
        std::thread::yield_now();
    }
    let signals = storm.stop();
    released.store(true, Ordering::Release);
    let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let mut words: Vec<u64> = results
        .iter()
        .flat_map(|(w, _)| w.iter().copied())
        .collect();
    let sidelined: Vec<u64> = results
        .iter()
        .flat_map(|(_, s)| s.iter().copied())
        .collect();
    words.sort_unstable();
    for pair in words.windows(2) {
        assert!(
            pair[1] >= pair[0] + 2,
            "words {} and {} overlap",
            pair[0],
            pair[1]
        );
    }
    for chunk in &sidelined {
        let inside = words.partition_point(|&w| w < *chunk);
        assert!(
            words.get(inside).is_none_or(|&w| w >= chunk + CHUNK_WORDS),
            "a sidelined chunk was used"
        );
    }
    assert_eq!(words.len(), THREADS * BUMPS);
    let total_aborts = aborts.load(Ordering::Relaxed);
    eprintln!(
        "{signals} signals, {total_aborts} aborts, {} sidelined chunks",
        sidelined.len()
    );
    assert!(
        total_aborts > 0,
        "the storm should have aborted some sections"
    );
}

/// A buffer taken from its slot by a thread on another CPU is the taker's alone: taken from a
/// quiet slot it empties it; with a stale word, or twice, nothing is taken.
#[test]
fn a_taken_buffer_is_the_takers_and_its_slot_is_left_empty() {
    let slots = CpuSlots::new(2, SlotIndex::Cpu);
    let buffer = PackedWord::new(100, 50);
    slots.store(1, buffer);
    if !restart_sections() {
        eprintln!("the kernel cannot restart sections here: nothing is ever taken");
        assert!(!slots.take(1, buffer));
        assert_eq!(slots.load(1), buffer, "put back");
        return;
    }
    assert!(slots.take(1, buffer));
    assert_eq!(slots.load(1), PackedWord::from_raw(0));
    assert!(!slots.take(1, buffer), "taken twice");
    slots.store(1, PackedWord::new(120, 30));
    assert!(!slots.take(1, buffer), "a stale word");
    assert_eq!(slots.load(1), PackedWord::new(120, 30));
    assert_eq!(slots.load(0), PackedWord::from_raw(0), "another slot");
}

/// While many more threads than CPUs bump and refill per-CPU slots, move between CPUs and are
/// hit by a storm of signals, two threads keep taking the buffers from the slots
/// ([`CpuSlots::take`]): every word is accounted for exactly once, bumped, retired as a tail
/// at a refill, taken, never installed, or left in a slot at the end; none twice, none lost.
#[test]
fn buffers_taken_by_other_cpus_are_never_also_bumped() {
    if area().is_none() {
        return;
    }
    if !restart_sections() {
        eprintln!("the kernel cannot restart sections here: nothing is ever taken");
        return;
    }
    for index in indexes() {
        storm_of_bumps_installs_and_takes(index);
    }
}

/// [`buffers_taken_by_other_cpus_are_never_also_bumped`] over slots indexed by `index`.
fn storm_of_bumps_installs_and_takes(index: SlotIndex) {
    const THREADS: usize = 32;
    const BUMPS: usize = 3000;
    const CHUNK_WORDS: u64 = 64;
    const TAKERS: usize = 2;
    let storm = SignalStorm::start();
    let cpus = online_cpus();
    let slots = Arc::new(CpuSlots::new(cpus, index));
    let next_chunk = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    // Buffers taken so far: the workers run on until some were (or a deadline passes).
    let taken_so_far = Arc::new(AtomicU64::new(0));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // Workers stay alive until the storm has stopped.
    let finished = Arc::new(AtomicU64::new(0));
    let released = Arc::new(AtomicBool::new(false));
    // Each taker: the (top, words) of every buffer it took.
    let takers: Vec<_> = (0..TAKERS)
        .map(|taker| {
            let (slots, done, taken_so_far) = (slots.clone(), done.clone(), taken_so_far.clone());
            std::thread::spawn(move || {
                let mut taken = Vec::new();
                let mut round = 0usize;
                while !done.load(Ordering::Relaxed) {
                    round += 1;
                    pin((taker + round) % cpus);
                    for cpu in 0..slots.cpus() {
                        let seen = slots.load(cpu);
                        if seen.raw() != 0
                            && seen != TAKEN
                            && seen.upper() > 0
                            && slots.take(cpu, seen)
                        {
                            taken.push((seen.offset_words(), seen.upper()));
                            taken_so_far.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    std::thread::yield_now();
                }
                taken
            })
        })
        .collect();
    let workers: Vec<_> = (0..THREADS)
        .map(|index| {
            let (slots, next_chunk, targets) = (slots.clone(), next_chunk.clone(), storm.targets());
            let taken_so_far = taken_so_far.clone();
            let (finished, released) = (finished.clone(), released.clone());
            std::thread::spawn(move || {
                join(&targets);
                let area = current_area().expect("registered");
                // (top, words) of every piece this thread got: bumps, tails it retired at a
                // refill, chunks it could not install.
                let mut pieces = Vec::with_capacity(BUMPS + BUMPS / 8);
                let mut bumps = 0;
                while bumps < BUMPS
                    || taken_so_far.load(Ordering::Relaxed) < 8
                        && std::time::Instant::now() < deadline
                {
                    if bumps % 64 == 0 {
                        pin((index + bumps / 64) % cpus);
                    }
                    // SAFETY: `area` is this thread's registered area.
                    let (outcome, _) = unsafe { slots.bump(area, 2) };
                    match outcome {
                        Outcome::Done { before, .. } => {
                            pieces.push((before.offset_words(), 2));
                            bumps += 1;
                        }
                        Outcome::Refused { cpu, seen } => {
                            let start = next_chunk.fetch_add(CHUNK_WORDS, Ordering::Relaxed);
                            let new = PackedWord::new(start, CHUNK_WORDS);
                            // As the levels' refill: never over a buffer being taken.
                            let installed = seen != TAKEN && {
                                // SAFETY: as above.
                                let (outcome, _) = unsafe { slots.install(area, cpu, seen, new) };
                                matches!(outcome, Outcome::Done { .. })
                            };
                            if !installed {
                                pieces.push((start, CHUNK_WORDS));
                            } else if seen.raw() != 0 && seen.upper() > 0 {
                                pieces.push((seen.offset_words(), seen.upper()));
                            }
                        }
                        Outcome::Moved | Outcome::OutOfRange | Outcome::GaveUp => {}
                    }
                }
                finished.fetch_add(1, Ordering::Release);
                while !released.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                pieces
            })
        })
        .collect();
    while finished.load(Ordering::Acquire) < THREADS as u64 {
        std::thread::yield_now();
    }
    done.store(true, Ordering::Relaxed);
    storm.stop();
    let taken: Vec<(u64, u64)> = takers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    released.store(true, Ordering::Release);
    let mut pieces: Vec<(u64, u64)> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let taken_count = taken.len();
    pieces.extend(taken);
    for cpu in 0..slots.cpus() {
        let left = slots.load(cpu);
        assert_ne!(left, TAKEN, "a marker left in slot {cpu}");
        if left.raw() != 0 && left.upper() > 0 {
            pieces.push((left.offset_words(), left.upper()));
        }
    }
    // The pieces tile [0, every chunk handed out) exactly.
    pieces.sort_unstable();
    let mut covered = 0;
    for &(top, words) in &pieces {
        assert_eq!(
            top, covered,
            "{index}: a word lost or handed out twice at {top}"
        );
        covered += words;
    }
    assert_eq!(
        covered,
        next_chunk.load(Ordering::Relaxed),
        "{index}: the last chunk"
    );
    eprintln!(
        "{index}: {taken_count} buffers taken, {} pieces",
        pieces.len()
    );
    assert!(
        taken_count > 0,
        "{index}: the takers should have taken some buffers"
    );
}

/// The `cpu-lab` sections with an abort forced at an instruction boundary of every
/// bump-or-claim (each boundary in turn), while 64 threads move between CPUs and carve objects, claim tails and
/// install LABs: every call aborts once and retries, and no byte is handed out twice.
#[test]
fn lab_sections_with_injected_aborts_never_hand_out_a_byte_twice() {
    if area().is_none() {
        return;
    }
    for index in indexes() {
        lab_sections_with_injected_aborts(index);
    }
}

/// [`lab_sections_with_injected_aborts_never_hand_out_a_byte_twice`] over LABs indexed by
/// `index`.
fn lab_sections_with_injected_aborts(index: SlotIndex) {
    const THREADS: usize = 64;
    const CALLS: usize = 3000;
    const LAB_BYTES: usize = 512;
    let cpus = online_cpus();
    let slots = Arc::new(CpuLabSlots::new(cpus, index));
    // Fake heap addresses: LABs are carved upwards from here, never dereferenced.
    let next_lab = Arc::new(AtomicU64::new(1 << 20));
    let workers: Vec<_> = (0..THREADS)
        .map(|index| {
            let (slots, next_lab) = (slots.clone(), next_lab.clone());
            std::thread::spawn(move || {
                let area = current_area().expect("registered");
                // (start, bytes) of every piece this thread was handed.
                let mut pieces = Vec::new();
                let mut aborts = 0;
                for call in 0..CALLS {
                    if call % 32 == 0 {
                        pin((index + call / 32) % cpus);
                    }
                    let bytes = 8 * (1 + call % 7);
                    // SAFETY: `area` is this thread's registered area.
                    let inject_at = 1 + (call % CLAIM_POINTS) as u64;
                    let (outcome, aborted) =
                        unsafe { slots.bump_or_claim_injected(area, bytes, 0, inject_at) };
                    aborts += aborted;
                    match outcome {
                        LabBump::Object { address, .. } => pieces.push((address, bytes)),
                        LabBump::Claimed { top, end, .. } => {
                            if top < end {
                                pieces.push((top, end - top));
                            }
                            let lab =
                                next_lab.fetch_add(LAB_BYTES as u64, Ordering::Relaxed) as usize;
                            pieces.push((lab, bytes));
                            // SAFETY: as above.
                            let (installed, _) = unsafe {
                                slots.install(
                                    area,
                                    0,
                                    lab + bytes,
                                    lab + LAB_BYTES,
                                    lab + LAB_BYTES,
                                )
                            };
                            if matches!(installed, LabInstall::Occupied { .. }) {
                                pieces.push((lab + bytes, LAB_BYTES - bytes));
                            }
                        }
                        LabBump::GaveUp | LabBump::OutOfRange => {
                            panic!("{outcome:?} after one injected abort")
                        }
                    }
                }
                (pieces, aborts)
            })
        })
        .collect();
    let mut pieces = Vec::new();
    for worker in workers {
        let (mine, aborts) = worker.join().unwrap();
        assert!(aborts >= CALLS as u64, "every call aborts at least once");
        pieces.extend(mine);
    }
    for cpu in 0..cpus {
        let (top, end) = slots.load(cpu);
        if top < end {
            pieces.push((top, end - top));
        }
    }
    pieces.sort_unstable();
    for pair in pieces.windows(2) {
        let ((a, a_len), (b, _)) = (pair[0], pair[1]);
        assert!(
            a + a_len <= b,
            "pieces at {a:#x}+{a_len} and {b:#x} overlap"
        );
    }
    let handed: usize = pieces.iter().map(|&(_, len)| len).sum();
    let carved = next_lab.load(Ordering::Relaxed) as usize - (1 << 20);
    assert_eq!(handed, carved, "every byte of every LAB is accounted for");
}

/// The inline `cpu-lab` bump carves from the LAB of the CPU it was given only while the thread
/// runs on that CPU, and refuses an object that does not fit.
#[test]
fn the_inline_lab_bump_checks_the_cpu_and_the_end() {
    std::thread::spawn(|| {
        let Some(offset) = glibc_registered_offset() else {
            return;
        };
        assert!(pin(0));
        let slots = CpuLabSlots::new(online_cpus().max(2), SlotIndex::Cpu);
        slots.store(0, (1000, 1064));
        // SAFETY: `offset` is glibc's area offset; the slots are live.
        let bump = |cpu, bytes| unsafe { lab_bump(offset, slots.slot_of(cpu), cpu, bytes) };
        assert_eq!(bump(0, 16), 1000);
        assert_eq!(bump(0, 48), 1016);
        assert_eq!(bump(0, 8), 0, "full");
        assert_eq!(slots.load(0), (1064, 1064));
        if online_cpus() > 1 {
            slots.store(1, (2000, 3000));
            assert_eq!(bump(1, 16), 0, "the thread is not on CPU 1");
            assert_eq!(slots.load(1), (2000, 3000));
        }
    })
    .join()
    .unwrap();
}

/// The short refill's one-try bump, on one pinned CPU: takes words while the slot of the
/// thread's CPU has them, and refuses, writing nothing, when it has too few (an empty slot
/// among them). Every point where an abort can land ends `Aborted` with the slot as it was.
#[test]
fn the_home_bump_takes_words_in_one_try() {
    std::thread::spawn(|| {
        let Some(offset) = glibc_registered_offset() else {
            return;
        };
        assert!(pin(0));
        let slots = CpuSlots::new(online_cpus(), SlotIndex::Cpu);
        // SAFETY: `offset` is glibc's area offset; the slots are live.
        let bump = |words| unsafe { slots.bump_at_home(offset, words) };
        assert_eq!(bump(2), HomeBump::Refused, "an empty slot refuses");
        slots.store(0, PackedWord::new(100, 5));
        assert_eq!(bump(2), HomeBump::Done { offset_bytes: 800 });
        assert_eq!(bump(3), HomeBump::Done { offset_bytes: 816 });
        assert_eq!(bump(1), HomeBump::Refused, "too few words left");
        assert_eq!(slots.load(0), PackedWord::new(105, 0));
        if online_cpus() > 1 {
            assert_eq!(slots.load(1), PackedWord::from_raw(0), "another CPU's slot");
        }

        // An abort at each of the body's points (ten for a bump that fits, nine for one that
        // is refused); one past the last is no abort at all.
        let initial = PackedWord::new(100, 5);
        for (words, points, expected, after) in [
            (
                2,
                10,
                HomeBump::Done { offset_bytes: 800 },
                PackedWord::new(102, 3),
            ),
            (6, 9, HomeBump::Refused, initial),
        ] {
            for k in 1..=points + 1 {
                let (outcome, slot) = (0..3)
                    .map(|_| {
                        slots.store(0, initial);
                        // SAFETY: as above.
                        let outcome = unsafe { slots.bump_at_home_injected(offset, words, k) };
                        (outcome, slots.load(0))
                    })
                    // An injected abort always lands; a real preemption may abort a try
                    // without one: keep the first that did not abort there.
                    .find(|&(outcome, _)| k <= points || outcome != HomeBump::Aborted)
                    .expect("three tries");
                if k <= points {
                    assert_eq!(
                        (outcome, slot),
                        (HomeBump::Aborted, initial),
                        "{words} words, point {k}"
                    );
                } else {
                    assert_eq!(
                        (outcome, slot),
                        (expected, after),
                        "{words} words, no abort"
                    );
                }
            }
        }
    })
    .join()
    .unwrap();
}

/// A LAB installs into an empty slot (a new heap's, or one a collection emptied) and into a
/// claimed one, whatever the filler reserve, and not over a LAB that owns memory, even one
/// bumped to its end whose not-yet-zeroed rest runs further (its limit).
#[test]
fn lab_installs_find_empty_and_claimed_slots_free() {
    std::thread::spawn(|| {
        let Some(area) = area() else { return };
        assert!(pin(0));
        // Indexed by CPU number: a pinned thread's index cannot change between sections.
        let index = SlotIndex::Cpu;
        let home = index_now(area, index);
        for reserve in [0, 8, 32] {
            let slots = CpuLabSlots::new(online_cpus(), index);
            // SAFETY: `area` is this thread's registered area (the thread is pinned).
            let install =
                |top, end, limit| unsafe { slots.install(area, reserve, top, end, limit) };
            assert_eq!(install(1000, 1064, 1064).0, LabInstall::Done { cpu: home });
            assert_eq!(slots.load(home), (1000, 1064));
            assert!(
                matches!(install(2000, 2064, 2064).0, LabInstall::Occupied { .. }),
                "reserve {reserve}: a LAB with free memory stays"
            );
            // What a bump or claim of `bytes` did: the object's address, or the claimed LAB.
            let bump_or_claim = |bytes| {
                // SAFETY: as above.
                match unsafe { slots.bump_or_claim(area, bytes, reserve) }.0 {
                    LabBump::Object { address, .. } => Ok(address),
                    LabBump::Claimed {
                        top, end, limit, ..
                    } => Err((top, end, limit)),
                    other => panic!("{other:?} on a pinned thread"),
                }
            };
            // Claimed (nothing fits): the LAB, its reserve and its rest are the thread's.
            assert_eq!(bump_or_claim(128), Err((1000, 1064, 1064)));
            assert_eq!(install(3000, 3016, 3064).0, LabInstall::Done { cpu: home });
            assert_eq!(bump_or_claim(16), Ok(3000));
            // Full up to its end, not to its limit: it still owns its rest.
            assert!(
                matches!(install(4000, 4064, 4064).0, LabInstall::Occupied { .. }),
                "reserve {reserve}: a LAB whose rest runs past its end stays"
            );
            assert_eq!(bump_or_claim(8), Err((3016, 3016, 3064)));
            slots.store(home, EMPTY_LAB);
            assert_eq!(install(5000, 5064, 5064).0, LabInstall::Done { cpu: home });
        }
    })
    .join()
    .unwrap();
}

/// Instructions in each section's body, from the arming store to the commit: an abort
/// can land before each of them. A refusal leaves at its branch, before the commit: the
/// `_REFUSED` counts end there.
const BUMP_POINTS: usize = 11;
const BUMP_REFUSED_POINTS: usize = 10;
const INSTALL_POINTS: usize = 10;
const INSTALL_REFUSED_POINTS: usize = 9;
const CLAIM_POINTS: usize = 14;
/// Into a claimed slot (`top > end`): the check leaves at its first branch, to the stores.
const LAB_INSTALL_POINTS: usize = 13;
/// Into a slot bumped to its limit with no reserve: both checks, then the stores.
const LAB_INSTALL_FREE_POINTS: usize = 18;
const LAB_INSTALL_REFUSED_POINTS: usize = 13;
const INLINE_POINTS: usize = 8;

/// Runs `section(k)` from a fresh state for every injection point `k` (0: none) and one
/// beyond the last, retrying a point whose abort count a real preemption may have raised.
/// Checks that a section with an injected abort ends exactly as one without: `outcome`
/// gives what the section returned and the state it left.
fn at_every_boundary<T: PartialEq + std::fmt::Debug>(
    name: &str,
    points: usize,
    mut section: impl FnMut(u64) -> (T, u64),
) {
    let (expected, _) = section(0);
    for k in 1..=points as u64 + 1 {
        let (outcome, aborts) = (0..3)
            .map(|_| section(k))
            .min_by_key(|(_, aborts)| *aborts)
            .expect("three tries");
        assert_eq!(outcome, expected, "{name}: abort injected at boundary {k}");
        let injected = u64::from(k <= points as u64);
        assert_eq!(
            aborts, injected,
            "{name}: aborts with an injection at boundary {k}"
        );
    }
}

/// An abort at every instruction boundary of every restartable section (the per-CPU
/// level's bump and install, the `cpu-lab` bump-or-claim and install, and the inline `cpu-lab`
/// bump), in the spirit of librseq's injection points, with the arrays indexed by the CPU
/// and, where the kernel has them, by concurrency ids: each section restarts (or, inline,
/// returns 0 for the slow path) and ends with the same result and the same memory as
/// without the abort. Every byte is accounted for.
#[test]
fn an_abort_at_every_instruction_boundary_changes_nothing() {
    std::thread::spawn(|| {
        let Some(area) = area() else { return };
        assert!(pin(0));
        abort_at_every_boundary(area, SlotIndex::Cpu);
        if kernel_fills_mm_cid() {
            abort_at_every_boundary(area, SlotIndex::ConcurrencyId);
        } else {
            eprintln!("no concurrency ids here: the CPU-indexed sections only");
        }
    })
    .join()
    .unwrap();
}

/// The calling thread's index field now (its CPU, or its concurrency id).
fn index_now(area: *mut u8, index: SlotIndex) -> usize {
    // SAFETY: `area` is this thread's registered area; the field is an aligned `u32` in it.
    unsafe { area.add(index.field_offset()).cast::<u32>().read_volatile() as usize }
}

/// Runs `section` with the thread's index until that index is the same before and after it
/// (a concurrency id the kernel reassigned meanwhile runs it again); returns its result and
/// the index.
fn steady<T>(area: *mut u8, index: SlotIndex, mut section: impl FnMut(usize) -> T) -> (T, usize) {
    loop {
        let home = index_now(area, index);
        let result = section(home);
        if index_now(area, index) == home {
            return (result, home);
        }
    }
}

/// The sections of [`an_abort_at_every_instruction_boundary_changes_nothing`] over arrays
/// indexed by `index`. Every slot starts in the same state, so a section finds it whatever
/// index the thread has; each run reports the slot its section used (`cpu` set to 0 in the
/// outcome) and whether every other slot is as it was. A run during which the thread's
/// index changed (a concurrency id the kernel reassigned) is run again.
fn abort_at_every_boundary(area: *mut u8, index: SlotIndex) {
    // Every CPU the kernel numbers (the thread is pinned: its own count would be 1), which
    // bounds the concurrency ids too.
    let cpus = crate::platform::topology::Topology::discover().cpu_slots();
    let name = |section: &str| format!("{section}, indexed by {index}");
    let level_outcome = |outcome: Outcome| match outcome {
        Outcome::Done { before, .. } => Outcome::Done { cpu: 0, before },
        Outcome::Refused { seen, .. } => Outcome::Refused { cpu: 0, seen },
        other => other,
    };
    let level_slots = |slots: &CpuSlots, home: usize, initial: PackedWord| {
        let others = (0..slots.cpus()).all(|i| i == home || slots.load(i) == initial);
        (slots.load(home), others)
    };

    // Per-CPU level: a bump that fits, one that is refused, an install.
    let initial = PackedWord::new(100, 5);
    for (words, points) in [(2, BUMP_POINTS), (6, BUMP_REFUSED_POINTS)] {
        at_every_boundary(&name("bump"), points, |k| {
            let slots = CpuSlots::new(cpus, index);
            let ((outcome, aborts), home) = steady(area, index, |_| {
                (0..cpus).for_each(|i| slots.store(i, initial));
                // SAFETY: `area` is this thread's registered area.
                unsafe { slots.bump_injected(area, words, k) }
            });
            (
                (level_outcome(outcome), level_slots(&slots, home, initial)),
                aborts,
            )
        });
    }
    for (expected, points) in [
        (PackedWord::new(100, 5), INSTALL_POINTS),
        (PackedWord::new(100, 4), INSTALL_REFUSED_POINTS),
    ] {
        at_every_boundary(&name("install"), points, |k| {
            let slots = CpuSlots::new(cpus, index);
            let new = PackedWord::new(300, 9);
            let ((outcome, aborts), home) = steady(area, index, |home| {
                (0..cpus).for_each(|i| slots.store(i, initial));
                // SAFETY: as above; `home` is in bounds (an index is below the CPU count).
                unsafe { slots.install_injected(area, home, expected, new, k) }
            });
            (
                (level_outcome(outcome), level_slots(&slots, home, initial)),
                aborts,
            )
        });
    }

    // `cpu-lab` LABs: an object that fits, one that claims the tail, an install into an
    // empty slot and one refused by an occupied slot.
    let lab_slots = |slots: &CpuLabSlots, home: usize, initial: (usize, usize)| {
        let others = (0..slots.cpus()).all(|i| i == home || slots.load(i) == initial);
        (slots.load(home), slots.limit(home), others)
    };
    for bytes in [16, 64] {
        at_every_boundary(&name("bump_or_claim"), CLAIM_POINTS, |k| {
            let slots = CpuLabSlots::new(cpus, index);
            let ((bump, aborts), home) = steady(area, index, |_| {
                (0..cpus).for_each(|i| slots.store(i, (1000, 1040)));
                // SAFETY: as above.
                unsafe { slots.bump_or_claim_injected(area, bytes, 8, k) }
            });
            let bump = match bump {
                LabBump::Object { address, .. } => LabBump::Object { cpu: 0, address },
                LabBump::Claimed {
                    top, end, limit, ..
                } => LabBump::Claimed {
                    cpu: 0,
                    top,
                    end,
                    limit,
                },
                other => other,
            };
            ((bump, lab_slots(&slots, home, (1000, 1040))), aborts)
        });
    }
    for (occupant, reserve, points) in [
        // Claimed: `top` is `limit + reserve`, the LAB owns nothing.
        ((1048, 1040), 8, LAB_INSTALL_POINTS),
        // Bumped to its end, which is its limit, with no reserve: it owns nothing either.
        ((1040, 1040), 0, LAB_INSTALL_FREE_POINTS),
        ((1000, 1040), 8, LAB_INSTALL_REFUSED_POINTS),
    ] {
        at_every_boundary(&name("lab install"), points, |k| {
            let slots = CpuLabSlots::new(cpus, index);
            let ((install, aborts), home) = steady(area, index, |_| {
                (0..cpus).for_each(|i| slots.store(i, occupant));
                // SAFETY: as above.
                unsafe { slots.install_injected(area, reserve, 2000, 2992, 3992, k) }
            });
            let install = match install {
                LabInstall::Done { .. } => LabInstall::Done { cpu: 0 },
                LabInstall::Occupied { .. } => LabInstall::Occupied { cpu: 0 },
                other => other,
            };
            ((install, lab_slots(&slots, home, occupant)), aborts)
        });
    }

    // The inline bump gives up at once on an abort: the caller's slow path retries.
    let Some(offset) = glibc_registered_offset() else {
        return;
    };
    for k in 1..=INLINE_POINTS as u64 + 1 {
        let (object, lab, counted) = (0..3)
            .map(|_| {
                let slots = CpuLabSlots::new(cpus, index);
                let ((object, lab), _) = steady(area, index, |home| {
                    slots.store(home, (1000, 1040));
                    let slot = slots.slot_of(home as u32);
                    // SAFETY: `offset` is glibc's area offset; the slots are live.
                    let object = unsafe { lab_bump_injected(offset, slot, home as u32, 16, k) };
                    (object, slots.load(home))
                });
                (object, lab, slots.inline_aborts())
            })
            .min_by_key(|&(_, _, counted)| counted)
            .expect("three tries");
        if k <= INLINE_POINTS as u64 {
            assert_eq!(
                (object, lab, counted),
                (0, (1000, 1040), 1),
                "{}: boundary {k}",
                name("inline bump")
            );
        } else {
            assert_eq!(
                (object, lab, counted),
                (1000, (1016, 1040), 0),
                "{}: boundary {k}",
                name("inline bump")
            );
        }
    }
}

/// The highest CPU other than 0 this thread may run on, if any.
fn a_cpu_beyond_zero() -> Option<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, filled by the kernel.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        set
    };
    // SAFETY: reads bits inside the set.
    (1..libc::CPU_SETSIZE as usize)
        .rev()
        .find(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
}

/// A thread on a CPU beyond the slots (a topology smaller than the machine): every
/// section says so and writes nothing; the inline path finds the empty slot past the
/// array and returns 0.
#[test]
fn a_cpu_beyond_the_slots_touches_no_slot() {
    std::thread::spawn(|| {
        let Some(area) = area() else { return };
        let Some(cpu) = a_cpu_beyond_zero() else {
            eprintln!("skipped: this thread may only run on cpu 0");
            return;
        };
        assert!(pin(cpu));
        let slots = CpuSlots::new(1, SlotIndex::Cpu);
        slots.store(0, PackedWord::new(100, 5));
        // SAFETY: `area` is this thread's registered area.
        let (outcome, _) = unsafe { slots.bump(area, 2) };
        assert_eq!(outcome, Outcome::OutOfRange);
        assert_eq!(slots.load(0), PackedWord::new(100, 5));
        if let Some(offset) = glibc_registered_offset() {
            // SAFETY: `offset` is glibc's area offset.
            let home = unsafe { slots.bump_at_home(offset, 2) };
            assert_eq!(home, HomeBump::Refused);
            assert_eq!(slots.load(0), PackedWord::new(100, 5));
        }

        let labs = CpuLabSlots::new(1, SlotIndex::Cpu);
        labs.store(0, (1000, 1040));
        // SAFETY: as above.
        let (claimed, _) = unsafe { labs.bump_or_claim(area, 16, 8) };
        assert_eq!(claimed, LabBump::OutOfRange);
        labs.store(0, EMPTY_LAB);
        // SAFETY: as above.
        let (installed, _) = unsafe { labs.install(area, 8, 2000, 2992, 2992) };
        assert_eq!(installed, LabInstall::OutOfRange);
        assert_eq!(labs.load(0), EMPTY_LAB, "nothing installed");
        labs.store(0, (1000, 1040));
        assert_eq!(
            labs.slot_of(cpu as u32),
            labs.slot_of(1),
            "the empty slot past the array"
        );
        if let Some(offset) = glibc_registered_offset() {
            // SAFETY: `offset` is glibc's area offset; `slot_of` gives a live slot.
            let object = unsafe { lab_bump(offset, labs.slot_of(cpu as u32), cpu as u32, 16) };
            assert_eq!(object, 0);
            assert_eq!(labs.load(0), (1000, 1040), "CPU 0's LAB untouched");
        }
    })
    .join()
    .unwrap();
}

/// A child process made by fork keeps a working registration.
#[test]
fn a_forked_child_can_bump() {
    if area().is_none() {
        return;
    }
    let slots = CpuSlots::new(online_cpus(), SlotIndex::Cpu);
    // SAFETY: the child only runs async-signal-safe code (rseq sections, plain memory,
    // _exit) before exiting.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let ok = (|| {
            let area = current_area()?;
            for cpu in 0..slots.cpus() {
                slots.store(cpu, PackedWord::new(0, 1000));
            }
            // SAFETY: the child inherited this thread's registration.
            let (outcome, _) = unsafe { slots.bump(area, 4) };
            matches!(outcome, Outcome::Done { .. }).then_some(())
        })();
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(if ok.is_some() { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status}"
    );
}
