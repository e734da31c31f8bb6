//! Property tests: random sequences of allocations, retires, re-attaches and collections (plain,
//! with reset, with a new allocation range above the survivors) over random configurations,
//! checked against a model of what the test allocated. The configurations cover the `shared`
//! and `tlab` modes and the `hab` mode with one to five middle levels on simulated machines
//! whose threads migrate between virtual CPUs.

mod common;

use std::collections::BTreeMap;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;

use common::write_header;
use hab::{
    AllocError, AllocationStats, Collection, CpuIdSource, HeaderWordModel, Heap, HeapConfig, Level,
    LevelStats, Mode, Mutator, TlabPolicy, ZeroMemory,
};
use proptest::prelude::*;

/// A random heap configuration.
#[derive(Clone, Debug)]
struct Setup {
    mode: Mode,
    policy: TlabPolicy,
    capacity: usize,
    min_tlab: usize,
    max_tlab: usize,
    alignment: usize,
    zero: ZeroMemory,
    mutators: usize,
    /// The middle levels of `hab` mode; `None` in the other modes.
    hab: Option<HabSetup>,
}

/// The `hab` part of a configuration: middle levels on a simulated machine.
#[derive(Clone, Debug)]
struct HabSetup {
    middle: &'static str,
    topology: &'static str,
    seed: u64,
    migrate_probability: f64,
    /// Whether buffers shrink at the end of each cycle (and TLABs from the global heap).
    end_of_cycle: bool,
}

/// Middle-level lists of `hab` setups, with the size of their largest buffer.
const MIDDLES: [(&str, usize); 4] = [
    ("cpu:64KiB", 64 << 10),
    ("core:64KiB", 64 << 10),
    ("core:64KiB,package:256KiB", 256 << 10),
    (
        "cpu:32KiB,core:64KiB,llc:128KiB,package:256KiB,node:512KiB",
        512 << 10,
    ),
];

fn policy(choice: usize, min_tlab: usize, max_tlab: usize) -> TlabPolicy {
    match choice {
        0 => TlabPolicy::Fixed(min_tlab),
        1 => TlabPolicy::Fixed(4096),
        2 => TlabPolicy::Fixed(max_tlab),
        3 => TlabPolicy::Adaptive,
        _ => TlabPolicy::Growing,
    }
}

fn zero(choice: usize) -> ZeroMemory {
    match choice {
        0 => ZeroMemory::Ahead,
        1 => ZeroMemory::AtRefill,
        _ => ZeroMemory::Never,
    }
}

/// Half `shared`/`tlab` setups, half `hab` setups.
fn setup() -> impl Strategy<Value = Setup> {
    prop_oneof![classic_setup(), hab_setup()]
}

/// A `hab` setup: middle levels from `MIDDLES`, a largest TLAB that divides the lowest buffer
/// (every one of them is at least 32 KiB), a heap of 1 to 8 times the largest buffer, a
/// simulated machine, virtual CPUs that never, sometimes or always migrate at a refill, and
/// buffers that shrink at the end of each cycle or not.
fn hab_setup() -> impl Strategy<Value = Setup> {
    (
        (
            prop::sample::select(MIDDLES.to_vec()),
            prop::sample::select(vec!["1x2x1", "2x2x2", "4x10x2"]),
            any::<u64>(),
            prop::sample::select(vec![0.0, 0.3, 1.0]),
            any::<bool>(),
        ),
        0..5usize,
        prop::sample::select(vec![1usize, 2, 4, 8]),
        prop::sample::select(vec![256usize, 1024, 2048]),
        prop::sample::select(vec![4096usize, 16 << 10, 32 << 10]),
        prop::sample::select(vec![8usize, 16]),
        0..3usize,
        1..=4usize,
    )
        .prop_map(
            |(
                ((middle, largest), topology, seed, migrate_probability, end_of_cycle),
                policy_choice,
                factor,
                min_tlab,
                max_tlab,
                alignment,
                zero_memory,
                mutators,
            )| Setup {
                mode: Mode::Hab,
                policy: policy(policy_choice, min_tlab, max_tlab),
                capacity: largest * factor,
                min_tlab,
                max_tlab,
                alignment,
                zero: zero(zero_memory),
                mutators,
                hab: Some(HabSetup {
                    middle,
                    topology,
                    seed,
                    migrate_probability,
                    end_of_cycle,
                }),
            },
        )
}

fn classic_setup() -> impl Strategy<Value = Setup> {
    (
        prop_oneof![Just(Mode::Shared), Just(Mode::Tlab)],
        0..5usize,
        prop::sample::select(vec![64usize << 10, 128 << 10, 256 << 10, 1 << 20]),
        prop::sample::select(vec![256usize, 1024, 2048]),
        prop::sample::select(vec![4096usize, 16 << 10, 64 << 10]),
        prop::sample::select(vec![8usize, 16]),
        0..3usize,
        1..=3usize,
    )
        .prop_map(
            |(
                mode,
                policy_choice,
                capacity,
                min_tlab,
                max_tlab,
                alignment,
                zero_memory,
                mutators,
            )| {
                Setup {
                    mode,
                    policy: policy(policy_choice, min_tlab, max_tlab),
                    capacity,
                    min_tlab,
                    max_tlab,
                    alignment,
                    zero: zero(zero_memory),
                    mutators,
                    hab: None,
                }
            },
        )
}

/// Number of object sizes an `Op::Alloc` picks from (see `World::sizes`).
const SIZES: usize = 9;

#[derive(Clone, Debug)]
enum Op {
    /// `count` allocations of size number `size` by mutator `mutator`.
    Alloc {
        mutator: usize,
        size: usize,
        count: usize,
    },
    /// The mutator retires its TLAB.
    Retire { mutator: usize },
    /// The mutator detaches and a new one attaches in its place.
    Reattach { mutator: usize },
    /// Park everything, collect, verify, keep the range.
    Collect,
    /// Park everything, collect, verify, reset.
    CollectReset,
    /// Park everything, collect, verify, allocate from a sub-range above the survivors; its
    /// start and length are fractions (of 65536) of the free space.
    CollectSubRange { start: u16, len: u16 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..4usize, 0..SIZES, 1..48usize)
            .prop_map(|(mutator, size, count)| Op::Alloc { mutator, size, count }),
        1 => (0..4usize).prop_map(|mutator| Op::Retire { mutator }),
        1 => (0..4usize).prop_map(|mutator| Op::Reattach { mutator }),
        2 => Just(Op::Collect),
        1 => Just(Op::CollectReset),
        2 => (any::<u16>(), any::<u16>())
            .prop_map(|(start, len)| Op::CollectSubRange { start, len }),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    Keep,
    Reset,
    SubRange { start: u16, len: u16 },
}

/// The heap under test and the model of what it must hold.
struct World {
    heap: Arc<Heap>,
    mutators: Vec<Mutator>,
    sizes: [usize; SIZES],
    alignment: usize,
    zero: ZeroMemory,
    /// Every object not yet dead (allocated since the last reset), by address: new objects must
    /// not overlap any of them.
    live: BTreeMap<usize, usize>,
    /// The objects of the current allocation range: what a walk must meet.
    in_range: Vec<(usize, usize)>,
    /// Heap totals when the current allocation range was installed.
    base: AllocationStats,
    /// The configured middle levels, lowest first (empty unless the mode is `hab`).
    levels: Vec<Level>,
    /// How often the interesting paths ran, to keep the test honest.
    out_of_memory: u64,
    collections: u64,
    /// Allocations that took a TLAB served by a middle-level domain other than the thread's.
    foreign_refills: u64,
}

impl World {
    fn new(setup: &Setup) -> World {
        let mut builder = HeapConfig::builder()
            .capacity(setup.capacity)
            .mode(setup.mode)
            .tlab(setup.policy)
            .min_tlab(setup.min_tlab)
            .max_tlab(setup.max_tlab)
            .alignment(setup.alignment)
            .zero(setup.zero);
        if let Some(hab) = &setup.hab {
            builder = builder
                .middle(hab.middle)
                .end_of_cycle(hab.end_of_cycle)
                .simulated_topology(hab.topology)
                .cpu_id(CpuIdSource::Simulated {
                    seed: hab.seed,
                    migrate_probability: hab.migrate_probability,
                });
        }
        let config = builder.build().expect("valid configuration");
        let max_tlab = config.max_tlab_bytes();
        let heap = Heap::new(config, HeaderWordModel).expect("heap");
        let levels: Vec<Level> = heap
            .middle_levels()
            .into_iter()
            .map(|info| info.level)
            .collect();
        let mutators = (0..setup.mutators).map(|_| heap.attach()).collect();
        // Small sizes, sizes around the TLAB size and sizes above `max_tlab` (allocated outside
        // TLABs), none above half the heap so that any of them fits an empty heap.
        let limit = setup.capacity / 2;
        let sizes = [
            16,
            32,
            48,
            64,
            256,
            1024,
            4096,
            max_tlab + 16,
            2 * max_tlab + 32,
        ]
        .map(|bytes: usize| bytes.min(limit));
        World {
            heap,
            mutators,
            sizes,
            alignment: setup.alignment,
            zero: setup.zero,
            live: BTreeMap::new(),
            in_range: Vec::new(),
            base: AllocationStats::default(),
            levels,
            out_of_memory: 0,
            collections: 0,
            foreign_refills: 0,
        }
    }

    fn run(&mut self, op: &Op) {
        let n = self.mutators.len();
        match *op {
            Op::Alloc {
                mutator,
                size,
                count,
            } => {
                for _ in 0..count {
                    self.alloc(mutator % n, self.sizes[size]);
                }
            }
            Op::Retire { mutator } => self.mutators[mutator % n].retire(),
            Op::Reattach { mutator } => {
                let fresh = self.heap.attach();
                drop(std::mem::replace(&mut self.mutators[mutator % n], fresh));
            }
            Op::Collect => self.collect(After::Keep),
            Op::CollectReset => self.collect(After::Reset),
            Op::CollectSubRange { start, len } => self.collect(After::SubRange { start, len }),
        }
    }

    fn alloc(&mut self, mutator: usize, bytes: usize) {
        match self.try_alloc(mutator, bytes) {
            Ok(object) => self.record(object, bytes),
            Err(AllocError::OutOfMemory { bytes: asked }) => {
                assert_eq!(asked, bytes);
                // Out of memory only when the allocation range really has no room left.
                let range = self.heap.allocation_range();
                let used = self.heap.stats().used_bytes;
                assert!(
                    range.len() - used < bytes,
                    "spurious OutOfMemory: {used} of {} used, {bytes} asked",
                    range.len()
                );
                self.out_of_memory += 1;
                self.collect(After::Reset);
                let object = self
                    .try_alloc(mutator, bytes)
                    .unwrap_or_else(|e| panic!("{bytes} bytes in an empty heap: {e}"));
                self.record(object, bytes);
            }
            Err(error) => panic!("alloc({bytes}): {error}"),
        }
    }

    /// Allocates and checks how the TLAB sizing reacted: a new TLAB has the desired size (or
    /// the object's, if larger) unless it is the last piece of the range, never more than
    /// `max_tlab`; the growing policy grows by half at each refill; the desired size always
    /// stays in `[min_tlab, max_tlab]` on the alignment grid.
    fn try_alloc(&mut self, mutator: usize, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        let before = self.mutators[mutator].stats();
        let result = self.mutators[mutator].alloc(bytes);
        let after = self.mutators[mutator].stats();
        let config = self.heap.config();
        let (min_tlab, max_tlab) = (config.min_tlab_bytes(), config.max_tlab_bytes());
        if config.mode() == Mode::Shared {
            assert_eq!(after.refills, 0);
            return result;
        }
        let desired = after.desired_size_bytes as usize;
        assert!(
            (min_tlab..=max_tlab).contains(&desired) && desired.is_multiple_of(self.alignment),
            "desired TLAB size {desired} outside [{min_tlab}, {max_tlab}]"
        );
        if after.refills > before.refills {
            assert_eq!(after.refills, before.refills + 1);
            assert!(result.is_ok(), "a refill hands out the object");
            let len = (after.tlab_bytes - before.tlab_bytes) as usize;
            let wanted = (before.desired_size_bytes as usize).max(bytes);
            let min = min_tlab.max(bytes).min(wanted);
            let range = self.heap.allocation_range();
            let full = self.heap.stats().used_bytes == range.len();
            assert!(len >= bytes && len <= max_tlab, "TLAB of {len} for {bytes}");
            assert!(
                (min..=wanted).contains(&len),
                "TLAB of {len} bytes, {min}..={wanted} asked"
            );
            // A middle-level buffer hands out what it has left when that is at least the
            // minimum; the global heap only when it is full, or at the end of a cycle, a
            // thread's part of what is left, counted.
            let end_of_cycle = after.end_of_cycle_tlabs - before.end_of_cycle_tlabs;
            assert!(
                len == wanted || full || config.mode() == Mode::Hab || end_of_cycle == 1,
                "TLAB of {len} bytes, {wanted} wanted, and the range is not full"
            );
            if config.mode() != Mode::Hab {
                assert_eq!(end_of_cycle, u64::from(len < wanted), "counted when short");
            }
            if config.tlab() == TlabPolicy::Growing {
                let grown = before.desired_size_bytes as usize / 2 * 3;
                let grown = (grown - grown % self.alignment).clamp(min_tlab, max_tlab);
                assert_eq!(desired, grown, "growing: x1.5 per refill");
            }
        }
        if let TlabPolicy::Fixed(fixed) = config.tlab() {
            assert_eq!(desired, fixed);
        }
        if config.mode() == Mode::Hab {
            self.check_levels(&before, &after, bytes);
        }
        result
    }

    /// What one allocation did to the middle-level counters of its (single-threaded) mutator.
    /// With one thread no buffer is ever busy and no claim is ever lost, so a TLAB refill walks
    /// up a prefix of the levels: the lowest level serves every TLAB, each level above serves
    /// at most the one refill of the level below it, and unconfigured levels stay untouched. A
    /// domain other than the thread's serves only when the levels above and the global heap
    /// cannot give the minimum any more.
    fn check_levels(&mut self, before: &AllocationStats, after: &AllocationStats, bytes: usize) {
        let delta = after.since(before);
        let config = self.heap.config();
        for level in Level::ALL {
            if !self.levels.contains(&level) {
                assert_eq!(
                    delta.levels[level.index()],
                    LevelStats::default(),
                    "{level} is not configured"
                );
            }
        }
        let allocs: Vec<u64> = self
            .levels
            .iter()
            .map(|level| delta.levels[level.index()].allocs)
            .collect();
        assert_eq!(
            allocs[0], delta.refills,
            "the lowest level serves every TLAB: {allocs:?}"
        );
        assert_eq!(
            delta.tlabs_past_levels, 0,
            "one thread finds no buffer busy"
        );
        assert!(
            allocs.windows(2).all(|pair| pair[1] <= pair[0]) && allocs.iter().all(|&n| n <= 1),
            "a refill walks up a prefix of the levels: {allocs:?}"
        );
        let (_, foreign) = delta.middle_allocs();
        if foreign > 0 {
            assert_eq!(delta.refills, 1, "a foreign chunk ends in a TLAB");
            let wanted = (before.desired_size_bytes as usize).max(bytes);
            let min = config.min_tlab_bytes().max(bytes).min(wanted);
            let stats = self.heap.stats();
            let free = self.heap.allocation_range().len() - stats.used_bytes;
            assert!(
                free < min,
                "a foreign allocation while the global heap still had {free} bytes for a \
                 minimum of {min}: {delta}"
            );
            self.foreign_refills += 1;
        }
    }

    fn record(&mut self, object: NonNull<u8>, bytes: usize) {
        let address = object.as_ptr() as usize;
        assert_eq!(address % self.alignment, 0, "{address:#x} misaligned");
        let range = self.heap.allocation_range();
        assert!(
            range.start <= address && address + bytes <= range.end,
            "{address:#x}+{bytes} outside the allocation range {range:x?}"
        );
        if self.zero != ZeroMemory::Never {
            // SAFETY: `object` was just handed out for `bytes` bytes to this thread, which
            // has not written it yet; reading it as bytes is reading owned, initialised memory
            // (mapped memory is always initialised).
            let contents = unsafe { std::slice::from_raw_parts(object.as_ptr(), bytes) };
            assert!(
                contents.iter().all(|&byte| byte == 0),
                "object {address:#x}+{bytes} is not zeroed"
            );
        }
        if let Some((&before, &before_len)) = self.live.range(..address + bytes).next_back() {
            assert!(
                before + before_len <= address,
                "{address:#x}+{bytes} overlaps live object {before:#x}+{before_len}"
            );
        }
        write_header(object, bytes);
        self.live.insert(address, bytes);
        self.in_range.push((address, bytes));
    }

    /// Parks every mutator, collects, checks the heap against the model, then keeps the
    /// range, resets, or installs a sub-range above the survivors.
    fn collect(&mut self, after: After) {
        let parked: Vec<_> = self.mutators.drain(..).map(Mutator::park).collect();
        let desired_before: Vec<u64> = parked
            .iter()
            .map(|parked| parked.stats().desired_size_bytes)
            .collect();
        let before = self.heap.collections();
        let mut collection = self.heap.collection();
        self.check(&collection);
        let reserved = self.heap.reserved_range();
        let expected_range = match after {
            After::Keep => collection.allocation_range(),
            After::Reset => {
                collection.reset();
                self.live.clear();
                self.in_range.clear();
                reserved
            }
            After::SubRange { start, len } => {
                let top = collection.allocation_range().start + collection.used_bytes();
                let fraction = |bytes: usize, of: u16| {
                    let part = (bytes as u128 * u128::from(of) / 65536) as usize;
                    part - part % self.alignment
                };
                let start = top + fraction(reserved.end - top, start);
                let end = start + fraction(reserved.end - start, len);
                collection
                    .set_allocation_range(start..end)
                    .unwrap_or_else(|e| panic!("{e}"));
                // The survivors stay live (new objects must not overlap them) but are below
                // the new range, so the walk no longer meets them.
                self.in_range.clear();
                start..end
            }
        };
        if after != After::Keep {
            self.base = self.heap.stats().totals;
        }
        collection.finish();
        self.collections += 1;
        assert_eq!(self.heap.collections(), before + 1);
        assert_eq!(self.heap.allocation_range(), expected_range);
        if after != After::Keep {
            assert_eq!(self.heap.stats().used_bytes, 0);
        }
        self.mutators = parked.into_iter().map(|parked| parked.unpark()).collect();
        let config = self.heap.config();
        if config.mode() != Mode::Shared && config.tlab() == TlabPolicy::Growing {
            for (mutator, before) in self.mutators.iter().zip(desired_before) {
                let halved = before as usize / 2;
                let halved = (halved - halved % self.alignment)
                    .clamp(config.min_tlab_bytes(), config.max_tlab_bytes());
                assert_eq!(
                    mutator.stats().desired_size_bytes as usize,
                    halved,
                    "growing: halved per collection"
                );
            }
        }
    }

    fn check(&self, collection: &Collection<'_>) {
        let range: Range<usize> = collection.allocation_range();
        assert_eq!(range, self.heap.allocation_range());
        let mut objects = Vec::new();
        let mut last_end = range.start;
        let summary = collection
            .walk(|object| {
                let address = object.address.as_ptr() as usize;
                assert_eq!(address, last_end, "the walk is contiguous");
                last_end = address + object.bytes;
                assert!(last_end <= range.end);
                if !object.is_filler {
                    objects.push((address, object.bytes));
                }
            })
            .unwrap_or_else(|e| panic!("walk: {e}"));
        assert_eq!(collection.verify().unwrap(), summary);
        assert_eq!(summary.total_bytes(), collection.used_bytes());
        assert_eq!(last_end, range.start + collection.used_bytes());
        assert_eq!(collection.used_bytes(), self.heap.stats().used_bytes);

        // Exactly the objects allocated in this range, in address order.
        let mut expected = self.in_range.clone();
        expected.sort_unstable();
        assert_eq!(summary.objects as usize, expected.len());
        assert_eq!(
            summary.object_bytes,
            expected.iter().map(|&(_, bytes)| bytes).sum::<usize>()
        );
        assert_eq!(objects, expected);

        // Fillers are exactly the TLAB and middle-level buffer tails counted as waste since the
        // range was installed (by live and detached mutators, and by the collections that
        // retired the buffers), objects exactly the bytes counted as allocated.
        let totals = self.heap.stats().totals;
        let refill_waste = totals.refill_waste_bytes - self.base.refill_waste_bytes;
        let gc_waste = totals.gc_waste_bytes - self.base.gc_waste_bytes;
        let middle_waste = totals.middle_waste_bytes() - self.base.middle_waste_bytes();
        assert_eq!(
            summary.filler_bytes as u64,
            refill_waste + gc_waste + middle_waste
        );
        assert_eq!(
            summary.object_bytes as u64,
            totals.allocated_bytes() - self.base.allocated_bytes()
        );
        if self.heap.config().mode() == Mode::Shared {
            assert_eq!(summary.fillers, 0);
            assert_eq!(totals.refills, 0);
        }
        match self.levels.first() {
            // One thread: the lowest level served every TLAB ever taken.
            Some(lowest) => assert_eq!(totals.levels[lowest.index()].allocs, totals.refills),
            None => assert_eq!(totals.levels, AllocationStats::default().levels),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any operation sequence keeps walks equal to the model and fillers equal to the waste.
    #[test]
    fn walks_match_the_model(setup in setup(), ops in prop::collection::vec(op(), 1..80)) {
        // After any sequence of operations every collection's walk meets exactly the objects
        // the model holds and fillers equal to the growth of the waste counters (TLAB tails and,
        // in `hab` mode, middle-level buffer tails retired at refills and collections); no
        // allocation overlaps a live one or leaves the allocation range; TLABs have the sizes
        // the policy asks for (in `hab` mode at least the minimum when a buffer runs low);
        // every refill walks up a prefix of the middle levels, foreign only once the global heap
        // cannot serve it; OutOfMemory only happens when the range is really full, and a reset
        // always makes room again.
        let mut world = World::new(&setup);
        for op in &ops {
            world.run(op);
        }
        world.collect(After::Keep);
        // Detaching every mutator retires its TLAB: the final walk still matches.
        world.mutators.clear();
        let collection = world.heap.collection();
        world.check(&collection);
        drop(collection);
    }

    /// Random builder settings give a consistent configuration or an error naming a given field.
    #[test]
    fn configurations_are_valid_or_name_a_field(
        capacity in prop_oneof![Just(0usize), 1usize..(4 << 20), Just(1 << 45)],
        alignment in prop_oneof![Just(8usize), Just(16), Just(4096), 0usize..5000],
        min_tlab in prop::option::of(0usize..(1 << 20)),
        max_tlab in prop::option::of(0usize..(2 << 20)),
        policy in prop_oneof![
            Just(TlabPolicy::Adaptive),
            Just(TlabPolicy::Growing),
            (0usize..(1 << 20)).prop_map(TlabPolicy::Fixed),
        ],
    ) {
        let mut builder = HeapConfig::builder()
            .capacity(capacity)
            .alignment(alignment)
            .tlab(policy);
        if let Some(bytes) = min_tlab {
            builder = builder.min_tlab(bytes);
        }
        if let Some(bytes) = max_tlab {
            builder = builder.max_tlab(bytes);
        }
        match builder.build() {
            Ok(config) => {
                prop_assert!(alignment.is_power_of_two() && (8..=4096).contains(&alignment));
                prop_assert_eq!(config.capacity_bytes(), capacity);
                prop_assert!(config.min_tlab_bytes() >= alignment);
                prop_assert!(config.min_tlab_bytes() <= config.max_tlab_bytes());
                prop_assert!(config.max_tlab_bytes() <= capacity);
                prop_assert_eq!(config.min_tlab_bytes() % alignment, 0);
                prop_assert_eq!(config.max_tlab_bytes() % alignment, 0);
                prop_assert_eq!(capacity % alignment, 0);
                if let TlabPolicy::Fixed(bytes) = policy {
                    prop_assert_eq!(config.max_tlab_bytes(), bytes);
                }
                // A heap of this configuration allocates an object of its alignment.
                if capacity <= 4 << 20 {
                    let heap = Heap::new(config, HeaderWordModel).unwrap();
                    let mut mutator = heap.attach();
                    let object = mutator.alloc(alignment).unwrap();
                    prop_assert!(heap.reserved_range().contains(&(object.as_ptr() as usize)));
                }
            }
            Err(error) => {
                let given: &[&str] = &["capacity", "alignment", "min_tlab", "max_tlab", "tlab"];
                prop_assert!(given.contains(&error.field()), "{}", error);
                prop_assert!(error.to_string().contains(error.field()));
            }
        }
    }
}

/// The model harness itself reaches the paths the properties rely on: OOM, reset, sub-ranges,
/// and in `hab` mode middle-level waste and foreign allocations.
#[test]
fn the_harness_reaches_out_of_memory_and_sub_ranges() {
    let hab = |middle, topology, migrate_probability, end_of_cycle| {
        Some(HabSetup {
            middle,
            topology,
            seed: 7,
            migrate_probability,
            end_of_cycle,
        })
    };
    let deep = "cpu:32KiB,core:64KiB,llc:128KiB,package:256KiB,node:512KiB";
    for (mode, hab) in [
        (Mode::Shared, None),
        (Mode::Tlab, None),
        (Mode::Hab, hab("cpu:64KiB", "1x2x1", 0.0, false)),
        (
            Mode::Hab,
            hab("core:64KiB,package:256KiB", "2x2x2", 0.3, false),
        ),
        (Mode::Hab, hab(deep, "4x10x2", 1.0, false)),
        (Mode::Hab, hab("cpu:64KiB", "1x2x1", 0.0, true)),
        (
            Mode::Hab,
            hab("core:64KiB,package:256KiB", "2x2x2", 0.3, true),
        ),
        (Mode::Hab, hab(deep, "4x10x2", 1.0, true)),
    ] {
        let capacity = if hab.is_some() { 512 << 10 } else { 64 << 10 };
        let setup = Setup {
            mode,
            policy: TlabPolicy::Growing,
            capacity,
            min_tlab: 256,
            max_tlab: 4096,
            alignment: 16,
            zero: ZeroMemory::AtRefill,
            mutators: 2,
            hab,
        };
        let mut world = World::new(&setup);
        // 4096-byte objects; enough of them to fill the heap twice.
        let fill = |mutator| Op::Alloc {
            mutator,
            size: 6,
            count: capacity / 4096 / 2 + 20,
        };
        for op in [
            fill(0),
            Op::Collect,
            Op::CollectSubRange {
                start: 0,
                len: 32768,
            },
            fill(1),
            Op::Retire { mutator: 0 },
            Op::Reattach { mutator: 1 },
            fill(0),
            Op::CollectReset,
            fill(1),
            fill(0),
            fill(1),
        ] {
            world.run(&op);
        }
        assert!(world.out_of_memory >= 1, "{mode}: the heap never filled");
        assert!(world.collections >= 4, "{mode}");
        assert!(!world.live.is_empty());
        if let Some(hab) = &setup.hab {
            let totals = world.heap.stats().totals;
            let short: u64 = totals.levels.iter().map(|level| level.short_refills).sum();
            assert!(totals.middle_waste_bytes() > 0, "{setup:?}: {totals}");
            if hab.end_of_cycle {
                // Near the end of each range the buffers take their share of what is left.
                assert!(short > 0, "{setup:?}: {totals}");
            } else {
                // Whole buffers: the last ones outlive the global heap, and serve foreign
                // requests then.
                assert_eq!(short, 0, "{setup:?}: {totals}");
                assert!(world.foreign_refills > 0, "{setup:?}: {totals}");
            }
        }
    }
}
